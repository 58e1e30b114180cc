//! Candidates found from the best fused turns, without an LLM: pseudo-relevance feedback (a BM25
//! list for the question expanded by the feedback turns' most telling terms, RM3-style, and a
//! dense list for the query vector moved toward their stored vectors, Rocchio-style) and links
//! (turns sharing a rare proper name with a feedback turn). Evidence spread over several turns
//! rarely repeats the question's words in each turn; the turns that do match name the things
//! (places, people, hobbies) the others talk about.

use std::collections::{BTreeMap, HashMap, HashSet};

use evicortex_core::TurnId;
use serde::{Deserialize, Serialize};

use crate::{
    Admission, CompileError, CompileInputs, FeedbackConfig, FusedHit, LinksConfig, RankedList,
    Retriever, ScoredKey, turn_document,
};

/// What feedback and links added to a compile, recorded in the compiled context.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FeedbackReport {
    /// The records read as feedback, best first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub from: Vec<TurnId>,
    /// The terms added to the question for the lexical feedback list (analyzed form).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub terms: Vec<String>,
    /// Whether the dense feedback list ran (it needs the feedback turns' stored vectors, which
    /// an index that only answers searches, such as a database, does not give).
    #[serde(default)]
    pub dense: bool,
    /// The rare names links followed, each with the record it was read in.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub names: Vec<LinkName>,
}

/// A rare name a link followed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkName {
    /// The name as the turn wrote it.
    pub name: String,
    /// The feedback record it was read in.
    pub from: TurnId,
}

/// The lists feedback and links add, and what they did.
pub(crate) struct Found {
    pub(crate) lists: Vec<RankedList>,
    pub(crate) report: Option<FeedbackReport>,
    /// For each linked candidate, the names that linked it (index into `report.names`).
    pub(crate) links: HashMap<TurnId, Vec<usize>>,
}

/// The feedback and link lists of a compile whose first fusion gave `fused`.
pub(crate) fn find(
    inputs: &CompileInputs<'_>,
    feedback: FeedbackConfig,
    links: LinksConfig,
    question: &str,
    fused: &[FusedHit<TurnId>],
    admission: &Admission<'_>,
    (lexical_top_n, dense_top_n): (usize, usize),
) -> Result<Found, CompileError> {
    let mut found = Found { lists: Vec::new(), report: None, links: HashMap::new() };
    let from = |n: u32| -> Vec<(usize, f64)> {
        fused
            .iter()
            .filter_map(|h| admission.position(h.key).map(|pos| (pos, h.score)))
            .take(n as usize)
            .collect()
    };
    let mut report = FeedbackReport::default();
    if let FeedbackConfig::Turns { docs, terms, rocchio } = feedback {
        let turns = from(docs);
        report.from = turns.iter().map(|&(pos, _)| inputs.corpus.at(pos).id).collect();
        if terms > 0 && lexical_top_n > 0 {
            report.terms = expansion_terms(inputs, question, &turns, terms as usize);
            if !report.terms.is_empty() {
                let mut query = inputs.lexical.analyze(question);
                query.extend(report.terms.iter().cloned());
                let hits = inputs.lexical.search(&query, lexical_top_n, |id| admission.admits(id));
                let hits = hits.into_iter().map(|h| ScoredKey { key: h.key, score: h.score });
                found.lists.push(RankedList {
                    retriever: Retriever::LexicalFeedback,
                    hits: hits.collect(),
                });
            }
        }
        if rocchio > 0.0
            && dense_top_n > 0
            && let Some(list) = rocchio_list(inputs, &turns, rocchio, dense_top_n, admission)?
        {
            report.dense = true;
            found.lists.push(list);
        }
    }
    if let LinksConfig::RareNames { from: n, max_turns, per_name } = links {
        let turns = from(n);
        let (list, names, linked) =
            link_list(inputs, question, &turns, max_turns as usize, per_name as usize, admission);
        report.names = names;
        found.links = linked;
        if !list.hits.is_empty() {
            found.lists.push(list);
        }
    }
    if feedback != FeedbackConfig::Off || links != LinksConfig::Off {
        found.report = Some(report);
    }
    Ok(found)
}

/// The `n` terms that best tell the feedback turns apart from the namespace (RM3's relevance
/// model weighted by idf): for each term not in the question, the sum over the feedback turns
/// of the turn's share of the feedback weight (its fused score) times the term's frequency in
/// the turn's document, times the term's idf. Terms found in one turn of the namespace alone
/// cannot lead anywhere and are skipped. Ties go to the term that sorts first.
fn expansion_terms(
    inputs: &CompileInputs<'_>,
    question: &str,
    turns: &[(usize, f64)],
    n: usize,
) -> Vec<String> {
    let index = inputs.lexical;
    let asked: HashSet<String> = index.analyze(question).into_iter().collect();
    let total: f64 = turns.iter().map(|&(_, w)| w).sum();
    if total <= 0.0 {
        return Vec::new();
    }
    let mut scores: BTreeMap<String, f64> = BTreeMap::new();
    for &(pos, weight) in turns {
        let terms = index.analyze(&turn_document(&inputs.corpus.at(pos).turn));
        let len = terms.len().max(1) as f64;
        let mut tf: BTreeMap<&str, u32> = BTreeMap::new();
        for t in &terms {
            *tf.entry(t.as_str()).or_default() += 1;
        }
        for (term, count) in tf {
            if asked.contains(term) || index.doc_freq(term) < 2 {
                continue;
            }
            let gain = weight / total * f64::from(count) / len * f64::from(index.idf(term));
            *scores.entry(term.to_owned()).or_default() += gain;
        }
    }
    let mut ranked: Vec<(String, f64)> = scores.into_iter().collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    ranked.into_iter().take(n).map(|(t, _)| t).collect()
}

/// The dense list for the query vector moved toward the feedback turns' mean stored vector by
/// `weight` (then scaled to unit length); `None` without dense input or stored vectors.
fn rocchio_list(
    inputs: &CompileInputs<'_>,
    turns: &[(usize, f64)],
    weight: f32,
    top_n: usize,
    admission: &Admission<'_>,
) -> Result<Option<RankedList>, CompileError> {
    let Some(dense) = inputs.dense else { return Ok(None) };
    let dim = dense.query_vector.len();
    let mut centroid = vec![0.0f32; dim];
    let mut seen = 0usize;
    for &(pos, _) in turns {
        if let Some(v) = dense.index.stored_vector(inputs.corpus.at(pos).id)
            && v.len() == dim
        {
            centroid.iter_mut().zip(&v).for_each(|(c, x)| *c += x);
            seen += 1;
        }
    }
    if seen == 0 {
        return Ok(None);
    }
    let mut query: Vec<f32> = dense
        .query_vector
        .iter()
        .zip(&centroid)
        .map(|(q, c)| q + weight * c / seen as f32)
        .collect();
    let norm = query.iter().map(|x| x * x).sum::<f32>().sqrt();
    if !(norm.is_finite() && norm > 0.0) {
        return Ok(None);
    }
    query.iter_mut().for_each(|x| *x /= norm);
    let hits = dense.index.search(&query, top_n, &mut |id| admission.admits(id))?;
    let hits = hits.into_iter().map(|h| ScoredKey { key: h.key, score: h.score }).collect();
    Ok(Some(RankedList { retriever: Retriever::DenseFeedback, hits }))
}

/// Turns that share a rare proper name with a feedback turn: for each capitalised word of a
/// feedback turn's text that does not open a sentence, is not a speaker's name nor a word of the
/// question, and whose term is in 2 to `max_turns` turns of the namespace, that term's best
/// `per_name` turns by BM25. Ranked by how many names link a turn, then by the rank of the
/// first feedback turn linking it, then by its BM25 score; the feedback turns themselves are
/// left out (they are candidates already).
fn link_list(
    inputs: &CompileInputs<'_>,
    question: &str,
    turns: &[(usize, f64)],
    max_turns: usize,
    per_name: usize,
    admission: &Admission<'_>,
) -> (RankedList, Vec<LinkName>, HashMap<TurnId, Vec<usize>>) {
    let index = inputs.lexical;
    let corpus = inputs.corpus;
    let asked: HashSet<String> = index.analyze(question).into_iter().collect();
    let speakers: HashSet<String> =
        corpus.speakers().iter().flat_map(|s| index.analyze(s)).collect();
    let sources: HashSet<TurnId> = turns.iter().map(|&(pos, _)| corpus.at(pos).id).collect();
    let mut names: Vec<LinkName> = Vec::new();
    let mut followed: HashSet<String> = HashSet::new();
    // Per linked turn: names linking it, best source rank, best BM25 score.
    let mut linked: HashMap<TurnId, (Vec<usize>, usize, f32)> = HashMap::new();
    for (rank, &(pos, _)) in turns.iter().enumerate() {
        let e = corpus.at(pos);
        for name in proper_names(&e.turn.text) {
            let [term] = index.analyze(name).try_into().unwrap_or_default();
            if term.is_empty() || asked.contains(&term) || speakers.contains(&term) {
                continue;
            }
            let df = index.doc_freq(&term);
            if df < 2 || df > max_turns || !followed.insert(term.clone()) {
                continue;
            }
            let at = names.len();
            names.push(LinkName { name: name.to_owned(), from: e.id });
            let hits = index.search(std::slice::from_ref(&term), per_name + 1, |id| {
                !sources.contains(&id) && admission.admits(id)
            });
            for hit in hits.into_iter().take(per_name) {
                let entry = linked.entry(hit.key).or_insert((Vec::new(), rank, hit.score));
                entry.0.push(at);
                entry.1 = entry.1.min(rank);
                entry.2 = entry.2.max(hit.score);
            }
        }
    }
    let mut order: Vec<(TurnId, usize, usize, f32)> =
        linked.iter().map(|(&id, (by, rank, score))| (id, by.len(), *rank, *score)).collect();
    order.sort_by(|a, b| {
        b.1.cmp(&a.1).then(a.2.cmp(&b.2)).then(b.3.total_cmp(&a.3)).then(a.0.cmp(&b.0))
    });
    let hits = order.iter().map(|&(key, by, _, _)| ScoredKey { key, score: by as f32 }).collect();
    let links = linked.into_iter().map(|(id, (by, _, _))| (id, by)).collect();
    (RankedList { retriever: Retriever::Linked, hits }, names, links)
}

/// Capitalised words of `text` (at least 3 letters, possessive `'s` and surrounding punctuation
/// removed) that do not open a sentence: names, places, titles. The first word of the text and
/// words after `.`, `!`, `?` or `:` are capitalised anyway and are left out, and so are the names
/// of months and weekdays, which name no thing a conversation returns to.
fn proper_names(text: &str) -> Vec<&str> {
    let mut names = Vec::new();
    let mut sentence_start = true;
    for raw in text.split_whitespace() {
        let word = raw.trim_matches(|c: char| !c.is_alphanumeric());
        let word =
            word.strip_suffix("'s").or_else(|| word.strip_suffix("\u{2019}s")).unwrap_or(word);
        let opens = sentence_start;
        sentence_start = raw.ends_with(['.', '!', '?', ':']);
        if opens || word.chars().count() < 3 {
            continue;
        }
        let mut chars = word.chars();
        let capitalised = chars.next().is_some_and(char::is_uppercase);
        if capitalised
            && word.chars().all(char::is_alphabetic)
            && chars.any(char::is_lowercase)
            && !CALENDAR.contains(&word)
        {
            names.push(word);
        }
    }
    names
}

const CALENDAR: [&str; 19] = [
    "January",
    "February",
    "March",
    "April",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
    "May",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proper_names_skip_sentence_openers_and_strip_possessives() {
        let text = "We went to Rome in May. Paris was next, then Anna's flat.\nBig plans!";
        assert_eq!(proper_names(text), ["Rome", "Anna"]);
        assert!(proper_names("NASA and USA stay out; so do I and Al.").is_empty());
    }
}
