//! `multiversion!`: a function compiled three times, for AVX-512, for AVX2 with FMA and for the
//! baseline, picking the best the CPU has at run time.
//!
//! Why not `pulp::Arch::dispatch` with a closure: the closure body is a separate function that
//! LLVM does not inline into the target-feature wrapper, so it stayed SSE2 code (seen in a
//! profile: the row kernels ran on 128-bit registers). Here the body itself is compiled under
//! `#[target_feature]`, and the `#[inline(always)]` kernels it calls inherit those features.
//!
//! The numerics do not depend on the version chosen: Rust never contracts a multiply and an
//! add into a fused multiply-add on its own, and the reductions in `kernels.rs` use a fixed
//! number of independent accumulators, so every version performs the same operations in the
//! same order.

/// Defines a function whose body is compiled per instruction set and chosen at run time.
macro_rules! multiversion {
    (
        $(#[$meta:meta])*
        $vis:vis fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)? $body:block
    ) => {
        $(#[$meta])*
        #[allow(clippy::too_many_arguments)]
        // The only unsafe code: calling a `#[target_feature]` function once detection passed.
        #[allow(unsafe_code)]
        $vis fn $name($($arg: $ty),*) $(-> $ret)? {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,bmi2")]
                #[allow(clippy::too_many_arguments)]
                fn v4($($arg: $ty),*) $(-> $ret)? $body
                #[target_feature(enable = "avx2,fma")]
                #[allow(clippy::too_many_arguments)]
                fn v3($($arg: $ty),*) $(-> $ret)? $body
                if $crate::multiversion::has_avx512() {
                    // SAFETY: the CPU supports every feature `v4` is compiled for (checked above).
                    return unsafe { v4($($arg),*) };
                }
                if $crate::multiversion::has_avx2_fma() {
                    // SAFETY: the CPU supports every feature `v3` is compiled for (checked above).
                    return unsafe { v3($($arg),*) };
                }
            }
            $body
        }
    };
}

pub(crate) use multiversion;

/// Whether the CPU runs the AVX-512 version (std caches the detection).
#[cfg(target_arch = "x86_64")]
#[inline]
pub(crate) fn has_avx512() -> bool {
    std::is_x86_feature_detected!("avx512f")
        && std::is_x86_feature_detected!("avx512bw")
        && std::is_x86_feature_detected!("avx512dq")
        && std::is_x86_feature_detected!("avx512vl")
        && has_avx2_fma()
        && std::is_x86_feature_detected!("bmi2")
}

/// Whether the CPU runs the AVX2 version.
#[cfg(target_arch = "x86_64")]
#[inline]
pub(crate) fn has_avx2_fma() -> bool {
    std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
}
