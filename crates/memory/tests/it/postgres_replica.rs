//! A `Memory` over a PostgreSQL hot standby: it embeds and indexes into its own local derived
//! directory, compiles the same cited turns as a `Memory` over the primary once the standby has
//! replayed them, verifies and exports; appends and erasures through it are refusals naming the
//! replica. Needs the pair `scripts/postgres start-replicated` prints.

use evicortex::{
    AppendError, CatchUpLimits, CompileConfig, DenseConfig, EraseError, EraseTarget, ErrorClass,
    IngestOptions, LedgerEraseError, Memory, Namespace, parse_jsonl,
};

use crate::{
    incremental_indexes::{compile_alice, pinned_encoder},
    test_db::ReplicatedDb,
};

const TURNS: &str = r#"{"namespace":"alice","session":"s1","turn":0,"role":"user","speaker":"Ann","text":"I swam across Lake Tahoe last summer.","time":"2024-06-02T10:00:00Z"}
{"namespace":"alice","session":"s1","turn":1,"role":"assistant","text":"That sounds cold and long.","time":"2024-06-02T10:01:00Z"}
{"namespace":"alice","session":"s2","turn":0,"role":"user","speaker":"Bo","text":"My cello lessons start on Tuesday.","time":"2024-07-09T18:00:00Z"}
{"namespace":"alice","session":"s3","turn":0,"role":"user","speaker":"Ann","text":"The marathon is in May next year.","time":"2024-08-01T08:00:00Z"}"#;

fn open(url: &str, derived: &tempfile::TempDir) -> Memory {
    Memory::builder(url).derived_dir(derived.path()).encoder(pinned_encoder()).open().unwrap()
}

/// The (session, turn) of every cited item, in the context's order.
fn cited(memory: &Memory, question: &str) -> Vec<(String, u32)> {
    let config = CompileConfig::default_with(10, DenseConfig::On { top_n: 10 });
    let context = compile_alice(memory, question, &config, 200).unwrap();
    context.items.iter().map(|i| (i.session.as_str().to_owned(), i.turn.raw())).collect()
}

const QUESTIONS: [&str; 2] = ["Where did Ann swim?", "When do the cello lessons start?"];

#[test]
fn a_replica_compiles_what_the_primary_compiles_and_refuses_appends_and_erasures() {
    let db = ReplicatedDb::new();
    let (primary_derived, replica_derived) =
        (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let primary = open(&db.primary.url, &primary_derived);
    let turns = parse_jsonl("inline", TURNS.as_bytes(), &IngestOptions::default()).unwrap();
    assert_eq!(primary.append(&turns).unwrap().appended(), 4);
    primary.catch_up(None, CatchUpLimits::default(), &mut |_| {}).unwrap();
    // The primary's compiles store the vectors its dense lists come from; the replica serves
    // what it has replayed of them.
    let on_primary: Vec<_> = QUESTIONS.iter().map(|q| cited(&primary, q)).collect();
    assert!(on_primary.iter().all(|c| !c.is_empty()), "{on_primary:?}");
    db.wait_for_replay();

    let replica = open(&db.replica_url, &replica_derived);
    // The standby's derived files are its own: it embeds what it has replayed, locally.
    replica.catch_up(None, CatchUpLimits::default(), &mut |_| {}).unwrap();
    let on_replica: Vec<_> = QUESTIONS.iter().map(|q| cited(&replica, q)).collect();
    assert_eq!(on_replica, on_primary);
    assert_eq!(replica.verify().unwrap(), primary.verify().unwrap());
    assert_eq!(replica.stats().unwrap().ledger.turns, 4);
    let (mut exported_primary, mut exported_replica) = (Vec::new(), Vec::new());
    primary.export(None, &mut exported_primary).unwrap();
    replica.export(None, &mut exported_replica).unwrap();
    assert_eq!(exported_replica, exported_primary);

    let server = db.replica_url.rsplit_once('@').unwrap().1.split('/').next().unwrap().to_owned();
    let more = parse_jsonl(
        "inline",
        br#"{"namespace":"alice","session":"s4","turn":0,"role":"user","text":"New on the replica.","time":"2024-09-01T08:00:00Z"}"#
            .as_slice(),
        &IngestOptions::default(),
    )
    .unwrap();
    let refused = replica.append(&more).unwrap_err();
    let message = refused.to_string();
    assert!(matches!(refused, AppendError::ReadOnlyReplica { .. }), "{message}");
    assert!(message.contains(&server) && message.contains("go to the primary"), "{message}");
    assert_eq!(ErrorClass::of(&refused), Some(ErrorClass::BadInput));

    let alice = Namespace::new("alice").unwrap();
    let refused = replica.erase(&EraseTarget::Namespace(alice)).unwrap_err();
    assert!(
        matches!(refused, EraseError::Ledger(LedgerEraseError::ReadOnlyReplica { .. })),
        "{refused}"
    );
    assert_eq!(refused.class(), ErrorClass::BadInput);

    db.wait_for_replay();
    assert_eq!(replica.verify().unwrap().turns, 4);
    assert_eq!(primary.verify().unwrap().turns, 4);
}
