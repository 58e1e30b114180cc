//! Turns indexed in their context: each turn's window (the turn and the turns of its session at
//! most `radius` positions before or after it), as a BM25 document ([`WindowIndex`]) and as a
//! context vector ([`ContextVectors`]: the normalised sum of the window's stored turn vectors, so
//! nothing is embedded again). Short conversational turns ("Which one?", "That's great!") carry
//! little alone; their neighbours say what they are about. The cited and packed unit stays the
//! turn: these indexes only rank.
//!
//! Both are built from a [`Corpus`] (its eligible records only: another namespace's or an erased
//! record is never part of a window) and rebuilt when the corpus or its vectors change.

use evicortex_core::TurnId;
use evicortex_lexical::{Analyzer, Bm25Index, Bm25Params, LexicalError};

use crate::{Admission, Corpus, turn_document};

/// The corpus positions of the window of the record at `pos`: the eligible records of its
/// session within `radius` positions of it (in the session's turn order), itself included, in
/// that order. Empty when the record is not eligible.
pub(crate) fn window_positions(corpus: &Corpus, pos: usize, radius: u32) -> Vec<usize> {
    if corpus.eligible_time_at(pos).is_none() {
        return Vec::new();
    }
    let session = corpus.session_of(pos);
    let key = |p: u32| {
        let e = corpus.at(p as usize);
        (e.turn.turn, e.id)
    };
    let Ok(at) = session.binary_search_by(|&p| key(p).cmp(&key(pos as u32))) else {
        return Vec::new();
    };
    let eligible = |p: &&u32| corpus.eligible_time_at(**p as usize).is_some();
    let radius = radius as usize;
    let mut before: Vec<usize> =
        session[..at].iter().rev().filter(eligible).take(radius).map(|&p| p as usize).collect();
    before.reverse();
    before.push(pos);
    before.extend(session[at + 1..].iter().filter(eligible).take(radius).map(|&p| p as usize));
    before
}

/// Whether every record of the window of `pos` is admitted: only then may a context list rank
/// it (a window reaching past the as-of time would rank the turn by words said later).
pub(crate) fn window_admitted(
    corpus: &Corpus,
    pos: usize,
    radius: u32,
    admission: &Admission<'_>,
) -> bool {
    window_positions(corpus, pos, radius).iter().all(|&p| admission.admits(corpus.at(p).id))
}

/// The BM25 document of the window of `pos`: the window's turn documents, one per line.
pub fn window_document(corpus: &Corpus, pos: usize, radius: u32) -> String {
    let mut out = String::new();
    for p in window_positions(corpus, pos, radius) {
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&turn_document(&corpus.at(p).turn));
    }
    out
}

/// BM25 over the window documents of a corpus, one per eligible record, keyed by the record.
#[derive(Debug, Clone)]
pub struct WindowIndex {
    radius: u32,
    index: Bm25Index,
    built_for: usize,
}

impl WindowIndex {
    /// Indexes the window document of every eligible record of `corpus`.
    pub fn build(
        corpus: &Corpus,
        radius: u32,
        params: Bm25Params,
        analyzer: Analyzer,
    ) -> Result<WindowIndex, LexicalError> {
        let mut index = Bm25Index::with_analyzer(params.validate()?, analyzer);
        for pos in 0..corpus.len() {
            if corpus.eligible_time_at(pos).is_some() {
                index.add(corpus.at(pos).id, &window_document(corpus, pos, radius))?;
            }
        }
        if let Some(last) = corpus.last_record() {
            index.mark_covered(last)?;
        }
        Ok(WindowIndex { radius, index, built_for: corpus.len() })
    }

    /// The window radius.
    pub fn radius(&self) -> u32 {
        self.radius
    }

    /// The BM25 index of window documents.
    pub fn index(&self) -> &Bm25Index {
        &self.index
    }

    /// How many corpus records it was built from (a larger corpus needs a rebuild).
    pub fn built_for(&self) -> usize {
        self.built_for
    }

    /// Estimated heap bytes.
    pub fn heap_bytes(&self) -> usize {
        self.index.len() * 256
    }
}

/// The context vector of every eligible record of a corpus: the L2-normalised sum of the unit
/// vectors of the turns in its window that have one.
#[derive(Debug, Clone)]
pub struct ContextVectors {
    radius: u32,
    dim: usize,
    keys: Vec<TurnId>,
    /// Row-major, `keys.len() x dim`, unit vectors.
    data: Vec<f32>,
    built_for: usize,
    vectors_seen: usize,
}

impl ContextVectors {
    /// Builds the context vectors of `corpus` from `turn_vector` (a turn's unit vector, `None`
    /// when it has none yet). `vectors_seen` records how many turn vectors were available, so a
    /// caller can tell when new vectors call for a rebuild.
    pub fn build<'v>(
        corpus: &Corpus,
        radius: u32,
        dim: usize,
        vectors_seen: usize,
        turn_vector: impl Fn(TurnId) -> Option<&'v [f32]>,
    ) -> ContextVectors {
        let mut keys = Vec::new();
        let mut data = Vec::new();
        let mut sum = vec![0.0f32; dim];
        for pos in 0..corpus.len() {
            sum.iter_mut().for_each(|x| *x = 0.0);
            let mut any = false;
            for p in window_positions(corpus, pos, radius) {
                if let Some(v) = turn_vector(corpus.at(p).id).filter(|v| v.len() == dim) {
                    sum.iter_mut().zip(v).for_each(|(s, x)| *s += x);
                    any = true;
                }
            }
            let norm = sum.iter().map(|x| x * x).sum::<f32>().sqrt();
            if any && norm.is_finite() && norm > 0.0 {
                keys.push(corpus.at(pos).id);
                data.extend(sum.iter().map(|x| x / norm));
            }
        }
        ContextVectors { radius, dim, keys, data, built_for: corpus.len(), vectors_seen }
    }

    /// The window radius.
    pub fn radius(&self) -> u32 {
        self.radius
    }

    /// How many corpus records it was built from.
    pub fn built_for(&self) -> usize {
        self.built_for
    }

    /// How many turn vectors were available when it was built.
    pub fn vectors_seen(&self) -> usize {
        self.vectors_seen
    }

    /// Estimated heap bytes.
    pub fn heap_bytes(&self) -> usize {
        self.data.len() * 4 + self.keys.len() * 8
    }

    /// The `n` records whose context vectors are most similar to `query` (cosine; `query` need not
    /// be normalised) among those `admit` accepts, best first, ties by record.
    pub fn search(
        &self,
        query: &[f32],
        n: usize,
        mut admit: impl FnMut(TurnId) -> bool,
    ) -> Vec<(TurnId, f32)> {
        if n == 0 || query.len() != self.dim {
            return Vec::new();
        }
        let norm = query.iter().map(|x| x * x).sum::<f32>().sqrt();
        if !(norm.is_finite() && norm > 0.0) {
            return Vec::new();
        }
        let mut hits: Vec<(TurnId, f32)> = self
            .keys
            .iter()
            .zip(self.data.chunks_exact(self.dim))
            .filter(|(key, _)| admit(**key))
            .map(|(key, row)| (*key, row.iter().zip(query).map(|(a, b)| a * b).sum::<f32>() / norm))
            .collect();
        let order = |a: &(TurnId, f32), b: &(TurnId, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
        if hits.len() > n {
            hits.select_nth_unstable_by(n - 1, order);
            hits.truncate(n);
        }
        hits.sort_unstable_by(order);
        hits
    }
}

#[cfg(test)]
mod tests {
    use evicortex_core::{
        EventTime, Evidence, EvidenceDigest, Namespace, Role, SessionId, Turn, TurnIndex,
    };

    use super::*;

    fn turn(id: u64, session: &str, index: u32, speaker: &str, text: &str) -> Evidence {
        Evidence {
            id: TurnId::from_raw(id),
            digest: EvidenceDigest::from_bytes([0; 32]),
            turn: Turn {
                namespace: Namespace::new("n").unwrap(),
                session: SessionId::new(session).unwrap(),
                turn: TurnIndex::new(index),
                role: Role::User,
                speaker: Some(speaker.to_owned()),
                text: text.to_owned(),
                time: EventTime::parse_rfc3339("2024-05-02T10:00:00Z").unwrap(),
                meta: Default::default(),
            },
        }
    }

    fn corpus() -> Corpus {
        let ns = Namespace::new("n").unwrap();
        Corpus::new(
            ns,
            vec![
                turn(1, "a", 0, "Ann", "Which lake did you swim in?"),
                turn(2, "a", 1, "Bo", "Lake Tahoe."),
                turn(3, "a", 2, "Ann", "Nice!"),
                turn(4, "b", 0, "Bo", "New session."),
                turn(5, "a", 3, "Bo", "Erased later."),
            ],
            [TurnId::from_raw(5)],
        )
        .unwrap()
    }

    #[test]
    fn windows_stay_in_the_session_and_skip_ineligible_records() {
        let c = corpus();
        assert_eq!(
            window_document(&c, 1, 1),
            "Ann: Which lake did you swim in?\nBo: Lake Tahoe.\nAnn: Nice!"
        );
        assert_eq!(window_document(&c, 2, 1), "Bo: Lake Tahoe.\nAnn: Nice!", "5 is erased");
        assert_eq!(window_document(&c, 3, 2), "Bo: New session.");
        assert_eq!(window_document(&c, 4, 1), "", "an erased record has no window");
        let index =
            WindowIndex::build(&c, 1, Bm25Params { k1: 1.2, b: 0.75 }, Analyzer::Plain).unwrap();
        assert_eq!(index.index().len(), 4);
        let hits = index.index().search(&index.index().analyze("swim"), 10, |_| true);
        let mut keys: Vec<u64> = hits.iter().map(|h| h.key.raw()).collect();
        keys.sort_unstable();
        assert_eq!(keys, [1, 2], "the answer turn is found through its question");
    }

    #[test]
    fn context_vectors_sum_the_window_and_rank_by_cosine() {
        let c = corpus();
        let vectors = [[1.0f32, 0.0], [0.0, 1.0], [0.0, 1.0], [1.0, 0.0], [1.0, 0.0]];
        let of = |id: TurnId| vectors.get(id.raw() as usize - 1).map(|v| v.as_slice());
        let cv = ContextVectors::build(&c, 1, 2, 5, of);
        // Turn 1: (1,0)+(0,1) normalised; turn 2: (1,0)+(0,1)+(0,1); turn 3: (0,2).
        let hits = cv.search(&[0.0, 1.0], 10, |_| true);
        let keys: Vec<u64> = hits.iter().map(|h| h.0.raw()).collect();
        assert_eq!(keys, [3, 2, 1, 4]);
        assert!((hits[0].1 - 1.0).abs() < 1e-6);
        assert!((hits[1].1 - 2.0 / 5.0f32.sqrt()).abs() < 1e-6);
        let admitted = cv.search(&[0.0, 1.0], 1, |id| id.raw() != 3);
        assert_eq!(admitted.len(), 1);
        assert_eq!(admitted[0].0.raw(), 2);
    }
}
