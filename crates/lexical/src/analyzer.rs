//! The analyzer: text to BM25 terms. Queries and documents go through the same function.
//!
//! Rules, in order:
//! 1. Unicode word segmentation (UAX #29, `unicode-segmentation`'s word bounds). UAX #29 already
//!    keeps numbers and dotted or underscored identifiers whole: `3.5`, `v2.3.1`, `user_id`,
//!    `node.js`, `don't`, `1,000`.
//! 2. Segments joined by a single hyphen with no space around it form one term: `gpt-4o`,
//!    `covid-19`, `e-mail`, `state-of-the-art`. The parts are not emitted separately, so `gpt-4o`
//!    does not match `gpt 4o`.
//! 3. Segments without a letter or digit (spaces, punctuation, symbols, emoji) are dropped.
//! 4. Each term is lowercased with Unicode's `to_lowercase` (a case mapping, not full case folding:
//!    `ß` stays `ß`, `İ` becomes `i̇`).
//! 5. With [`Analyzer::EnglishSnowball`] only: a term made of letters alone (an apostrophe inside
//!    allowed) is reduced to its Snowball English stem (`painting`, `paints`, `painted` ->
//!    `paint`); terms with digits, dots, underscores or hyphens (versions, identifiers, models)
//!    are left whole, so stemming never changes which identifiers match.
//!
//! No stop words: BM25's inverse document frequency already discounts common words. Repeated
//! terms are kept (term frequency matters to BM25). Changing any rule changes results, so the
//! analyzer's [`Analyzer::version`] changes with it and is recorded in every compiled context.

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};
use unicode_segmentation::UnicodeSegmentation;

/// Version of rules 1 to 4 ([`Analyzer::Plain`]).
pub const ANALYZER_VERSION: &str = "evicortex-analyzer-1";

/// Which rules a lexical index and its queries follow (see the module docs).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Analyzer {
    /// Rules 1 to 4: exact lowercased words.
    Plain,
    /// Rules 1 to 5: words reduced to their Snowball English stem.
    EnglishSnowball,
}

impl Analyzer {
    /// The version of this analyzer's rules, recorded with every result it produced.
    pub fn version(self) -> &'static str {
        match self {
            Analyzer::Plain => ANALYZER_VERSION,
            Analyzer::EnglishSnowball => "evicortex-analyzer-1+snowball-english",
        }
    }

    /// The terms of `text` under this analyzer, in order of appearance, duplicates kept.
    pub fn analyze(self, text: &str) -> Vec<String> {
        let mut terms = Vec::new();
        self.analyze_into(text, &mut terms);
        terms
    }

    /// Like [`Analyzer::analyze`], appending to `terms`.
    pub fn analyze_into(self, text: &str, terms: &mut Vec<String>) {
        let start = terms.len();
        analyze_into(text, terms);
        if self == Analyzer::EnglishSnowball {
            STEMS.with_borrow_mut(|stems| {
                for term in &mut terms[start..] {
                    if is_word(term) {
                        if term.contains('\u{2019}') {
                            *term = term.replace('\u{2019}', "'");
                        }
                        stems.stem(term);
                    }
                }
            });
        }
    }
}

fn english_stemmer() -> &'static rust_stemmers::Stemmer {
    static STEMMER: OnceLock<rust_stemmers::Stemmer> = OnceLock::new();
    STEMMER.get_or_init(|| rust_stemmers::Stemmer::create(rust_stemmers::Algorithm::English))
}

/// Words a thread's stem memo holds before it starts afresh (a few MB; English text of any
/// size uses far fewer distinct words).
const STEM_MEMO_WORDS: usize = 200_000;

thread_local! {
    /// Stems already computed on this thread. Building a store's indexes stems every word of
    /// every turn, and of every window of turns again: the Snowball stemmer was a quarter of the
    /// CPU time of opening a store of 70k turns, on a vocabulary of a few tens of thousands.
    static STEMS: std::cell::RefCell<StemMemo> = std::cell::RefCell::new(StemMemo::default());
}

#[derive(Default)]
struct StemMemo {
    /// Word to stem, for the words whose stem differs; `None` for those that are their own stem.
    stems: std::collections::HashMap<Box<str>, Option<Box<str>>>,
}

impl StemMemo {
    /// Replaces `word` by its Snowball English stem.
    fn stem(&mut self, word: &mut String) {
        if let Some(stem) = self.stems.get(word.as_str()) {
            if let Some(stem) = stem {
                *word = String::from(&**stem);
            }
            return;
        }
        let stem = english_stemmer().stem(word);
        let stem = (stem != word.as_str()).then(|| Box::<str>::from(&*stem));
        if self.stems.len() >= STEM_MEMO_WORDS {
            self.stems.clear();
        }
        self.stems.insert(Box::from(word.as_str()), stem.clone());
        if let Some(stem) = stem {
            *word = String::from(stem);
        }
    }
}

/// Letters only, with apostrophes inside (`don't`, `caroline's`).
fn is_word(term: &str) -> bool {
    term.chars().all(|c| c.is_alphabetic() || c == '\'' || c == '\u{2019}')
        && term.chars().next().is_some_and(char::is_alphabetic)
}

/// The terms of `text` under [`Analyzer::Plain`], in order of appearance, duplicates kept.
pub fn analyze(text: &str) -> Vec<String> {
    let mut terms = Vec::new();
    analyze_into(text, &mut terms);
    terms
}

/// Like [`analyze`], appending to `terms` (reuses the caller's allocation).
pub fn analyze_into(text: &str, terms: &mut Vec<String>) {
    // The term being built, as a byte range of `text`, and whether a hyphen directly follows it.
    let mut current: Option<(usize, usize)> = None;
    let mut hyphen_end: Option<usize> = None;
    for (start, segment) in text.split_word_bound_indices() {
        let end = start + segment.len();
        if segment.chars().any(char::is_alphanumeric) {
            match (current, hyphen_end) {
                (Some((term_start, _)), Some(h)) if h == start => current = Some((term_start, end)),
                _ => {
                    flush(text, current, terms);
                    current = Some((start, end));
                }
            }
            hyphen_end = None;
        } else if is_hyphen(segment)
            && hyphen_end.is_none()
            && current.is_some_and(|(_, e)| e == start)
        {
            hyphen_end = Some(end);
        } else {
            flush(text, current.take(), terms);
            hyphen_end = None;
        }
    }
    flush(text, current, terms);
}

fn is_hyphen(segment: &str) -> bool {
    // ASCII hyphen-minus, Unicode hyphen and non-breaking hyphen.
    matches!(segment, "-" | "\u{2010}" | "\u{2011}")
}

fn flush(text: &str, range: Option<(usize, usize)>, terms: &mut Vec<String>) {
    if let Some((start, end)) = range {
        terms.push(text[start..end].to_lowercase());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn check(text: &str, expect: &[&str]) {
        assert_eq!(analyze(text), expect, "analyzing {text:?}");
    }

    #[test]
    fn keeps_versions_models_and_identifiers_whole() {
        check("Upgrade to v2.3.1 now.", &["upgrade", "to", "v2.3.1", "now"]);
        check("gpt-4o and GPT-4o-mini", &["gpt-4o", "and", "gpt-4o-mini"]);
        check("SELECT user_id FROM t", &["select", "user_id", "from", "t"]);
        check("pi is 3.14159, about 1,000 ms", &["pi", "is", "3.14159", "about", "1,000", "ms"]);
    }

    #[test]
    fn hyphen_joins_only_without_spaces() {
        check("well - known", &["well", "known"]);
        check("well-known", &["well-known"]);
        check("a--b", &["a", "b"]);
        check("trailing- dash", &["trailing", "dash"]);
        check("-leading", &["leading"]);
    }

    #[test]
    fn folds_case_and_drops_punctuation_and_symbols() {
        check("Lisbon! LISBON? lisbon…", &["lisbon", "lisbon", "lisbon"]);
        check("I'm in São Paulo 🎉 — ok", &["i'm", "in", "são", "paulo", "ok"]);
        check("", &[]);
        check("?!  ...", &[]);
    }

    #[test]
    fn snowball_stems_words_and_leaves_identifiers_whole() {
        let stemmed = Analyzer::EnglishSnowball
            .analyze("Caroline's paintings: she painted, paints; v2.3.1 gpt-4o user_id running");
        assert_eq!(
            stemmed,
            ["carolin", "paint", "she", "paint", "paint", "v2.3.1", "gpt-4o", "user_id", "run"]
        );
        assert_eq!(Analyzer::Plain.analyze("Paintings"), ["paintings"]);
        assert_ne!(Analyzer::Plain.version(), Analyzer::EnglishSnowball.version());
    }

    #[test]
    fn segments_dates_times_and_urls() {
        check("2023/05/30 at 21:56", &["2023", "05", "30", "at", "21", "56"]);
        check("see https://example.org/a-b", &["see", "https", "example.org", "a-b"]);
    }

    #[test]
    fn the_stem_memo_answers_as_the_stemmer_the_first_time_and_after() {
        let words = ["painting", "paints", "paint", "caroline's", "generously", "dog", "painting"];
        let mut memo = StemMemo::default();
        for round in 0..2 {
            for word in words {
                let mut term = word.to_owned();
                memo.stem(&mut term);
                assert_eq!(term, english_stemmer().stem(word), "{word:?}, round {round}");
            }
        }
        assert_eq!(memo.stems.len(), 6, "each distinct word computed once");
    }

    proptest::proptest! {
        /// What `Bm25Index::add_terms` relies on: a document joined by a line break has its
        /// parts' terms, in order. Texts mix words, hyphens, apostrophes, digits, dots,
        /// combining marks, joiners, emoji and line breaks at either end.
        #[test]
        fn terms_are_additive_at_line_breaks(
            a in "(word|Run-|-on|don't|x2\\.5|é|\u{301}|\u{200d}|🐕|日本|-| |\n|\r|\\.){0,12}",
            b in "(word|Run-|-on|don't|x2\\.5|é|\u{301}|\u{200d}|🐕|日本|-| |\n|\r|\\.){0,12}",
        ) {
            for analyzer in [Analyzer::Plain, Analyzer::EnglishSnowball] {
                let mut parts = analyzer.analyze(&a);
                parts.extend(analyzer.analyze(&b));
                proptest::prop_assert_eq!(analyzer.analyze(&format!("{a}\n{b}")), parts);
            }
        }
    }
}
