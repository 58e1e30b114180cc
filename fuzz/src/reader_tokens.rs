//! The reader tokenizers budgets are counted in (`o200k_base`, `cl100k_base`): any text. No panic,
//! deterministic counts, and the additivity both claim (`additive_at_line_starts`), which the
//! packer's line-cached counting relies on: the count of a text is the sum of the counts of its
//! pieces cut before every ASCII letter or `[` that follows a newline.

use evicortex::{ReaderTokenizer, TiktokenReader};

/// The cut the compiler's line cache makes (`split_at_line_starts`).
fn pieces(text: &str) -> Vec<&str> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut start = 0;
    for i in 1..bytes.len() {
        if bytes[i - 1] == b'\n' && (bytes[i].is_ascii_alphabetic() || bytes[i] == b'[') {
            out.push(&text[start..i]);
            start = i;
        }
    }
    if start < bytes.len() {
        out.push(&text[start..]);
    }
    out
}

/// One input (what libFuzzer calls the target with): panics on a violated property.
pub fn run(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    for reader in [TiktokenReader::o200k_base(), TiktokenReader::cl100k_base()] {
        let whole = reader.count(&text).expect("counting ordinary text cannot fail");
        assert_eq!(whole, reader.count(&text).unwrap(), "{}: counts differ", reader.name());
        assert!(whole <= text.len(), "{}: more tokens than bytes", reader.name());
        if reader.additive_at_line_starts() {
            let sum: usize = pieces(&text).iter().map(|p| reader.count(p).unwrap()).sum();
            assert_eq!(whole, sum, "{}: not additive at line starts for {:?}", reader.name(), text);
        }
    }
}
