//! Reader tokenizers: how the model that reads the compiled context counts tokens. Budgets are
//! counted in them, exactly.

use std::{
    path::Path,
    sync::{Arc, Mutex},
};

/// Counts tokens the way the reader model will. Implementations must be deterministic.
pub trait ReaderTokenizer: Send + Sync + std::fmt::Debug {
    /// A stable name identifying the vocabulary (`o200k_base`, or an HF tokenizer's content
    /// digest), recorded in the output and used as a cache key.
    fn name(&self) -> &str;
    /// The number of tokens of `text`, encoded as ordinary text (no special tokens added).
    fn count(&self, text: &str) -> Result<usize, ReaderTokenizerError>;
    /// Whether counts add up across line starts: `count(a + b) == count(a) + count(b)` whenever
    /// `a` ends with `'\n'` and `b` starts with an ASCII letter or `'['`. When true, a rendered
    /// block can be counted line by line with cached counts, exactly. Claim it only if it holds.
    fn additive_at_line_starts(&self) -> bool {
        false
    }
    /// An owned handle counting exactly as this one, for work that outlives the borrow (the
    /// memory facade's background precount); `None` when it cannot be had.
    fn shared(&self) -> Option<Arc<dyn ReaderTokenizer>> {
        None
    }
}

/// Why a reader tokenizer could not be loaded or used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReaderTokenizerError {
    /// The name is neither a known vocabulary nor a path to a `tokenizer.json`.
    #[error(
        "unknown reader tokenizer {name:?}: expected o200k_base, cl100k_base or the path of an \
         existing HF tokenizer.json"
    )]
    Unknown {
        /// The name given.
        name: String,
    },
    /// A `tokenizer.json` could not be read or parsed.
    #[error("reader tokenizer {path}: {reason}")]
    Load {
        /// The file.
        path: String,
        /// What failed.
        reason: String,
    },
    /// Encoding failed.
    #[error("reader tokenizer {name} failed to encode: {reason}")]
    Encode {
        /// The tokenizer.
        name: String,
        /// What failed.
        reason: String,
    },
}

/// Loads a reader tokenizer by name: `o200k_base`, `cl100k_base`, or a path to an HF
/// `tokenizer.json`. Anything else is an error; there is no fallback.
pub fn reader_tokenizer(name: &str) -> Result<Box<dyn ReaderTokenizer>, ReaderTokenizerError> {
    match name {
        "o200k_base" => Ok(Box::new(TiktokenReader::o200k_base())),
        "cl100k_base" => Ok(Box::new(TiktokenReader::cl100k_base())),
        _ if name.ends_with(".json") && Path::new(name).is_file() => {
            Ok(Box::new(HfTokenizerReader::from_file(Path::new(name))?))
        }
        _ => Err(ReaderTokenizerError::Unknown { name: name.to_owned() }),
    }
}

/// OpenAI's BPE vocabularies as shipped by `tiktoken-rs`.
#[derive(Clone)]
pub struct TiktokenReader {
    name: &'static str,
    bpe: &'static tiktoken_rs::CoreBPE,
}

impl TiktokenReader {
    /// `o200k_base` (GPT-4o-class readers).
    pub fn o200k_base() -> TiktokenReader {
        TiktokenReader { name: "o200k_base", bpe: tiktoken_rs::o200k_base_singleton() }
    }
    /// `cl100k_base` (GPT-4 / GPT-3.5-class readers).
    pub fn cl100k_base() -> TiktokenReader {
        TiktokenReader { name: "cl100k_base", bpe: tiktoken_rs::cl100k_base_singleton() }
    }
}

impl std::fmt::Debug for TiktokenReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TiktokenReader").field("name", &self.name).finish()
    }
}

impl ReaderTokenizer for TiktokenReader {
    fn name(&self) -> &str {
        self.name
    }
    fn count(&self, text: &str) -> Result<usize, ReaderTokenizerError> {
        Ok(self.bpe.encode_ordinary(text).len())
    }
    /// Holds for both vocabularies: BPE runs on each match of the pre-tokenizer pattern alone, and
    /// no alternative of either pattern matches a newline followed by a letter or `[` (letters
    /// may follow only a non-newline character, newline runs end before non-whitespace, and there
    /// is no look-behind), so a line start is always a match boundary. Checked by
    /// `counts_add_up_across_line_starts`.
    fn additive_at_line_starts(&self) -> bool {
        true
    }
    fn shared(&self) -> Option<Arc<dyn ReaderTokenizer>> {
        Some(Arc::new(self.clone()))
    }
}

/// Cached line counts of one tokenizer, by BLAKE3 digest of the line.
pub(crate) type LineCounts = rustc_hash::FxHashMap<[u8; 32], u32>;

/// A tokenizer that is additive at line starts, counting a text as the sum of its lines' counts,
/// each computed once and cached: the packer counts many blocks that share most of their lines.
/// Lines are looked up in a shared cache that other compiles read at the same time, then in
/// this counter's own; new counts go to its own, which the caller adds to the shared one later.
/// A line met again is found by its text among the lines this counter has met: the shared cache
/// holds every line of a large namespace, so each of its lookups misses the processor's caches,
/// and a packer counts the same few hundred lines in block after block.
#[derive(Debug)]
pub(crate) struct LineCachedCount<'a> {
    inner: &'a dyn ReaderTokenizer,
    shared: Option<&'a LineCounts>,
    counts: Mutex<Counted>,
}

/// A counter's own counts: those it made (by digest, for the shared cache) and every line it met.
#[derive(Debug, Default)]
struct Counted {
    fresh: LineCounts,
    met: rustc_hash::FxHashMap<String, u32>,
}

impl<'a> LineCachedCount<'a> {
    /// `None` when `inner` does not claim [`ReaderTokenizer::additive_at_line_starts`].
    pub(crate) fn new(
        inner: &'a dyn ReaderTokenizer,
        shared: Option<&'a LineCounts>,
    ) -> Option<LineCachedCount<'a>> {
        inner.additive_at_line_starts().then(|| LineCachedCount {
            inner,
            shared,
            counts: Mutex::new(Counted::default()),
        })
    }

    /// The counter with `fresh` as the lines it has counted already (another counter's, of the
    /// same compile, not yet in the shared cache).
    pub(crate) fn starting_from(self, fresh: LineCounts) -> LineCachedCount<'a> {
        let counts = Mutex::new(Counted { fresh, met: Default::default() });
        LineCachedCount { counts, ..self }
    }

    /// The lines counted that the shared cache did not hold.
    pub(crate) fn into_fresh(self) -> LineCounts {
        self.counts.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner).fresh
    }
}

impl ReaderTokenizer for LineCachedCount<'_> {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn count(&self, text: &str) -> Result<usize, ReaderTokenizerError> {
        let mut counts = self.counts.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let Counted { fresh, met } = &mut *counts;
        let mut total = 0usize;
        for line in split_at_line_starts(text) {
            if let Some(&n) = met.get(line) {
                total += n as usize;
                continue;
            }
            let digest = *blake3::hash(line.as_bytes()).as_bytes();
            let cached =
                self.shared.and_then(|shared| shared.get(&digest)).or_else(|| fresh.get(&digest));
            let n = match cached {
                Some(&n) => n,
                None => {
                    let n = u32::try_from(self.inner.count(line)?).unwrap_or(u32::MAX);
                    fresh.insert(digest, n);
                    n
                }
            };
            met.insert(line.to_owned(), n);
            total += n as usize;
        }
        Ok(total)
    }
    fn additive_at_line_starts(&self) -> bool {
        true
    }
}

/// The lines of `texts`, each cut as [`LineCachedCount`] cuts a block, with the digests its
/// caches key them by.
pub(crate) fn lines_with_digests<'t>(
    texts: impl IntoIterator<Item = &'t str>,
) -> Vec<([u8; 32], &'t str)> {
    texts
        .into_iter()
        .flat_map(split_at_line_starts)
        .map(|line| (*blake3::hash(line.as_bytes()).as_bytes(), line))
        .collect()
}

/// `text` cut before every ASCII letter or `[` that follows a newline.
fn split_at_line_starts(text: &str) -> impl Iterator<Item = &str> {
    let bytes = text.as_bytes();
    let mut start = 0;
    let mut cuts = (1..bytes.len()).filter(move |&i| {
        bytes[i - 1] == b'\n' && (bytes[i].is_ascii_alphabetic() || bytes[i] == b'[')
    });
    std::iter::from_fn(move || {
        if start >= bytes.len() {
            return None;
        }
        let end = cuts.next().unwrap_or(bytes.len());
        let line = &text[start..end];
        start = end;
        Some(line)
    })
}

/// A Hugging Face `tokenizer.json`, counted without added special tokens. Named by the BLAKE3
/// digest of the file, so the same file gives the same name anywhere.
#[derive(Clone)]
pub struct HfTokenizerReader {
    name: String,
    tokenizer: Arc<tokenizers::Tokenizer>,
}

impl HfTokenizerReader {
    /// Loads `path`.
    pub fn from_file(path: &Path) -> Result<HfTokenizerReader, ReaderTokenizerError> {
        let load = |reason: String| ReaderTokenizerError::Load {
            path: path.display().to_string(),
            reason,
        };
        let bytes = fs_err::read(path).map_err(|e| load(e.to_string()))?;
        let tokenizer =
            tokenizers::Tokenizer::from_bytes(&bytes).map_err(|e| load(e.to_string()))?;
        let digest = blake3::hash(&bytes).to_hex();
        Ok(HfTokenizerReader {
            name: format!("hf-tokenizer-json:{}", &digest[..32]),
            tokenizer: Arc::new(tokenizer),
        })
    }
}

impl std::fmt::Debug for HfTokenizerReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HfTokenizerReader").field("name", &self.name).finish()
    }
}

impl ReaderTokenizer for HfTokenizerReader {
    fn name(&self) -> &str {
        &self.name
    }
    fn count(&self, text: &str) -> Result<usize, ReaderTokenizerError> {
        self.tokenizer.encode(text, false).map(|e| e.len()).map_err(|e| {
            ReaderTokenizerError::Encode { name: self.name.clone(), reason: e.to_string() }
        })
    }
    fn shared(&self) -> Option<Arc<dyn ReaderTokenizer>> {
        Some(Arc::new(self.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_vocabularies_count_and_unknown_names_fail() {
        let o200k = reader_tokenizer("o200k_base").unwrap();
        let cl100k = reader_tokenizer("cl100k_base").unwrap();
        assert_eq!(o200k.count("hello world").unwrap(), 2);
        assert_eq!(cl100k.count("hello world").unwrap(), 2);
        assert_eq!(o200k.count("").unwrap(), 0);
        let err = reader_tokenizer("gpt2").unwrap_err();
        assert!(matches!(err, ReaderTokenizerError::Unknown { .. }), "{err}");
        assert!(reader_tokenizer("missing/tokenizer.json").is_err());
    }

    #[test]
    fn counts_are_not_additive_over_concatenation() {
        // Why the packer measures the rendered block instead of summing pieces.
        let t = TiktokenReader::o200k_base();
        let (a, b) = ("hello", " world");
        assert_eq!(t.count(a).unwrap() + t.count(b).unwrap(), 2);
        let (c, d) = ("line.\n", "\n");
        let joined = t.count(&format!("{c}{d}")).unwrap();
        assert!(joined < t.count(c).unwrap() + t.count(d).unwrap(), "{joined}");
    }

    #[test]
    fn line_cached_counts_equal_whole_counts() {
        let block = "Evidence from memory.\n\nSession s1 (2024-05-02):\n[#1] 10:00 user: I moved.\n\
                     [#2 #7] 10:01 assistant: Nice!\nA second line\n\n\nSession s2 (2024-06-01):\n\
                     [#3] 2024-06-02 09:00 user: /path \n [x]\n";
        for reader in [TiktokenReader::o200k_base(), TiktokenReader::cl100k_base()] {
            let cached = LineCachedCount::new(&reader, None).unwrap();
            assert_eq!(cached.count(block).unwrap(), reader.count(block).unwrap());
            assert_eq!(cached.count(block).unwrap(), reader.count(block).unwrap());
            assert_eq!(cached.count("").unwrap(), 0);
            let fresh = cached.into_fresh();
            assert_eq!(fresh.len(), 7, "one entry per line start");
            // Over a shared cache holding those lines, nothing is counted again.
            let again = LineCachedCount::new(&reader, Some(&fresh)).unwrap();
            assert_eq!(again.count(block).unwrap(), reader.count(block).unwrap());
            assert!(again.into_fresh().is_empty());
        }
        let lines: Vec<&str> = split_at_line_starts("a\nb\n\n[c\n d\n").collect();
        assert_eq!(lines, ["a\n", "b\n\n", "[c\n d\n"]);
    }

    proptest::proptest! {
        #[test]
        fn counts_add_up_across_line_starts(
            a in "[a-zA-Z0-9 .,:'!?/()\\[\\]#\t\r\n\u{e9}\u{65e5}\u{1f642}-]{0,40}",
            first in "[a-zA-Z\\[]",
            b in "[a-zA-Z0-9 .,:'!?/()\\[\\]#\t\r\n\u{e9}\u{65e5}\u{1f642}-]{0,40}",
        ) {
            let (a, b) = (format!("{a}\n"), format!("{first}{b}"));
            for reader in [TiktokenReader::o200k_base(), TiktokenReader::cl100k_base()] {
                let joined = reader.count(&format!("{a}{b}")).unwrap();
                proptest::prop_assert_eq!(joined, reader.count(&a).unwrap() + reader.count(&b).unwrap());
            }
        }
    }

    #[test]
    fn loads_an_hf_tokenizer_json() {
        let dir = std::env::temp_dir().join(format!("evicortex-reader-{}", std::process::id()));
        fs_err::create_dir_all(&dir).unwrap();
        let path = dir.join("tokenizer.json");
        // A minimal word-level tokenizer.json written by hand.
        let json = r#"{"version":"1.0","truncation":null,"padding":null,"added_tokens":[],
          "normalizer":null,"pre_tokenizer":{"type":"Whitespace"},"post_processor":null,"decoder":null,
          "model":{"type":"WordLevel","vocab":{"[UNK]":0,"hello":1,"world":2},"unk_token":"[UNK]"}}"#;
        fs_err::write(&path, json).unwrap();
        let reader = reader_tokenizer(path.to_str().unwrap()).unwrap();
        assert!(reader.name().starts_with("hf-tokenizer-json:"));
        assert_eq!(reader.count("hello world again!").unwrap(), 4);
        fs_err::remove_dir_all(&dir).unwrap();
    }
}
