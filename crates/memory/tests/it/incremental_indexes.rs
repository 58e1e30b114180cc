//! A memory that compiles between appends and embedding rounds keeps its namespace's indexes
//! up to date window by window; what it compiles must be what a memory opened afresh on the same
//! store compiles, byte for byte, also after an erasure made through another handle.

use evicortex::{
    CatchUpLimits, CompileConfig, CompileError, CompileQuery, CompileRequest, CompiledContext,
    DenseConfig, EraseTarget, IngestOptions, Memory, Namespace, Overlength, TiktokenReader,
    TokenBudget, TurnId, parse_jsonl,
};

use crate::test_store::TestStore;

const QUESTIONS: [&str; 4] = [
    "Where did Ann swim last summer?",
    "What did Bo say about the cello lessons?",
    "Which lake was cold?",
    "When is the marathon?",
];

/// The pinned encoder (refusing over-long texts); fails, never skips, when it is not installed.
pub(crate) fn pinned_encoder() -> std::sync::Arc<dyn evicortex::Encoder> {
    evicortex::load_pinned_encoder(Overlength::Refuse).unwrap_or_else(|e| {
        panic!("the pinned encoder is needed: run `evicortex model fetch` ({e})")
    })
}

/// Compiles `question` for namespace `alice` under `config` within `budget` o200k tokens.
pub(crate) fn compile_alice(
    memory: &Memory,
    question: &str,
    config: &CompileConfig,
    budget: u32,
) -> Result<CompiledContext, CompileError> {
    let reader = TiktokenReader::o200k_base();
    let query = CompileQuery {
        namespace: Namespace::new("alice").unwrap(),
        question: question.to_owned(),
        as_of: None,
        budget: TokenBudget::new(budget),
    };
    let request = CompileRequest { query: &query, config, reader: &reader, query_vectors: &[] };
    memory.compile(&request)
}

/// The committed default's compile, dense retrieval as `dense` says.
fn compile_default(
    memory: &Memory,
    question: &str,
    dense: DenseConfig,
) -> Result<CompiledContext, CompileError> {
    compile_alice(memory, question, &CompileConfig::default_with(10, dense), 200)
}

fn compile(memory: &Memory, question: &str) -> CompiledContext {
    compile_default(memory, question, DenseConfig::On { top_n: 10 }).unwrap()
}

/// Turn `i` of the conversation: four sessions, turns of a session arriving out of order.
fn turn(i: usize) -> String {
    let topics = ["swimming in Lake Tahoe", "cello lessons", "the cold lake", "marathon in May"];
    let session = i % 4;
    let index = (i * 7) % 23 + 23 * (i / 92);
    let (role, speaker) = if i.is_multiple_of(2) { ("user", "Ann") } else { ("assistant", "Bo") };
    format!(
        r#"{{"namespace":"alice","session":"s{session}","turn":{index},"role":"{role}","speaker":"{speaker}","text":"Turn {i}: {speaker} talks about {}.","time":"2024-05-{:02}T10:{:02}:00Z"}}"#,
        topics[(i / 3) % 4],
        1 + session,
        i % 60
    )
}

#[test]
fn compiles_between_appends_equal_a_fresh_memory_s() {
    let encoder = pinned_encoder();
    let store = TestStore::new();
    let warm = store.builder().encoder(encoder.clone()).open().unwrap();
    let namespace = Namespace::new("alice").unwrap();
    let mut appended = 0;
    for step in 0..8 {
        let lines: Vec<String> = (appended..appended + 7).map(turn).collect();
        appended += 7;
        let turns =
            parse_jsonl("test", lines.join("\n").as_bytes(), &IngestOptions::default()).unwrap();
        warm.append(&turns).unwrap();
        // Vectors arrive every other step, for the turns of two appends at once.
        if step % 2 == 1 {
            warm.catch_up(Some(&namespace), CatchUpLimits { chunk_texts: 5 }, &mut |_| {}).unwrap();
        }
        let fresh = store.builder().encoder(encoder.clone()).open().unwrap();
        for question in QUESTIONS {
            let warm_context = compile(&warm, question);
            let fresh_context = compile(&fresh, question);
            assert_eq!(
                serde_json::to_string(&warm_context).unwrap(),
                serde_json::to_string(&fresh_context).unwrap(),
                "step {step}, {question:?}"
            );
        }
    }

    // An erasure made through another handle (another process, say) reaches the warm indexes.
    let other = store.builder().encoder(encoder.clone()).open().unwrap();
    let before = compile(&warm, QUESTIONS[0]);
    let cited = before.items.first().expect("the question finds evidence").record;
    other.erase(&EraseTarget::Record(namespace.clone(), cited)).unwrap();
    let fresh = store.builder().encoder(encoder).open().unwrap();
    compiles_as_fresh_without(&warm, &fresh, cited, "after the erasure");
}

/// Every question compiles on `warm` as on `fresh`, citing `erased` nowhere.
fn compiles_as_fresh_without(warm: &Memory, fresh: &Memory, erased: TurnId, after: &str) {
    for question in QUESTIONS {
        let warm_context = compile(warm, question);
        assert!(warm_context.items.iter().all(|item| item.record != erased));
        assert_eq!(
            serde_json::to_string(&warm_context).unwrap(),
            serde_json::to_string(&compile(fresh, question)).unwrap(),
            "{after}, {question:?}"
        );
    }
}

#[test]
fn compiles_racing_appends_never_fail_and_end_where_a_fresh_memory_does() {
    let store = TestStore::new();
    let memory = store.open();
    let lexical =
        |memory: &Memory, question: &str| compile_default(memory, question, DenseConfig::Off);
    let first = parse_jsonl("test", turn(0).as_bytes(), &IngestOptions::default()).unwrap();
    memory.append(&first).unwrap();
    let appended = std::sync::atomic::AtomicBool::new(false);
    // Two compilers on the one namespace: they share its indexes (a read lock) while the
    // appender's turns are caught up by one of them at a time (the write lock).
    let compiler = |offset: usize| {
        let mut compiles = 0;
        while !appended.load(std::sync::atomic::Ordering::SeqCst) || compiles == 0 {
            if let Err(e) = lexical(&memory, QUESTIONS[(compiles + offset) % 4]) {
                panic!("compile {compiles} while appending: {e}");
            }
            compiles += 1;
        }
    };
    std::thread::scope(|scope| {
        scope.spawn(|| {
            for i in 1..300 {
                let turns =
                    parse_jsonl("test", turn(i).as_bytes(), &IngestOptions::default()).unwrap();
                memory.append(&turns).unwrap();
            }
            appended.store(true, std::sync::atomic::Ordering::SeqCst);
        });
        scope.spawn(|| compiler(1));
        compiler(0);
    });
    let fresh = store.open();
    for question in QUESTIONS {
        assert_eq!(
            serde_json::to_string(&lexical(&memory, question).unwrap()).unwrap(),
            serde_json::to_string(&lexical(&fresh, question).unwrap()).unwrap(),
            "{question:?}"
        );
    }
}

#[test]
fn the_store_s_writer_applies_its_erasures_in_place_as_a_fresh_memory_would_read_them() {
    let encoder = pinned_encoder();
    let store = TestStore::new();
    let warm = store.builder().encoder(encoder.clone()).lock_store().open().unwrap();
    let namespace = Namespace::new("alice").unwrap();
    let lines: Vec<String> = (0..60).map(turn).collect();
    let turns =
        parse_jsonl("test", lines.join("\n").as_bytes(), &IngestOptions::default()).unwrap();
    warm.append(&turns).unwrap();
    warm.catch_up(Some(&namespace), CatchUpLimits { chunk_texts: 16 }, &mut |_| {}).unwrap();
    let cited = compile(&warm, QUESTIONS[1]).items.first().expect("evidence").record;
    let session = evicortex::SessionId::new("s2").unwrap();
    for target in [
        EraseTarget::Record(namespace.clone(), cited),
        EraseTarget::Session(namespace.clone(), session),
    ] {
        for question in QUESTIONS {
            compile(&warm, question);
        }
        warm.erase(&target).unwrap();
        let fresh = store.builder().encoder(encoder.clone()).beside_writer().open().unwrap();
        compiles_as_fresh_without(&warm, &fresh, cited, &format!("after erasing {target:?}"));
    }
}
