#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| evicortex_fuzz::reader_tokens::run(data));
