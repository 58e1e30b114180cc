//! A compile right after an acknowledged append finds the new turn lexically, and says how many
//! turns still wait for their vectors; after the catch-up nothing waits.

use evicortex::{
    CatchUpLimits, CompileConfig, CompiledContext, DenseConfig, IngestOptions, Memory, Namespace,
    parse_jsonl,
};

use crate::{
    incremental_indexes::{compile_alice, pinned_encoder},
    test_store::TestStore,
};

fn compile(memory: &Memory, question: &str) -> CompiledContext {
    let config = CompileConfig::hybrid(10, DenseConfig::On { top_n: 10 });
    compile_alice(memory, question, &config, 300).unwrap()
}

#[test]
fn a_compile_after_an_append_finds_the_turn_and_says_dense_lags() {
    let encoder = pinned_encoder();
    let store = TestStore::new();
    let memory = store.builder().encoder(encoder).open().unwrap();
    let jsonl = concat!(
        r#"{"namespace":"alice","session":"s","turn":0,"role":"user","text":"My dog is called Biscuit.","time":"2024-01-01T00:00:00Z"}"#,
        "\n",
        r#"{"namespace":"alice","session":"s","turn":1,"role":"assistant","text":"Biscuit is a lovely name.","time":"2024-01-01T00:00:05Z"}"#,
    );
    let turns = parse_jsonl("test", jsonl.as_bytes(), &IngestOptions::default()).unwrap();
    memory.append(&turns).unwrap();

    let lagging = compile(&memory, "What is my dog called?");
    assert!(lagging.text.contains("My dog is called Biscuit."), "{}", lagging.text);
    assert_eq!(lagging.coverage.dense_pending, Some(2), "both turns wait for their vectors");

    let namespace = Namespace::new("alice").unwrap();
    memory.catch_up(Some(&namespace), CatchUpLimits::default(), &mut |_| {}).unwrap();
    let caught_up = compile(&memory, "What is my dog called?");
    assert!(caught_up.text.contains("My dog is called Biscuit."), "{}", caught_up.text);
    assert_eq!(caught_up.coverage.dense_pending, Some(0));
    store.assert_dense_from_exact_search(&caught_up);
}

/// While the embedder works through a backlog, a compile looks up only the turns whose texts
/// were written since its last lookup; what it finds must be what a fresh memory finds.
#[test]
fn a_compile_during_a_catch_up_sees_every_vector_written_so_far() {
    let encoder = pinned_encoder();
    let store = TestStore::new();
    let memory = store.builder().encoder(encoder.clone()).open().unwrap();
    let topics = ["my dog Biscuit", "the cello", "a trip to Kyoto", "sourdough", "the marathon"];
    let texts: Vec<String> =
        (0..30).map(|i| format!("Note {i}: today I thought about {}.", topics[i % 5])).collect();
    let jsonl: Vec<String> = texts
        .iter()
        .enumerate()
        .map(|(i, text)| {
            format!(
                r#"{{"namespace":"alice","session":"s","turn":{i},"role":"user","text":"{text}","time":"2024-01-01T00:{:02}:00Z"}}"#,
                i % 60
            )
        })
        .collect();
    let turns =
        parse_jsonl("test", jsonl.join("\n").as_bytes(), &IngestOptions::default()).unwrap();
    memory.append(&turns).unwrap();
    let question = "What did I think about my dog?";
    assert_eq!(compile(&memory, question).coverage.dense_pending, Some(30));

    // The embedder's writes, a few texts at a time, in no particular order.
    for (round, chunk) in
        [&texts[20..25], &texts[3..9], &texts[25..30], &texts[0..3]].iter().enumerate()
    {
        let chunk: Vec<&str> = chunk.iter().map(String::as_str).collect();
        memory.embed_documents_cached(&chunk).unwrap();
        let warm = compile(&memory, question);
        let fresh_memory = store.builder().encoder(encoder.clone()).open().unwrap();
        let fresh = compile(&fresh_memory, question);
        assert_eq!(warm.text, fresh.text, "round {round}");
        assert_eq!(warm.items, fresh.items, "round {round}");
        assert_eq!(warm.coverage.dense_pending, fresh.coverage.dense_pending, "round {round}");
    }
    assert_eq!(compile(&memory, question).coverage.dense_pending, Some(30 - 19));
}
