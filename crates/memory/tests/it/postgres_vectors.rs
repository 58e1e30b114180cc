//! A store on PostgreSQL keeps its turns' vectors in pgvector beside the ledger, and compile
//! takes the dense list from there: the same turns as the local exact scan, the path recorded
//! in the context, the as-of filter inside the search, and no vector of an erased turn left in
//! the tables, whether the erasure went through the memory or was interrupted before its purge.

use evicortex::{
    CatchUpLimits, CompileConfig, CompileQuery, CompileRequest, CompiledContext, DenseConfig,
    DenseIndexRef, EraseTarget, EventTime, Memory, Namespace, SessionId, TiktokenReader,
    TokenBudget,
};

use crate::{
    incremental_indexes::pinned_encoder,
    postgres_backend::{TURNS, turns},
    test_store::{TestDb, pgvector_tables},
};

/// The store in `db` opened with the pinned encoder and `derived` as its derived directory.
pub(crate) fn open(db: &TestDb, derived: &tempfile::TempDir) -> Memory {
    Memory::builder(&db.url)
        .derived_dir(derived.path())
        .encoder(pinned_encoder())
        .open()
        .expect("opening the PostgreSQL store")
}

fn query_of(question: &str, as_of: Option<&str>) -> CompileQuery {
    CompileQuery {
        namespace: Namespace::new("alice").unwrap(),
        question: question.to_owned(),
        as_of: as_of.map(|t| EventTime::parse_rfc3339(t).unwrap()),
        budget: TokenBudget::new(200),
    }
}

fn compile(memory: &Memory, question: &str, as_of: Option<&str>) -> CompiledContext {
    let config = CompileConfig::default_with(10, DenseConfig::On { top_n: 10 });
    let reader = TiktokenReader::o200k_base();
    let query = query_of(question, as_of);
    let request =
        CompileRequest { query: &query, config: &config, reader: &reader, query_vectors: &[] };
    memory.compile(&request).unwrap()
}

/// The dense list's (session, turn) pairs, best first.
fn dense_list(memory: &Memory, context: &CompiledContext) -> Vec<(String, u32)> {
    let alice = Namespace::new("alice").unwrap();
    let evidence = memory.evidence(&alice).unwrap();
    let mut ranked: Vec<_> =
        context.items.iter().filter_map(|item| item.dense.map(|d| (d.rank, item.record))).collect();
    ranked.sort();
    ranked
        .into_iter()
        .filter_map(|(_, record)| evidence.iter().find(|e| e.id == record))
        .map(|e| (e.turn.session.as_str().to_owned(), e.turn.turn.raw()))
        .collect()
}

/// Record numbers of the vectors stored for namespace `alice`, over every encoder's table.
fn stored_numbers(db: &TestDb) -> Vec<i64> {
    let mut client = postgres::Client::connect(&db.url, postgres::NoTls).unwrap();
    let mut numbers = Vec::new();
    for table in pgvector_tables(&mut client) {
        for row in client
            .query(&format!("SELECT number FROM {table} WHERE namespace = 'alice'"), &[])
            .unwrap()
        {
            numbers.push(row.get(0));
        }
    }
    numbers.sort_unstable();
    numbers
}

#[test]
fn the_dense_list_comes_from_pgvector_and_matches_the_embedded_exact_scan() {
    let db = TestDb::new();
    let derived = tempfile::tempdir().unwrap();
    let memory = open(&db, &derived);
    assert_eq!(memory.ann(), None, "pgvector searches a PostgreSQL store's vectors");
    memory.append(&turns(TURNS)).unwrap();
    memory.catch_up(None, CatchUpLimits::default(), &mut |_| {}).unwrap();

    let embedded_dir = tempfile::tempdir().unwrap();
    let embedded = Memory::builder(embedded_dir.path()).encoder(pinned_encoder()).open().unwrap();
    embedded.append(&turns(TURNS)).unwrap();
    embedded.catch_up(None, CatchUpLimits::default(), &mut |_| {}).unwrap();

    for question in ["Where did Ann swim?", "What did Bo say about the cello lessons?"] {
        let on_pg = compile(&memory, question, None);
        assert!(
            matches!(
                on_pg.dense_index,
                Some(DenseIndexRef::PgvectorHnsw { .. } | DenseIndexRef::PgvectorExact)
            ),
            "{:?}",
            on_pg.dense_index
        );
        let on_disk = compile(&embedded, question, None);
        assert_eq!(on_disk.dense_index, Some(DenseIndexRef::Exact));
        assert_eq!(dense_list(&memory, &on_pg), dense_list(&embedded, &on_disk), "{question}");
        assert!(!dense_list(&memory, &on_pg).is_empty());
        // The whole dense list, not only what was packed: the same turns in the same order.
        let query = query_of(question, None);
        let vector = memory.embed_query(question).unwrap().vector;
        // Asked for as many as compile asks for, so that pgvector takes the same path.
        let from_pg = memory.dense_candidates(&query, &vector, 10).unwrap();
        let from_disk = embedded.dense_candidates(&query, &vector, 10).unwrap();
        assert_eq!(from_pg.hits.len(), 5);
        let keys =
            |c: &evicortex::DenseCandidates| c.hits.iter().map(|h| h.key).collect::<Vec<_>>();
        assert_eq!(keys(&from_pg), keys(&from_disk), "{question}");
        assert_eq!(from_pg.index, on_pg.dense_index.clone().unwrap());
    }
    assert_eq!(stored_numbers(&db), vec![1, 2, 3, 4, 5]);

    // As of July 1st only the first session is admitted, which pgvector answers by its exact
    // scan over the admitted rows (a filter that selective), never citing a later turn.
    let early =
        compile(&memory, "What did Bo say about the cello lessons?", Some("2024-07-01T00:00:00Z"));
    assert_eq!(early.dense_index, Some(DenseIndexRef::PgvectorExact));
    let listed = dense_list(&memory, &early);
    assert!(!listed.is_empty() && listed.iter().all(|(s, _)| s == "s1"), "{listed:?}");
}

#[test]
fn an_erasure_leaves_no_vector_of_the_erased_turns_even_when_interrupted_before_its_purge() {
    let db = TestDb::new();
    let derived = tempfile::tempdir().unwrap();
    let alice = Namespace::new("alice").unwrap();
    let memory = open(&db, &derived);
    memory.append(&turns(TURNS)).unwrap();
    memory.catch_up(None, CatchUpLimits::default(), &mut |_| {}).unwrap();
    compile(&memory, "Where did Ann swim?", None);
    assert_eq!(stored_numbers(&db), vec![1, 2, 3, 4, 5]);

    memory.erase(&EraseTarget::Session(alice.clone(), SessionId::new("s2").unwrap())).unwrap();
    assert_eq!(stored_numbers(&db), vec![1, 2, 5]);
    let after = compile(&memory, "What did Bo say about the cello lessons?", None);
    assert!(dense_list(&memory, &after).iter().all(|(s, _)| s != "s2"));
    drop(memory);

    // The ledger erased behind the memory's back, as a crash between the ledger's erasure and
    // the purge leaves it: opening the store removes the vectors.
    let ledger = evicortex_postgres::PgLedger::connect(&db.url).unwrap();
    evicortex_ledger::EvidenceLedger::erase(
        &ledger,
        &EraseTarget::Session(alice, SessionId::new("s3").unwrap()),
    )
    .unwrap();
    drop(ledger);
    assert_eq!(stored_numbers(&db), vec![1, 2, 5]);
    let reopened = open(&db, &derived);
    assert_eq!(stored_numbers(&db), vec![1, 2]);
    let context = compile(&reopened, "When is the marathon?", None);
    assert!(dense_list(&reopened, &context).iter().all(|(s, _)| s == "s1"));
    assert_eq!(stored_numbers(&db), vec![1, 2]);
}
