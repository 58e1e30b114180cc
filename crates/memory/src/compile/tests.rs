//! `Memory::compile` over a real ledger: appends, erasures, reopening, the index cache bound.

use evicortex_compiler::{CompileConfig, TiktokenReader};
use evicortex_core::{EventTime, TokenBudget};

use evicortex_compiler::{CompileQuery, CompiledContext, DenseConfig};
use evicortex_core::Namespace;

use super::*;
use crate::{EraseTarget, IngestOptions, parse_jsonl};

fn append(memory: &Memory, lines: &[&str]) {
    let jsonl = lines.join("\n");
    let turns = parse_jsonl("test", jsonl.as_bytes(), &IngestOptions::default()).unwrap();
    memory.append(&turns).unwrap();
}

fn line(ns: &str, session: &str, turn: u32, time: &str, text: &str) -> String {
    format!(
        r#"{{"namespace":"{ns}","session":"{session}","turn":{turn},"role":"user","text":"{text}","time":"{time}"}}"#
    )
}

fn compile(memory: &Memory, question: &str, as_of: Option<&str>) -> CompiledContext {
    try_compile(memory, &TiktokenReader::o200k_base(), "alice", question, as_of, 10).unwrap()
}

/// A lexical hybrid compile (`top_n` candidates) of `question` over `namespace` at 200 tokens.
fn try_compile(
    memory: &Memory,
    reader: &TiktokenReader,
    namespace: &str,
    question: &str,
    as_of: Option<&str>,
    top_n: usize,
) -> Result<CompiledContext, CompileError> {
    let query = CompileQuery {
        namespace: Namespace::new(namespace).unwrap(),
        question: question.to_owned(),
        as_of: as_of.map(|t| EventTime::parse_rfc3339(t).unwrap()),
        budget: TokenBudget::new(200),
    };
    let config = CompileConfig::hybrid(top_n, DenseConfig::Off);
    memory.compile(&CompileRequest { query: &query, config: &config, reader, query_vectors: &[] })
}

/// BM25 indexes the speaker's name with the text: a question naming Melanie finds what
/// Melanie said, not the turns that address her by name.
#[test]
fn a_question_naming_a_speaker_finds_that_speakers_turn() {
    let dir = tempfile::tempdir().unwrap();
    let memory = Memory::open(dir.path()).unwrap();
    let said = |turn: u32, speaker: &str, text: &str| {
        format!(
            r#"{{"namespace":"alice","session":"s1","turn":{turn},"role":"user","speaker":"{speaker}","text":"{text}","time":"2024-05-02T10:0{turn}:00Z"}}"#
        )
    };
    append(
        &memory,
        &[
            &said(0, "Caroline", "Hi Melanie!"),
            &said(1, "Melanie", "The race was great."),
            &said(2, "Caroline", "My race is next week."),
            &said(3, "Caroline", "The race route is by the river."),
        ],
    );
    let reader = TiktokenReader::o200k_base();
    let context = try_compile(&memory, &reader, "alice", "Melanie race", None, 1).unwrap();
    assert_eq!(context.items.len(), 1, "{}", context.explain());
    assert_eq!(context.items[0].text, "The race was great.", "{}", context.explain());
}

#[test]
fn follows_appends_and_erasures_and_is_reproducible_across_opens() {
    let dir = tempfile::tempdir().unwrap();
    let memory = Memory::open(dir.path()).unwrap();
    append(
        &memory,
        &[
            &line("alice", "s1", 0, "2024-05-02T10:00:00Z", "I moved to Lisbon in May."),
            &line("bob", "b1", 0, "2024-05-02T10:00:00Z", "Bob also moved to Lisbon."),
        ],
    );
    let first = compile(&memory, "where did I move?", None);
    assert_eq!(first.items.len(), 1, "{}", first.explain());
    assert!(first.text.contains("I moved to Lisbon in May."));

    // A new turn is picked up incrementally; the as-of filter hides it.
    append(
        &memory,
        &[&line("alice", "s2", 0, "2024-07-01T09:00:00Z", "Then I moved again, to Porto.")],
    );
    let second = compile(&memory, "where did I move?", None);
    assert_eq!(second.items.len(), 2, "{}", second.explain());
    let before = compile(&memory, "where did I move?", Some("2024-06-01T00:00:00Z"));
    assert_eq!(before.items.len(), 1);

    // Erasure rebuilds the indexes: the erased text is gone from every context.
    let lisbon = second.items.iter().find(|i| i.text.contains("Lisbon")).unwrap().record;
    memory.erase(&EraseTarget::Record(Namespace::new("alice").unwrap(), lisbon)).unwrap();
    let after = compile(&memory, "where did I move to Lisbon?", None);
    assert!(!after.text.contains("Lisbon in May"), "{}", after.text);
    assert!(after.items.iter().all(|i| i.record != lisbon));

    // A fresh open compiles the same bytes.
    let reopened = Memory::open(dir.path()).unwrap();
    assert_eq!(
        compile(&reopened, "where did I move?", None).to_json(),
        compile(&memory, "where did I move?", None).to_json()
    );
}

#[test]
fn an_empty_question_is_refused_and_dense_needs_an_encoder() {
    let dir = tempfile::tempdir().unwrap();
    let memory = Memory::open(dir.path()).unwrap();
    append(&memory, &[&line("alice", "s1", 0, "2024-05-02T10:00:00Z", "hello")]);
    let reader = TiktokenReader::o200k_base();
    let err = try_compile(&memory, &reader, "alice", "  \n", None, 10).unwrap_err();
    assert!(matches!(err, CompileError::EmptyQuestion), "{err:?}");
    assert_eq!((err.class(), err.field().as_deref()), (ErrorClass::BadInput, Some("query")));

    let query = CompileQuery {
        namespace: Namespace::new("alice").unwrap(),
        question: "hello".to_owned(),
        as_of: None,
        budget: TokenBudget::new(200),
    };
    let dense = CompileConfig::hybrid(10, DenseConfig::On { top_n: 10 });
    let request =
        CompileRequest { query: &query, config: &dense, reader: &reader, query_vectors: &[] };
    let err = memory.compile(&request).unwrap_err();
    assert!(matches!(err, CompileError::DenseUnavailable), "{err:?}");
    assert_eq!(err.field().as_deref(), Some("dense"));
}

/// The index cache is bounded in bytes: compiling many namespaces keeps the estimate under the
/// budget by dropping the least recently used, and a dropped namespace compiles the same again.
#[test]
fn the_index_cache_stays_within_its_budget() {
    let dir = tempfile::tempdir().unwrap();
    let budget = 40_000;
    let memory = Memory::builder(dir.path()).index_cache_bytes(budget).open().unwrap();
    let lines: Vec<String> = (0..30)
        .flat_map(|ns| {
            (0..20).map(move |t| {
                line(
                    &format!("ns{ns}"),
                    "s1",
                    t,
                    "2024-05-02T10:00:00Z",
                    &format!("turn {t} of tenant {ns} about gardening"),
                )
            })
        })
        .collect();
    append(&memory, &lines.iter().map(String::as_str).collect::<Vec<_>>());
    let reader = TiktokenReader::o200k_base();
    let compile_ns = |ns: usize| {
        try_compile(&memory, &reader, &format!("ns{ns}"), "gardening", None, 10).unwrap().to_json()
    };
    let first = compile_ns(0);
    for ns in 0..30 {
        compile_ns(ns);
        let (bytes, namespaces) = memory.inner.indexes.usage();
        assert!(bytes <= budget, "{bytes} bytes cached in {namespaces} namespaces");
    }
    let (_, namespaces) = memory.inner.indexes.usage();
    assert!(namespaces < 30, "nothing was evicted ({namespaces} namespaces cached)");
    assert_eq!(compile_ns(0), first);
}

/// A namespace whose indexes alone exceed the budget stays cached (a rebuild at every compile
/// would allocate as much again), and every other namespace is dropped beside it.
#[test]
fn a_namespace_over_the_whole_budget_stays_cached_alone() {
    let dir = tempfile::tempdir().unwrap();
    let budget = 4_000;
    let memory = Memory::builder(dir.path()).index_cache_bytes(budget).open().unwrap();
    let mut lines: Vec<String> = (0..200)
        .map(|t| line("big", "s1", t, "2024-05-02T10:00:00Z", &format!("turn {t} on roses")))
        .collect();
    lines.push(line("small", "s1", 0, "2024-05-02T10:00:00Z", "one turn on roses"));
    append(&memory, &lines.iter().map(String::as_str).collect::<Vec<_>>());
    let reader = TiktokenReader::o200k_base();
    let compile_ns =
        |ns: &str| try_compile(&memory, &reader, ns, "roses", None, 10).unwrap().to_json();
    compile_ns("small");
    let first = compile_ns("big");
    let (bytes, namespaces) = memory.inner.indexes.usage();
    assert!(bytes > budget, "the namespace fits ({bytes} bytes): the test needs a larger one");
    assert_eq!(namespaces, 1, "the other namespace stays beside it");
    let slot = memory.inner.indexes.slot(&Namespace::new("big").unwrap());
    assert!(slot.read().unwrap().corpus.len() == 200, "kept, not dropped");
    assert_eq!(compile_ns("big"), first);
}

/// The background precount fills the cache packing reads with the counts packing would
/// compute: live turns only, in each tokenizer compiled with, and a warm compile returns what a
/// cold one returns.
#[test]
fn the_background_token_precount_counts_every_live_turn_as_packing_would() {
    let dir = tempfile::tempdir().unwrap();
    let memory = Memory::open(dir.path()).unwrap();
    let turns = crate::token_precount::PRECOUNT_MIN_TURNS + 100;
    let lines: Vec<String> = (0..turns as u32)
        .map(|t| {
            let text = format!("Note {t}: the {} garden needs {} litres of water.", t % 7, t * 3);
            line("alice", &format!("s{}", t / 50), t % 50, "2024-05-02T10:00:00Z", &text)
        })
        .collect();
    append(&memory, &lines.iter().map(String::as_str).collect::<Vec<_>>());
    let alice = Namespace::new("alice").unwrap();
    memory.erase(&EraseTarget::Record(alice.clone(), evicortex_core::TurnId::from_raw(5))).unwrap();
    let live = turns - 1;
    let cached = |tokenizer: &str| {
        memory.inner.indexes.slot(&alice).read().unwrap().corpus.text_tokens_cached(tokenizer)
    };

    let cold = compile(&memory, "how much water does the garden need?", None);
    assert!(memory.wait_for_token_counts(std::time::Duration::from_secs(120)));
    assert_eq!(cached("o200k_base"), live);
    assert_eq!(cached("cl100k_base"), 0, "only the tokenizer compiled with");
    let warm = compile(&memory, "how much water does the garden need?", None);
    assert_eq!(warm.to_json(), cold.to_json());
    let fresh = Memory::open(dir.path()).unwrap();
    let question = "which note mentions 300 litres?";
    assert_eq!(
        compile(&memory, question, None).to_json(),
        compile(&fresh, question, None).to_json()
    );

    try_compile(&memory, &TiktokenReader::cl100k_base(), "alice", question, None, 10).unwrap();
    assert!(memory.wait_for_token_counts(std::time::Duration::from_secs(120)));
    assert_eq!(cached("cl100k_base"), live);
}

/// Below the threshold nothing is counted beyond what packing meets.
#[test]
fn a_small_namespace_is_not_precounted() {
    let dir = tempfile::tempdir().unwrap();
    let memory = Memory::open(dir.path()).unwrap();
    let lines: Vec<String> = (0..200u32)
        .map(|t| line("alice", "s1", t, "2024-05-02T10:00:00Z", &format!("turn {t} on gardening")))
        .collect();
    append(&memory, &lines.iter().map(String::as_str).collect::<Vec<_>>());
    compile(&memory, "gardening", None);
    assert!(memory.wait_for_token_counts(std::time::Duration::from_secs(120)));
    let alice = Namespace::new("alice").unwrap();
    let cached =
        memory.inner.indexes.slot(&alice).read().unwrap().corpus.text_tokens_cached("o200k_base");
    assert!(cached < 200, "{cached} of 200 turns counted");
}

#[test]
fn the_background_indexer_indexes_appends_ahead_of_compiles_without_changing_them() {
    let dir = tempfile::tempdir().unwrap();
    let warm = Memory::builder(dir.path()).background_indexing().open().unwrap();
    let turns: Vec<String> = (0..40)
        .map(|i| {
            line(
                "alice",
                &format!("s{}", i % 3),
                i,
                "2024-05-01T10:00:00Z",
                &format!("day {i} about the lake"),
            )
        })
        .collect();
    let lines: Vec<&str> = turns.iter().map(String::as_str).collect();
    append(&warm, &lines[..20]);
    compile(&warm, "the lake", None);
    let slot = warm.inner.indexes.slot(&Namespace::new("alice").unwrap());
    let indexed = || slot.read().unwrap().corpus.len();
    assert_eq!(indexed(), 20);

    append(&warm, &lines[20..]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while indexed() < 40 {
        assert!(std::time::Instant::now() < deadline, "not indexed ahead within 20 s");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(slot.read().unwrap().lexical.len(), 40);
    let fresh = Memory::builder(dir.path()).open().unwrap();
    for question in ["the lake", "day 33", "day 7 lake"] {
        assert_eq!(compile(&warm, question, None), compile(&fresh, question, None), "{question}");
    }
}

#[test]
fn the_store_s_writer_applies_an_erasure_to_its_indexes_in_place_as_a_rebuild_would() {
    let dir = tempfile::tempdir().unwrap();
    let warm = Memory::builder(dir.path()).lock_store().open().unwrap();
    let alice = Namespace::new("alice").unwrap();
    let turns: Vec<String> = (0..60)
        .map(|i| {
            let topic = ["the lake", "cello lessons", "a marathon"][i % 3];
            // Some texts said again: dedup groups lose and keep members.
            let text = match i % 10 {
                5 => "the lake again".to_owned(),
                _ => format!("day {i}: {topic}, word{i}"),
            };
            line("alice", &format!("s{}", i % 4), i as u32, "2024-05-01T10:00:00Z", &text)
        })
        .collect();
    let lines: Vec<&str> = turns.iter().map(String::as_str).collect();
    append(&warm, &lines);
    append(&warm, &[&line("bob", "s0", 0, "2024-05-01T10:00:00Z", "bob's lake")]);
    let questions =
        ["the lake", "cello word7", "marathon day 13", "word21 word22", "word40", "lake again"];
    let record = |i: u64| evicortex_core::TurnId::from_raw(i);
    let targets = [
        EraseTarget::Record(alice.clone(), record(8)),
        EraseTarget::Record(alice.clone(), record(22)),
        EraseTarget::Session(alice.clone(), evicortex_core::SessionId::new("s1").unwrap()),
        EraseTarget::Record(Namespace::new("bob").unwrap(), record(1)),
    ];
    for target in targets {
        for question in questions {
            compile_default(&warm, question);
        }
        let slot = warm.inner.indexes.slot(&alice);
        let receipt = warm.erase(&target).unwrap();
        {
            // Applied before the erase returned, without waiting for a compile.
            let indexes = slot.read().unwrap();
            assert!(indexes.window.is_some(), "the window index is kept too");
            for erased in receipt.erased.iter().filter(|e| e.namespace == alice) {
                assert!(indexes.corpus.get(erased.id).is_none(), "{target:?}");
                assert!(indexes.lexical.row(erased.id).is_none(), "{target:?}");
            }
            if receipt.erased.iter().any(|e| e.namespace == alice) {
                assert_eq!(indexes.erasures_applied, receipt.redaction, "{target:?}");
            }
        }
        let fresh = Memory::builder(dir.path()).beside_writer().open().unwrap();
        for question in questions {
            let warm_context = compile_default(&warm, question);
            assert_eq!(warm_context, compile_default(&fresh, question), "{target:?} {question}");
        }
        assert!(Arc::ptr_eq(&slot, &warm.inner.indexes.slot(&alice)), "not dropped: {target:?}");
    }
}

#[test]
fn a_server_s_erasure_does_not_wait_for_the_compiles_reading_its_namespace() {
    use std::sync::{
        atomic::{AtomicBool, Ordering},
        mpsc,
    };
    use std::time::{Duration, Instant};
    let dir = tempfile::tempdir().unwrap();
    let warm = Memory::builder(dir.path()).lock_store().background_indexing().open().unwrap();
    let alice = Namespace::new("alice").unwrap();
    let turns: Vec<String> = (0..30)
        .map(|i| {
            let text = format!("day {i}: the lake, word{i}");
            line("alice", &format!("s{}", i % 3), i, "2024-05-01T10:00:00Z", &text)
        })
        .collect();
    let lines: Vec<&str> = turns.iter().map(String::as_str).collect();
    append(&warm, &lines);
    compile_default(&warm, "the lake");
    let slot = warm.inner.indexes.slot(&alice);

    // A compile reading the namespace for as long as the erasure would wait for it.
    let released = Arc::new(AtomicBool::new(false));
    let (held, holding) = mpsc::channel();
    let reader = std::thread::spawn({
        let (slot, released) = (Arc::clone(&slot), Arc::clone(&released));
        move || {
            let indexes = slot.read().unwrap();
            held.send(()).unwrap();
            std::thread::sleep(Duration::from_secs(5));
            released.store(true, Ordering::SeqCst);
            drop(indexes);
        }
    });
    holding.recv().unwrap();
    let target = EraseTarget::Record(alice.clone(), evicortex_core::TurnId::from_raw(8));
    let receipt = warm.erase(&target).unwrap();
    assert!(!released.load(Ordering::SeqCst), "the erasure waited for the compile reading");
    reader.join().unwrap();

    // Applied by the indexer without a compile, as the erasing thread would have.
    let erased = receipt.erased[0].id;
    let deadline = Instant::now() + Duration::from_secs(20);
    while slot.read().unwrap().corpus.get(erased).is_some() {
        assert!(Instant::now() < deadline, "the erasure not applied by the indexer in 20 s");
        std::thread::sleep(Duration::from_millis(10));
    }
    let indexes = slot.read().unwrap();
    assert!(indexes.lexical.row(erased).is_none());
    assert_eq!(indexes.erasures_applied, receipt.redaction);
    drop(indexes);
    let fresh = Memory::builder(dir.path()).beside_writer().open().unwrap();
    for question in ["the lake", "word8", "day 8"] {
        assert_eq!(compile_default(&warm, question), compile_default(&fresh, question));
    }
    assert!(Arc::ptr_eq(&slot, &warm.inner.indexes.slot(&alice)), "applied in place, not dropped");
}

/// The committed default's compile without dense retrieval (its window index included).
fn compile_default(memory: &Memory, question: &str) -> CompiledContext {
    let query = CompileQuery {
        namespace: Namespace::new("alice").unwrap(),
        question: question.to_owned(),
        as_of: None,
        budget: TokenBudget::new(200),
    };
    let config = CompileConfig::default_with(10, DenseConfig::Off);
    let reader = TiktokenReader::o200k_base();
    let request =
        CompileRequest { query: &query, config: &config, reader: &reader, query_vectors: &[] };
    memory.compile(&request).unwrap()
}
