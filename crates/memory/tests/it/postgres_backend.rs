//! One scenario through the facade on both ledgers, the embedded SQLite file and a PostgreSQL
//! database: appends (a duplicate, a conflict), a dense compile, verify, a session erased, a
//! reopen. Both must cite the same turns at every step. The PostgreSQL side needs a server:
//! `scripts/postgres start`, then export the URL it prints as EVICORTEX_TEST_POSTGRES_URL.

use evicortex::{
    AppendError, CatchUpLimits, CompileConfig, DenseConfig, EraseTarget, IngestOptions, Memory,
    Namespace, SessionId, parse_jsonl,
};

use crate::{
    incremental_indexes::{compile_alice, pinned_encoder},
    test_store::{TestDb, TestStore},
};

fn open(store: &TestStore) -> Memory {
    store.builder().encoder(pinned_encoder()).open().expect("opening the store")
}

pub(crate) const TURNS: &str = r#"{"namespace":"alice","session":"s1","turn":0,"role":"user","speaker":"Ann","text":"I swam across Lake Tahoe last summer.","time":"2024-06-02T10:00:00Z"}
{"namespace":"alice","session":"s1","turn":1,"role":"assistant","text":"That sounds cold and long.","time":"2024-06-02T10:01:00Z"}
{"namespace":"alice","session":"s2","turn":0,"role":"user","speaker":"Bo","text":"My cello lessons start on Tuesday.","time":"2024-07-09T18:00:00Z"}
{"namespace":"alice","session":"s2","turn":1,"role":"user","speaker":"Bo","text":"The teacher said to practise scales every day.","time":"2024-07-09T18:02:00Z"}
{"namespace":"alice","session":"s3","turn":0,"role":"user","speaker":"Ann","text":"The marathon is in May next year.","time":"2024-08-01T08:00:00Z"}"#;

pub(crate) fn turns(jsonl: &str) -> Vec<evicortex::Turn> {
    parse_jsonl("inline", jsonl.as_bytes(), &IngestOptions::default()).unwrap()
}

/// The (session, turn) of every cited item, in the context's order: record digests are salted
/// per store, so two stores agree on which turns, not on digests.
fn cited(memory: &Memory, question: &str) -> Vec<(String, u32)> {
    let config = CompileConfig::default_with(10, DenseConfig::On { top_n: 10 });
    let context = compile_alice(memory, question, &config, 200).unwrap();
    context.items.iter().map(|i| (i.session.as_str().to_owned(), i.turn.raw())).collect()
}

/// Runs the scenario on `store`, returning what each step cited.
fn scenario(store: &TestStore) -> Vec<Vec<(String, u32)>> {
    let mut seen = Vec::new();
    let memory = open(store);
    let receipt = memory.append(&turns(TURNS)).unwrap();
    assert_eq!(receipt.appended(), 5);
    // The same turn again is already present; the same key with another text is refused.
    let first = TURNS.lines().next().unwrap();
    assert_eq!(memory.append(&turns(first)).unwrap().already_present(), 1);
    let conflicting = first.replace("Lake Tahoe", "Lake Geneva");
    match memory.append(&turns(&conflicting)) {
        Err(AppendError::Conflict { field, .. }) => assert_eq!(field, "text"),
        other => panic!("a conflicting turn must be refused, got {other:?}"),
    }
    assert_eq!(memory.check_append(&turns(TURNS)).unwrap(), 0);
    memory.catch_up(None, CatchUpLimits::default(), &mut |_| {}).unwrap();
    seen.push(cited(&memory, "Where did Ann swim?"));
    seen.push(cited(&memory, "What did Bo say about the cello lessons?"));
    assert_eq!(memory.verify().unwrap().turns, 5);

    let alice = Namespace::new("alice").unwrap();
    memory.erase(&EraseTarget::Session(alice.clone(), SessionId::new("s2").unwrap())).unwrap();
    let after = cited(&memory, "What did Bo say about the cello lessons?");
    assert!(after.iter().all(|(s, _)| s != "s2"), "an erased session was cited: {after:?}");
    seen.push(after);
    let report = memory.verify().unwrap();
    assert_eq!((report.turns, report.erased_turns, report.redactions), (3, 2, 1));
    assert_eq!(memory.stats().unwrap().ledger.turns, 3);
    drop(memory);

    let reopened = open(store);
    seen.push(cited(&reopened, "Where did Ann swim?"));
    seen.push(cited(&reopened, "What did Bo say about the cello lessons?"));
    assert_eq!(reopened.evidence(&alice).unwrap().len(), 3);
    reopened.verify().unwrap();
    seen
}

#[test]
fn both_ledgers_cite_the_same_turns_through_appends_erasure_and_reopen() {
    let embedded = scenario(&TestStore::embedded());
    let postgres = scenario(&TestStore::postgres());
    assert!(embedded[0].contains(&("s1".to_owned(), 0)), "{embedded:?}");
    assert!(embedded[1].contains(&("s2".to_owned(), 0)), "{embedded:?}");
    assert_eq!(embedded, postgres);
}

#[test]
fn a_derived_directory_is_never_reused_for_another_database() {
    let (one, two) = (TestDb::new(), TestDb::new());
    let derived = tempfile::tempdir().unwrap();
    Memory::builder(&one.url).derived_dir(derived.path()).open().unwrap();
    let refused = Memory::builder(&two.url).derived_dir(derived.path()).open().unwrap_err();
    assert!(matches!(refused, evicortex::OpenError::DerivedDir { .. }), "{refused}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let record = derived.path().join(evicortex::DERIVED_FROM_FILE);
        let mode = fs_err::metadata(&record).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{} is {mode:o}", record.display());
    }
}

#[test]
fn pool_max_changes_how_a_store_connects_not_which_derived_directory_is_its() {
    let db = TestDb::new();
    let derived = tempfile::tempdir().unwrap();
    let memory = Memory::builder(&db.url).derived_dir(derived.path()).open().unwrap();
    memory.append(&turns(r#"{"namespace":"p","session":"s","turn":0,"role":"user","text":"pooled","time":"2024-05-02T10:00:00Z"}"#)).unwrap();
    drop(memory);
    let sep = if db.url.contains('?') { '&' } else { '?' };
    let capped = Memory::builder(format!("{}{sep}pool_max=1", db.url))
        .derived_dir(derived.path())
        .open()
        .unwrap();
    assert_eq!(capped.verify().unwrap().records, 1);
}

#[test]
fn an_unreachable_server_is_an_error_naming_it_without_its_password() {
    let derived = tempfile::tempdir().unwrap();
    // Port 1 on the loopback: nothing listens there, so the connection is refused at once.
    let url = "postgres://evicortex:secret-pass@127.0.0.1:1/evicortex?connect_timeout=2";
    let refused = Memory::builder(url).derived_dir(derived.path()).open().unwrap_err();
    let message = refused.to_string();
    assert!(message.contains("127.0.0.1:1"), "{message}");
    assert!(!message.contains("secret-pass"), "{message}");
    assert_eq!(refused.class(), evicortex::ErrorClass::Io);
    assert!(!derived.path().join(evicortex::LEDGER_FILE).exists());
}
