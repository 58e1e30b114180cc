//! The support score behind abstention.

use std::collections::HashSet;

use evicortex_lexical::Bm25Index;

/// The idf-weighted share of the question's distinct terms that `text` contains, in 0..=1
/// (terms under `index`'s analyzer, idf from `index`). A question with no terms has support 0.
pub fn lexical_coverage(index: &Bm25Index, question: &str, text: &str) -> f32 {
    let mut question_terms = index.analyze(question);
    question_terms.sort_unstable();
    question_terms.dedup();
    let text_terms: HashSet<String> = index.analyze(text).into_iter().collect();
    let (mut covered, mut total) = (0.0f64, 0.0f64);
    for term in &question_terms {
        let idf = f64::from(index.idf(term));
        total += idf;
        if text_terms.contains(term) {
            covered += idf;
        }
    }
    if total > 0.0 { (covered / total) as f32 } else { 0.0 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use evicortex_core::TurnId;
    use evicortex_lexical::Bm25Params;

    #[test]
    fn rare_terms_weigh_more() {
        let mut index = Bm25Index::new(Bm25Params { k1: 1.2, b: 0.75 });
        for (i, text) in ["the cat", "the dog", "the lisbon trip", "the end"].iter().enumerate() {
            index.add(TurnId::from_raw(i as u64), text).unwrap();
        }
        let rare = lexical_coverage(&index, "the lisbon", "lisbon");
        let common = lexical_coverage(&index, "the lisbon", "the");
        assert!(
            rare > 0.5 && common < 0.5 && (rare + common - 1.0).abs() < 1e-6,
            "{rare} {common}"
        );
        assert_eq!(lexical_coverage(&index, "?!", "anything"), 0.0);
    }
}
