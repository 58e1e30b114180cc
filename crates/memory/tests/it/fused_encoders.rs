//! A store with two encoders: catch-up embeds every turn with each, compile fuses a dense list
//! per encoder and names both, a fresh memory opened on the store's encoder list compiles the
//! same bytes, and an erasure leaves no vector of the erased text under either identity.

use evicortex::{
    AlsoDenseRef, CatchUpLimits, CompileConfig, DenseConfig, EraseTarget, ErrorClass,
    IngestOptions, Memory, Namespace, Overlength, Retriever, parse_jsonl,
};

use crate::{
    incremental_indexes::compile_alice,
    test_store::{TestStore, pgvector_tables},
};

const TURNS: &str = r#"{"namespace":"alice","session":"s1","turn":0,"role":"user","speaker":"Ann","text":"I swam across Lake Tahoe last August.","time":"2024-05-01T10:00:00Z"}
{"namespace":"alice","session":"s1","turn":1,"role":"assistant","speaker":"Bo","text":"That is a long swim; the water must have been cold.","time":"2024-05-01T10:01:00Z"}
{"namespace":"alice","session":"s2","turn":0,"role":"user","speaker":"Ann","text":"My cello teacher moved the lessons to Thursday evenings.","time":"2024-05-02T10:00:00Z"}
{"namespace":"alice","session":"s2","turn":1,"role":"assistant","speaker":"Bo","text":"Thursday evenings it is; shall I add them to your calendar?","time":"2024-05-02T10:01:00Z"}
{"namespace":"alice","session":"s3","turn":0,"role":"user","speaker":"Ann","text":"The marathon is on the twelfth of May, I am nervous.","time":"2024-05-03T10:00:00Z"}"#;

const NAMES: [&str; 2] = ["all-minilm-l6-v2", "all-mpnet-base-v2"];

fn store_encoders(store: &TestStore) -> Vec<std::sync::Arc<dyn evicortex::Encoder>> {
    evicortex::load_store_encoders(store.files_dir(), Overlength::Refuse).unwrap_or_else(|e| {
        panic!(
            "{e}\nthis test needs both encoders: run `evicortex model fetch` and \
             `evicortex model fetch all-mpnet-base-v2`"
        )
    })
}

fn open(store: &TestStore) -> Memory {
    store.builder().encoders(store_encoders(store)).open().unwrap()
}

/// The number of vectors in each encoder's pgvector table, in the order the encoders were
/// registered.
fn pgvector_rows(url: &str) -> Vec<i64> {
    let mut client = postgres::Client::connect(url, postgres::NoTls).unwrap();
    pgvector_tables(&mut client)
        .iter()
        .map(|table| {
            client.query_one(&format!("SELECT COUNT(*) FROM {table}"), &[]).unwrap().get(0)
        })
        .collect()
}

#[test]
fn two_encoders_are_embedded_fused_named_and_purged_together() {
    let store = TestStore::new();
    let names: Vec<String> = NAMES.iter().map(|s| (*s).to_owned()).collect();
    // A PostgreSQL store's derived directory holding files before it names its database is
    // refused at open; the test's directory reaches the store through the builder, not a URL
    // (whose `store_files_dir` claims it), so an open claims it before the list is written.
    drop(store.open());
    evicortex::set_store_encoders(store.files_dir(), &names).unwrap();
    let memory = open(&store);
    assert_eq!(memory.encoders().len(), 2);
    let turns = parse_jsonl("test", TURNS.as_bytes(), &IngestOptions::default()).unwrap();
    memory.append(&turns).unwrap();

    let report = memory.catch_up(None, CatchUpLimits::default(), &mut |_| {}).unwrap();
    assert_eq!(report.embedded_texts, 5);
    assert_eq!(report.also.len(), 1, "the second encoder reports on its own");
    assert_eq!(report.also[0].embedded_texts, 5);
    assert!(report.also[0].model.contains("all-mpnet-base-v2"), "{}", report.also[0].model);
    assert_ne!(report.identity, report.also[0].identity);

    let config = CompileConfig::default_with(10, DenseConfig::On { top_n: 10 });
    let question = "Which day are the cello lessons now?";
    let context = compile_alice(&memory, question, &config, 400).unwrap();
    let [AlsoDenseRef { encoder, pending, covers, .. }] = context.also_dense.as_slice() else {
        panic!("one also-encoder expected: {:?}", context.also_dense)
    };
    assert!(encoder.model.contains("all-mpnet-base-v2"), "{}", encoder.model);
    assert_eq!(encoder.identity_digest, report.also[0].identity.to_hex());
    assert_eq!((*pending, covers.map(|c| c.raw())), (0, Some(5)));
    let cello = context.items.iter().find(|i| i.text.contains("cello")).expect("cited");
    assert!(
        cello.lists.iter().any(|l| l.list == Retriever::DenseAlso(0) && l.rank == 1),
        "{}",
        context.explain()
    );
    let json = serde_json::to_value(&context).unwrap();
    assert!(json.to_string().contains("\"dense_2\""), "the list is named in the JSON");
    let back: evicortex::CompiledContext = serde_json::from_value(json).unwrap();
    assert_eq!(back, context);

    // The question embedded once by every encoder compiles the same context as embedding it
    // inside compile.
    let vectors = memory.embed_query_all(question).unwrap();
    assert_eq!(vectors.len(), 2);
    let reader = evicortex::TiktokenReader::o200k_base();
    let query = evicortex::CompileQuery {
        namespace: Namespace::new("alice").unwrap(),
        question: question.to_owned(),
        as_of: None,
        budget: evicortex::TokenBudget::new(400),
    };
    let request = evicortex::CompileRequest {
        query: &query,
        config: &config,
        reader: &reader,
        query_vectors: &vectors,
    };
    assert_eq!(memory.compile(&request).unwrap(), context);

    // A memory opened afresh from the store's list compiles the same bytes; one opened with the
    // first encoder alone names none further and differs.
    let fresh = open(&store);
    let again = compile_alice(&fresh, question, &config, 400).unwrap();
    assert_eq!(serde_json::to_string(&again).unwrap(), serde_json::to_string(&context).unwrap());
    let single = store.builder().encoder(store_encoders(&store).remove(0)).open().unwrap();
    let alone = compile_alice(&single, question, &config, 400).unwrap();
    assert!(alone.also_dense.is_empty());
    assert!(alone.items.iter().all(|i| i.lists.iter().all(|l| l.list != Retriever::DenseAlso(0))));
    drop((fresh, single));

    // Erasing the cello turn leaves no vector of its text under either encoder.
    let cello_record = cello.record;
    memory.erase(&EraseTarget::Record(Namespace::new("alice").unwrap(), cello_record)).unwrap();
    drop(memory);
    assert_eq!(cached_vectors(&store), (2, 8), "4 live texts under each of the 2 encoders");
    if let Some(url) = store.postgres_url() {
        assert_eq!(pgvector_rows(url), [4, 4], "4 live turns under each of the 2 encoders");
    }
    let reopened = open(&store);
    let after = compile_alice(&reopened, question, &config, 400).unwrap();
    assert!(after.items.iter().all(|i| i.record != cello_record));
    assert!(after.also_dense[0].pending == 0);
}

#[test]
fn encoders_that_cannot_be_fused_are_refused_at_open() {
    let store = TestStore::new();
    let minilm = store_encoders(&store).remove(0);
    let twice = store.builder().encoders(vec![minilm.clone(), minilm.clone()]).open();
    let err = twice.expect_err("the same encoder twice is refused");
    assert_eq!(ErrorClass::of(&err), Some(ErrorClass::BadInput), "{err}");
    assert!(err.to_string().contains("twice"), "{err}");
    let mut builder = store.builder();
    builder.also_encoder(minilm);
    let err = builder.open().expect_err("an also-encoder needs a first one");
    assert!(err.to_string().contains("without a first"), "{err}");
}

/// (identities, vectors) in the store's embedding cache: its file, or its database's table.
fn cached_vectors(store: &TestStore) -> (i64, i64) {
    let count = "SELECT COUNT(DISTINCT identity), COUNT(*) FROM";
    match store.postgres_url() {
        Some(url) => {
            let mut client = postgres::Client::connect(url, postgres::NoTls).unwrap();
            let row = client.query_one(&format!("{count} embedding_vectors"), &[]).unwrap();
            (row.get(0), row.get(1))
        }
        None => {
            let file = store.files_dir().join(evicortex::EMBEDDINGS_FILE);
            let db = rusqlite::Connection::open(file).unwrap();
            db.query_row(&format!("{count} vectors"), [], |r| Ok((r.get(0)?, r.get(1)?))).unwrap()
        }
    }
}
