#![no_main]
// The macro's own code (it writes crash inputs with std::fs), not this crate's.
#![allow(clippy::disallowed_methods)]

libfuzzer_sys::fuzz_target!(|data: &[u8]| evicortex_fuzz::compile_options::run(data));
