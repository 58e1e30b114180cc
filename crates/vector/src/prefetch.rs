//! Cache-line prefetch hints for rows read at scattered places (the candidates a sketch or a seed
//! set chose): their misses then overlap the work on the rows before them instead of stalling it.

/// Asks the processor to bring every cache line of `row` toward its first-level cache, without
/// waiting for it. Only a hint: nothing is read, and it has no effect off x86-64.
#[inline(always)]
pub(crate) fn prefetch<T>(row: &[T]) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        let bytes = std::mem::size_of_val(row);
        let base = row.as_ptr().cast::<i8>();
        for offset in (0..bytes).step_by(64) {
            // SAFETY: `_mm_prefetch` is a hint that never faults and writes nothing, and SSE, the
            // only feature it needs, is part of every x86-64 processor; the address is inside
            // `row`, so the pointer arithmetic stays in its allocation.
            #[allow(unsafe_code)]
            unsafe {
                _mm_prefetch::<_MM_HINT_T0>(base.add(offset))
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = row;
}
