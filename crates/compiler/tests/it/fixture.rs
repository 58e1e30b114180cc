//! A synthetic conversation fixture and a deterministic bag-of-words vectoriser standing in for
//! precomputed embeddings (the compiler only ever sees vectors).

use std::collections::HashSet;

use evicortex_compiler::{
    CompileConfig, CompileInputs, CompileQuery, CompiledContext, Corpus, DenseInput, EncoderRef,
    ReaderTokenizer, RerankError, Reranker, compile,
};
use evicortex_core::{
    EventTime, Evidence, EvidenceDigest, Namespace, Role, SessionId, TokenBudget, Turn, TurnId,
    TurnIndex,
};
use evicortex_lexical::{Bm25Index, Bm25Params, analyze};
use evicortex_vector::{ExactIndex, VectorIndex};

pub const DIM: usize = 64;

pub fn ns(name: &str) -> Namespace {
    Namespace::new(name).unwrap()
}

/// One record: `(id, namespace, session, turn index, role, time, text)`.
pub fn evidence(
    id: u64,
    namespace: &str,
    session: &str,
    turn: u32,
    role: Role,
    time: &str,
    text: &str,
) -> Evidence {
    let mut digest = [0u8; 32];
    digest[..8].copy_from_slice(&id.to_le_bytes());
    Evidence {
        id: TurnId::from_raw(id),
        digest: EvidenceDigest::from_bytes(digest),
        turn: Turn {
            namespace: ns(namespace),
            session: SessionId::new(session).unwrap(),
            turn: TurnIndex::new(turn),
            role,
            speaker: None,
            text: text.to_owned(),
            time: EventTime::parse_rfc3339(time).unwrap(),
            meta: Default::default(),
        },
    }
}

/// A small conversation of namespace `alice`, with a foreign turn (bob), an erased record (#9),
/// a duplicate text (#7 repeats #2) and a late session.
pub fn conversation() -> (Vec<Evidence>, Vec<TurnId>) {
    use Role::{Assistant, User};
    let e = vec![
        evidence(
            1,
            "alice",
            "s1",
            0,
            User,
            "2024-05-02T10:00:00+01:00",
            "I just moved to Lisbon for a new job at a bakery.",
        ),
        evidence(
            2,
            "alice",
            "s1",
            1,
            Assistant,
            "2024-05-02T10:00:30+01:00",
            "Congratulations on the move!",
        ),
        evidence(
            3,
            "alice",
            "s1",
            2,
            User,
            "2024-05-02T10:01:00+01:00",
            "The bakery opens at 6am, so I wake up at 5.",
        ),
        evidence(
            4,
            "bob",
            "b1",
            0,
            User,
            "2024-05-03T09:00:00Z",
            "I moved to Lisbon too, bob here.",
        ),
        evidence(
            5,
            "alice",
            "s2",
            0,
            User,
            "2024-06-10T18:00:00+01:00",
            "My sister Ana visited me in Lisbon last weekend.",
        ),
        evidence(
            6,
            "alice",
            "s2",
            1,
            Assistant,
            "2024-06-10T18:00:20+01:00",
            "How nice! Did you show her the bakery?",
        ),
        evidence(
            7,
            "alice",
            "s2",
            2,
            User,
            "2024-06-10T18:01:00+01:00",
            "Congratulations on the move!",
        ),
        evidence(
            8,
            "alice",
            "s3",
            0,
            User,
            "2024-09-01T08:00:00Z",
            "I left the bakery and started at gpt-4o evaluation work, v2.3.1 of the harness.",
        ),
        evidence(
            9,
            "alice",
            "s3",
            1,
            User,
            "2024-09-01T08:05:00Z",
            "My bank PIN is 4321, do not tell anyone.",
        ),
    ];
    (e, vec![TurnId::from_raw(9)])
}

/// `count` of alice's notes from id `first` on, about eight topics, in sessions of 40 turns, a
/// session a day (May 2024, over again after the 28th).
pub fn notes(first: u64, count: u64) -> Vec<Evidence> {
    let topics = ["bakery", "Porto", "cello", "lake", "kettle", "apartment", "dog", "train"];
    (0..count)
        .map(|i| {
            let topic = topics[i as usize % topics.len()];
            let text = format!("note {i}: the {topic} again, {} days later", i % 97);
            let time = format!("2024-05-{:02}T10:00:00Z", 1 + (i / 40) % 28);
            let session = format!("bulk-{}", i / 40);
            evidence(first + i, "alice", &session, (i % 40) as u32, Role::User, &time, &text)
        })
        .collect()
}

/// A deterministic unit vector from hashed analyzed terms (the compiler sees only vectors).
pub fn bag_of_words(text: &str) -> Vec<f32> {
    let mut v = vec![0.0f32; DIM];
    for term in analyze(text) {
        let h = blake3::hash(term.as_bytes());
        let slot = h.as_bytes()[0] as usize % DIM;
        let sign = if h.as_bytes()[1] & 1 == 0 { 1.0 } else { -1.0 };
        v[slot] += sign;
    }
    if v.iter().all(|x| *x == 0.0) {
        v[0] = 1.0;
    }
    v
}

/// Indexes and corpus of `alice` built from `records` the way the memory facade does: every
/// record of the namespace goes into both indexes (erased ones too, to prove the filter).
pub struct Built {
    pub corpus: Corpus,
    pub lexical: Bm25Index,
    pub dense: ExactIndex,
    pub encoder: EncoderRef,
}

pub fn build(namespace: &str, records: Vec<Evidence>, erased: Vec<TurnId>) -> Built {
    let mut lexical = Bm25Index::new(Bm25Params { k1: 1.2, b: 0.75 });
    let mut dense = ExactIndex::new(DIM);
    for e in &records {
        lexical.add(e.id, &evicortex_compiler::turn_document(&e.turn)).unwrap();
        dense.insert(e.id, &bag_of_words(&e.turn.text)).unwrap();
    }
    if let Some(last) = records.iter().map(|e| e.id).max() {
        lexical.mark_covered(last).unwrap();
        dense.mark_covered(last).unwrap();
    }
    let corpus = Corpus::new(ns(namespace), records, erased).unwrap();
    let encoder =
        EncoderRef { model: "test/bag-of-words-64".into(), identity_digest: "0".repeat(64) };
    Built { corpus, lexical, dense, encoder }
}

pub fn query(namespace: &str, question: &str, as_of: Option<&str>, budget: u32) -> CompileQuery {
    CompileQuery {
        namespace: ns(namespace),
        question: question.to_owned(),
        as_of: as_of.map(|t| EventTime::parse_rfc3339(t).unwrap()),
        budget: TokenBudget::new(budget),
    }
}

pub fn run(
    built: &Built,
    q: &CompileQuery,
    config: &CompileConfig,
    reader: &dyn ReaderTokenizer,
    reranker: Option<&dyn Reranker>,
) -> CompiledContext {
    let vector = bag_of_words(&q.question);
    let dense = match config.dense {
        evicortex_compiler::DenseConfig::Off => None,
        evicortex_compiler::DenseConfig::On { .. } => Some(DenseInput {
            index: &built.dense,
            query_vector: &vector,
            encoder: &built.encoder,
            pending: 0,
        }),
    };
    let inputs = CompileInputs {
        corpus: &built.corpus,
        lexical: &built.lexical,
        dense,
        also_dense: &[],
        context: evicortex_compiler::ContextInputs::default(),
        reader,
        reranker,
    };
    compile(&inputs, q, config).unwrap()
}

/// A deterministic lexical test double for the reranker seam: the share of the question's distinct
/// analyzed terms that a passage contains. No model; the product's rerankers are real ones.
#[derive(Copy, Clone, Debug)]
pub struct TermOverlapReranker;

impl Reranker for TermOverlapReranker {
    fn name(&self) -> &str {
        "term-overlap-v1"
    }

    fn score(&self, question: &str, passages: &[&str]) -> Result<Vec<f32>, RerankError> {
        let question: HashSet<String> = analyze(question).into_iter().collect();
        Ok(passages
            .iter()
            .map(|p| {
                if question.is_empty() {
                    return 0.0;
                }
                let terms: HashSet<String> = analyze(p).into_iter().collect();
                question.iter().filter(|t| terms.contains(*t)).count() as f32
                    / question.len() as f32
            })
            .collect())
    }
}

#[test]
fn the_term_overlap_double_scores_the_share_of_question_terms() {
    let scores = TermOverlapReranker
        .score("where is Lisbon", &["Lisbon is nice", "where is it", "no"])
        .unwrap();
    assert_eq!(scores, vec![2.0 / 3.0, 2.0 / 3.0, 0.0]);
}
