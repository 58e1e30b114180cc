//! LoCoMo's released answer scores, ported from `task_eval/evaluation.py` of
//! snap-research/LoCoMo (commit 92286325a40764bee61f77824ddb95233b11c4d6): `normalize_answer`,
//! `f1_score` (Porter-stemmed token F1), `f1` (comma-separated multi-answer F1) and the
//! per-category rules of `eval_question_answering`. Python's string semantics are kept where
//! they differ from Rust's: `str.split()` whitespace, `string.punctuation`, and the `regex`
//! module's Unicode word boundary.

use std::{collections::HashMap, sync::LazyLock};

use crate::answer_score::porter::porter_stem;

/// A LoCoMo question category, as numbered in `locomo10.json`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LocomoCategory {
    /// 1: multi-hop; scored by the multi-answer F1 (`f1`).
    MultiHop,
    /// 2: temporal; token F1.
    Temporal,
    /// 3: open-domain; token F1 against the answer's first `;`-separated part.
    OpenDomain,
    /// 4: single-hop; token F1.
    SingleHop,
    /// 5: adversarial (unanswerable); 1 when the response says the information is absent.
    Adversarial,
}

impl LocomoCategory {
    /// The category numbered `n` in the data set; `None` for any other number (the released
    /// code raises on them).
    pub fn from_number(n: u32) -> Option<LocomoCategory> {
        Some(match n {
            1 => LocomoCategory::MultiHop,
            2 => LocomoCategory::Temporal,
            3 => LocomoCategory::OpenDomain,
            4 => LocomoCategory::SingleHop,
            5 => LocomoCategory::Adversarial,
            _ => return None,
        })
    }

    /// The number used in the data set.
    pub fn number(self) -> u32 {
        match self {
            LocomoCategory::MultiHop => 1,
            LocomoCategory::Temporal => 2,
            LocomoCategory::OpenDomain => 3,
            LocomoCategory::SingleHop => 4,
            LocomoCategory::Adversarial => 5,
        }
    }
}

/// The score `eval_question_answering` gives `response` for a question of `category` whose
/// reference answer is `answer` (already `str()`-converted; ignored for adversarial questions).
pub fn locomo_answer_score(category: LocomoCategory, response: &str, answer: &str) -> f64 {
    match category {
        LocomoCategory::MultiHop => locomo_multi_answer_f1(response, answer),
        LocomoCategory::Temporal | LocomoCategory::SingleHop => locomo_token_f1(response, answer),
        LocomoCategory::OpenDomain => {
            let first = answer.split(';').next().unwrap_or_default();
            locomo_token_f1(response, py_strip(first))
        }
        LocomoCategory::Adversarial => {
            let lower = response.to_lowercase();
            let says_absent =
                lower.contains("no information available") || lower.contains("not mentioned");
            if says_absent { 1.0 } else { 0.0 }
        }
    }
}

/// `f1_score`: token F1 over Porter stems of the normalised texts.
pub fn locomo_token_f1(prediction: &str, ground_truth: &str) -> f64 {
    let stems = |text: &str| -> Vec<String> {
        py_split(&locomo_normalize_answer(text)).map(porter_stem).collect()
    };
    let prediction = stems(prediction);
    let ground_truth = stems(ground_truth);
    let mut counts: HashMap<&str, (usize, usize)> = HashMap::new();
    for token in &prediction {
        counts.entry(token).or_default().0 += 1;
    }
    for token in &ground_truth {
        counts.entry(token).or_default().1 += 1;
    }
    let same: usize = counts.values().map(|&(p, g)| p.min(g)).sum();
    if same == 0 {
        return 0.0;
    }
    let precision = same as f64 / prediction.len() as f64;
    let recall = same as f64 / ground_truth.len() as f64;
    (2.0 * precision * recall) / (precision + recall)
}

/// `f1`: both texts split on `,`; for each reference part the best F1 over prediction parts,
/// averaged.
pub fn locomo_multi_answer_f1(prediction: &str, ground_truth: &str) -> f64 {
    let predictions: Vec<&str> = prediction.split(',').map(py_strip).collect();
    let truths: Vec<&str> = ground_truth.split(',').map(py_strip).collect();
    let total: f64 = truths
        .iter()
        .map(|truth| {
            predictions.iter().map(|p| locomo_token_f1(p, truth)).fold(f64::NEG_INFINITY, f64::max)
        })
        .sum();
    total / truths.len() as f64
}

/// `normalize_answer`: commas dropped, lowercased, ASCII punctuation removed, the words a, an,
/// the and and replaced by a space, whitespace collapsed.
pub fn locomo_normalize_answer(s: &str) -> String {
    let lowered = s.replace(',', "").to_lowercase();
    let without_punctuation: String =
        lowered.chars().filter(|c| !PY_PUNCTUATION.contains(*c)).collect();
    let without_articles = ARTICLES.replace_all(&without_punctuation, " ");
    py_split(&without_articles).collect::<Vec<_>>().join(" ")
}

/// Python's `string.punctuation`.
const PY_PUNCTUATION: &str = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";

static ARTICLES: LazyLock<regex::Regex> =
    LazyLock::new(|| regex::Regex::new(r"\b(a|an|the|and)\b").expect("valid pattern"));

/// Python's `str.isspace` (`str.split()` splits on it): Unicode `White_Space` plus the
/// information separators U+001C to U+001F.
pub(crate) fn py_is_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// Python's `str.split()` with no arguments.
pub(crate) fn py_split(s: &str) -> impl Iterator<Item = &str> {
    s.split(py_is_space).filter(|part| !part.is_empty())
}

/// Python's `str.strip()` with no arguments.
pub(crate) fn py_strip(s: &str) -> &str {
    s.trim_matches(py_is_space)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalisation_follows_the_released_code() {
        assert_eq!(locomo_normalize_answer("The cat, and a Dog!"), "cat dog");
        assert_eq!(locomo_normalize_answer("  7 May\u{1c}2023 "), "7 may 2023");
        assert_eq!(locomo_normalize_answer("an-other"), "another");
        assert_eq!(locomo_normalize_answer("theater"), "theater");
    }

    #[test]
    fn token_f1_uses_stems_and_multisets() {
        assert_eq!(locomo_token_f1("running dogs", "the dog runs"), 1.0);
        assert_eq!(locomo_token_f1("nothing", "something"), 0.0);
        let f1 = locomo_token_f1("Paris France", "Paris");
        assert!((f1 - 2.0 / 3.0).abs() < 1e-12, "{f1}");
    }

    #[test]
    fn categories_follow_eval_question_answering() {
        use LocomoCategory::*;
        assert_eq!(locomo_answer_score(OpenDomain, "biology", "biology; chemistry"), 1.0);
        assert_eq!(locomo_answer_score(Adversarial, "Not mentioned in the chat.", "x"), 1.0);
        assert_eq!(locomo_answer_score(Adversarial, "No answer.", "x"), 0.0);
        let multi = locomo_answer_score(MultiHop, "hiking, painting", "painting, swimming");
        assert!((multi - 0.5).abs() < 1e-12, "{multi}");
        assert_eq!(LocomoCategory::from_number(6), None);
    }
}
