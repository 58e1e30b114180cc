//! Properties over generated corpora: the pack never exceeds the budget, and never includes
//! another namespace's, an erased or a later-than-as-of turn; output is byte-identical on rerun;
//! the as-of bound of the dense searches changes nothing.

use evicortex_compiler::{
    CompileConfig, CompileInputs, ContextInputs, DenseConfig, DenseInput, Expansion,
    ReaderTokenizer, RerankConfig, Retriever, TiktokenReader, compile,
};
use evicortex_core::{Role, TurnId};
use evicortex_vector::{ExactIndex, VectorIndex, VectorIndexRead, WindowKey, WindowedIndex};
use proptest::prelude::*;

use crate::fixture::{DIM, TermOverlapReranker, bag_of_words, build, evidence, notes, query, run};

const WORDS: &[&str] = &[
    "lisbon",
    "bakery",
    "sister",
    "ana",
    "gpt-4o",
    "v2.3.1",
    "moved",
    "job",
    "the",
    "a",
    "cat",
    "train",
    "porto",
    "Congratulations!",
    "\n",
    "🙂",
    "日本",
    "user_id",
    "5am",
    "weekend",
];

fn text() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(WORDS), 1..25).prop_map(|w| w.join(" "))
}

/// `(namespace is alice, session 0..3, minute offset, text, erased)`.
fn record() -> impl Strategy<Value = (bool, u8, u32, String, bool)> {
    (prop::bool::weighted(0.8), 0u8..3, 0u32..5000, text(), prop::bool::weighted(0.1))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn pack_respects_budget_namespace_erasure_and_as_of(
        records in prop::collection::vec(record(), 1..40),
        question in text(),
        budget in 0u32..400,
        as_of_minute in prop::option::of(0u32..5000),
        dense in any::<bool>(),
        rerank in any::<bool>(),
        expand in any::<bool>(),
        cl100k in any::<bool>(),
    ) {
        let mut evidence_list = Vec::new();
        let mut erased = Vec::new();
        let mut turn_of_session = [0u32; 3];
        for (i, (alice, session, minute, text, is_erased)) in records.iter().enumerate() {
            let id = i as u64 + 1;
            let time = chrono_time(*minute);
            let s = *session as usize;
            let namespace = if *alice { "alice" } else { "bob" };
            evidence_list.push(evidence(id, namespace, &format!("s{s}"), turn_of_session[s], Role::User, &time, text));
            turn_of_session[s] += 1;
            if *is_erased {
                erased.push(TurnId::from_raw(id));
            }
        }
        let built = build("alice", evidence_list.clone(), erased.clone());
        let reader: Box<dyn ReaderTokenizer> =
            if cl100k { Box::new(TiktokenReader::cl100k_base()) } else { Box::new(TiktokenReader::o200k_base()) };
        let mut config = CompileConfig::hybrid(8, if dense { DenseConfig::On { top_n: 8 } } else { DenseConfig::Off });
        if rerank {
            config.rerank = RerankConfig::On { depth: 16, weight: 1.0 };
        }
        if expand {
            config.expansion = Expansion::AdjacentTurns { radius: 2, max_tokens: None };
        }
        let reranker = TermOverlapReranker;
        let reranker = rerank.then_some(&reranker as &dyn evicortex_compiler::Reranker);
        let as_of = as_of_minute.map(chrono_time);
        let q = query("alice", &question, as_of.as_deref(), budget);
        let context = run(&built, &q, &config, reader.as_ref(), reranker);

        prop_assert!(context.tokens_used <= budget);
        prop_assert_eq!(context.tokens_used as usize, reader.count(&context.text).unwrap());
        for item in &context.items {
            let e = evidence_list.iter().find(|e| e.id == item.record).unwrap();
            prop_assert_eq!(e.turn.namespace.as_str(), "alice");
            prop_assert!(!erased.contains(&item.record), "erased {} packed", item.record);
            if let Some(as_of) = &q.as_of {
                prop_assert!(e.turn.time <= *as_of || e.turn.time.utc_micros() <= as_of.utc_micros());
            }
            for also in &item.also_cited {
                prop_assert!(!erased.contains(also));
            }
            prop_assert!(context.text.contains(&e.turn.text));
        }
        for e in &evidence_list {
            let foreign = e.turn.namespace.as_str() != "alice" || erased.contains(&e.id);
            if foreign && !context.items.iter().any(|i| i.text == e.turn.text) {
                let (first, also) = (format!("[#{}]", e.id.raw()), format!(" #{}]", e.id.raw()));
                prop_assert!(!context.text.contains(&first) && !context.text.contains(&also), "{} cited", e.id);
            }
        }
        // Byte-identical on rerun.
        let again = run(&built, &q, &config, reader.as_ref(), reranker);
        prop_assert_eq!(context.to_json(), again.to_json());
    }
}

fn chrono_time(minute: u32) -> String {
    let (h, m) = (minute / 60, minute % 60);
    format!("2024-01-{:02}T{:02}:{:02}:00Z", 1 + h / 24, h % 24, m)
}

#[test]
fn compiles_of_one_corpus_on_several_threads_match_one_at_a_time() {
    let (records, erased) = crate::fixture::conversation();
    let questions = [
        "Where did I move?",
        "What does my sister do?",
        "When did I start the new job?",
        "What did I say about the train?",
    ];
    let config = CompileConfig::hybrid(10, DenseConfig::On { top_n: 10 });
    let reader = TiktokenReader::o200k_base();
    let alone = build("alice", records.clone(), erased.clone());
    let expected: Vec<_> = questions
        .iter()
        .map(|q| run(&alone, &query("alice", q, None, 300), &config, &reader, None))
        .collect();
    // Packs read the count caches side by side and add to them after: every thread, starting
    // cold, gets the one-at-a-time answers, and the caches end with what one pass counts.
    let shared = build("alice", records, erased);
    std::thread::scope(|scope| {
        for t in 0..4 {
            let (shared, expected, config, reader) = (&shared, &expected, &config, &reader);
            scope.spawn(move || {
                for round in 0..3 {
                    for (i, q) in questions.iter().enumerate().cycle().skip(t).take(4) {
                        let got = run(shared, &query("alice", q, None, 300), config, reader, None);
                        assert_eq!(&got, &expected[i], "thread {t}, round {round}, {q}");
                    }
                }
            });
        }
    });
    assert_eq!(
        shared.corpus.text_tokens_cached(reader.name()),
        alone.corpus.text_tokens_cached(reader.name())
    );
    assert!(shared.corpus.text_tokens_cached(reader.name()) > 0);
}

#[test]
fn further_encoders_lists_under_an_as_of_time_are_those_of_the_whole_search() {
    // Fifteen sessions a day apart: the as-of time admits the first ten, 400 of 600 rows.
    let records = notes(1, 600);
    let mut rows = ExactIndex::<WindowKey>::new(DIM);
    for e in &records {
        rows.insert((e.id, 0), &bag_of_words(&e.turn.text)).unwrap();
    }
    rows.mark_covered(TurnId::from_raw(600)).unwrap();
    let also = WindowedIndex::new(rows);
    let built = build("alice", records, Vec::new());
    let reader = TiktokenReader::o200k_base();
    let config = CompileConfig::hybrid(5, DenseConfig::On { top_n: 10 });
    let q = query("alice", "the kettle and the dog", Some("2024-05-10T12:00:00Z"), 400);
    let vector = bag_of_words(&q.question);
    let compiled = |index: &dyn VectorIndexRead| {
        let also =
            [DenseInput { index, query_vector: &vector, encoder: &built.encoder, pending: 0 }];
        let inputs = CompileInputs {
            corpus: &built.corpus,
            lexical: &built.lexical,
            dense: Some(DenseInput { index: &built.dense, ..also[0] }),
            also_dense: &also,
            context: ContextInputs::default(),
            reader: &reader,
            reranker: None,
        };
        compile(&inputs, &q, &config).unwrap()
    };
    // The fixture's exact index holds the same vectors and searches every row whatever the
    // as-of time (`search_pooled_up_to`'s default).
    let bounded = compiled(&also);
    assert!(
        bounded
            .items
            .iter()
            .any(|item| item.lists.iter().any(|l| l.list == Retriever::DenseAlso(0))),
        "{}",
        bounded.explain()
    );
    assert_eq!(
        serde_json::to_string(&bounded).unwrap(),
        serde_json::to_string(&compiled(&built.dense)).unwrap()
    );
}
