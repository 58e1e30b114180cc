//! A deterministic answer-containment score: does the response contain the reference answer as
//! a contiguous run of tokens?
//!
//! This is `has_answer` with `SimpleTokenizer` from LoCoMo's released `task_eval/evaluation.py`
//! (snap-research/LoCoMo, commit 92286325a40764bee61f77824ddb95233b11c4d6; the DPR answer check):
//! both texts NFD-normalised, tokenised into runs of letters, digits and marks or single other
//! non-space, non-control characters, lowercased, then matched as a token subsequence. It needs
//! no model, so it sits beside the judge as a check on it.

use std::sync::LazyLock;

use unicode_normalization::UnicodeNormalization as _;

/// True when some answer in `answers` occurs in `response` as a contiguous run of tokens.
/// An answer with no tokens (empty or only spaces) is contained in every response, as in the
/// released code.
pub fn contains_answer<'a>(response: &str, answers: impl IntoIterator<Item = &'a str>) -> bool {
    let text = simple_tokens(response);
    answers.into_iter().any(|answer| {
        let answer = simple_tokens(answer);
        answer.is_empty() || text.windows(answer.len()).any(|window| window == answer.as_slice())
    })
}

static SIMPLE_TOKEN: LazyLock<regex::Regex> = LazyLock::new(|| {
    regex::Regex::new(r"([\p{L}\p{N}\p{M}]+)|([^\p{Z}\p{C}])").expect("valid pattern")
});

/// `SimpleTokenizer().tokenize(_normalize(text), uncased=True)`.
fn simple_tokens(text: &str) -> Vec<String> {
    let nfd: String = text.nfd().collect();
    SIMPLE_TOKEN.find_iter(&nfd).map(|m| m.as_str().to_lowercase()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_whole_tokens_in_order() {
        assert!(contains_answer("She moved to Lisbon, Portugal.", ["lisbon, portugal"]));
        assert!(contains_answer("It was on 7 May 2023.", ["7 May 2023"]));
        assert!(!contains_answer("Lisbons are nice", ["Lisbon"]));
        assert!(!contains_answer("Portugal, Lisbon", ["Lisbon Portugal"]));
        assert!(contains_answer("Caf\u{e9} au lait", ["cafe\u{301}"]));
        assert!(contains_answer("anything", [""]));
        assert!(!contains_answer("anything", []));
    }
}
