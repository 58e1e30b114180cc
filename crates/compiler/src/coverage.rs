//! Selection for coverage: under the budget, a candidate that brings a question term or a
//! session the candidates ahead of it do not cover is offered before a near-copy of what is
//! already offered (a greedy, MMR-like pass over a submodular coverage gain). Questions that
//! count or list are answered by several turns that each cover a part.

use std::collections::HashSet;

use evicortex_core::TurnId;
use evicortex_lexical::Bm25Index;

use crate::{Admission, Corpus, FusedHit, turn_document};

/// Reorders `fused` (already in the order candidates are offered to the budget): each next
/// candidate is the one with the highest `rank_score + weight * gain`, where `rank_score` is
/// `(k + 1) / (k + r)` of its place `r` (from 1) in the given order, and `gain` the share of the
/// question's facets it covers that no candidate placed before it covers: each question term in
/// its document (weighted by the term's idf) and its session (weighted as the mean question
/// term). Ties keep the given order.
pub(crate) fn cover_facets(
    fused: &mut Vec<FusedHit<TurnId>>,
    corpus: &Corpus,
    admission: &Admission<'_>,
    index: &Bm25Index,
    question: &str,
    weight: f32,
    rrf_k: f32,
) {
    // Terms no turn holds cover nothing and weigh nothing.
    let mut asked: Vec<String> =
        index.analyze(question).into_iter().filter(|t| index.doc_freq(t) > 0).collect();
    asked.sort();
    asked.dedup();
    let idf: Vec<f64> = asked.iter().map(|t| f64::from(index.idf(t))).collect();
    let session_weight =
        if idf.is_empty() { 1.0 } else { idf.iter().sum::<f64>() / idf.len() as f64 };
    let total = idf.iter().sum::<f64>() + session_weight;
    if fused.len() < 2 || total <= 0.0 {
        return;
    }
    // Each candidate's facets: the indexes of the question terms its document holds, and its
    // session (none for a candidate the filters no longer admit).
    let facets: Vec<(Vec<usize>, Option<u32>)> = fused
        .iter()
        .map(|hit| match admission.position(hit.key) {
            None => (Vec::new(), None),
            Some(pos) => {
                let terms: HashSet<String> =
                    index.analyze(&turn_document(&corpus.at(pos).turn)).into_iter().collect();
                let held = (0..asked.len()).filter(|&i| terms.contains(&asked[i])).collect();
                (held, Some(corpus.session_index(pos)))
            }
        })
        .collect();
    let k = f64::from(rrf_k);
    let weight = f64::from(weight);
    let mut covered_terms = vec![false; asked.len()];
    let mut covered_sessions: HashSet<u32> = HashSet::new();
    let mut left: Vec<usize> = (0..fused.len()).collect();
    let mut order: Vec<usize> = Vec::with_capacity(fused.len());
    while !left.is_empty() {
        let mut best = (f64::NEG_INFINITY, 0);
        for (slot, &i) in left.iter().enumerate() {
            let (terms, session) = &facets[i];
            let mut gain: f64 = terms.iter().filter(|&&t| !covered_terms[t]).map(|&t| idf[t]).sum();
            if session.is_some_and(|s| !covered_sessions.contains(&s)) {
                gain += session_weight;
            }
            let score = (k + 1.0) / (k + i as f64 + 1.0) + weight * gain / total;
            if score > best.0 {
                best = (score, slot);
            }
        }
        let i = left.remove(best.1);
        let (terms, session) = &facets[i];
        terms.iter().for_each(|&t| covered_terms[t] = true);
        if let Some(s) = session {
            covered_sessions.insert(*s);
        }
        order.push(i);
    }
    let mut slots: Vec<Option<FusedHit<TurnId>>> = fused.drain(..).map(Some).collect();
    fused.extend(order.into_iter().filter_map(|i| slots[i].take()));
}

#[cfg(test)]
mod tests {
    use evicortex_lexical::{Analyzer, Bm25Params};

    use super::*;
    use crate::test_corpus::record;

    #[test]
    fn a_turn_covering_a_new_term_and_session_passes_near_copies() {
        // Records 1-3 in session a say the same about the museum; record 4 in session b names the
        // park the question also asks about.
        let texts = [
            ("a", "we went to the museum"),
            ("a", "the museum again, the museum"),
            ("a", "the museum was lovely"),
            ("b", "then the park"),
        ];
        let evidence: Vec<_> = texts
            .iter()
            .enumerate()
            .map(|(i, (s, t))| {
                let mut e = record(i as u64 + 1, s, i as u32, t);
                e.digest = evicortex_core::EvidenceDigest::from_bytes([i as u8; 32]);
                e
            })
            .collect();
        let corpus = Corpus::new(evidence[0].turn.namespace.clone(), evidence, []).unwrap();
        let mut index = Bm25Index::with_analyzer(Bm25Params { k1: 1.2, b: 0.75 }, Analyzer::Plain);
        for e in corpus.evidence() {
            index.add(e.id, &e.turn.text).unwrap();
        }
        let admission = Admission::new(&corpus, None);
        let hit = |id: u64| FusedHit { key: TurnId::from_raw(id), score: 1.0, ranks: Vec::new() };
        let mut fused: Vec<_> = [1, 2, 3, 4].into_iter().map(hit).collect();
        let question = "Which museum and park did we visit?";
        cover_facets(&mut fused, &corpus, &admission, &index, question, 1.0, 10.0);
        let order: Vec<u64> = fused.iter().map(|h| h.key.raw()).collect();
        assert_eq!(order, vec![1, 4, 2, 3]);
        let mut fused: Vec<_> = [1, 2, 3, 4].into_iter().map(hit).collect();
        cover_facets(&mut fused, &corpus, &admission, &index, question, 0.0, 10.0);
        let order: Vec<u64> = fused.iter().map(|h| h.key.raw()).collect();
        assert_eq!(order, vec![1, 2, 3, 4], "without weight the order stands");
    }
}
