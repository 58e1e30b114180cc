//! A ledger read from a hot standby: what the primary appended, verified with the same head;
//! every write refused on the standby's handle before it is sent; an erasure on the primary
//! replayed. Needs the replicated pair (`scripts/postgres start-replicated`).

use evicortex_core::SessionId;
use evicortex_ledger::{ContentSalt, EraseTarget, EvidenceLedger, Ledger};
use evicortex_postgres::{AppendError, ConnectError, EraseError, ImportError, PgLedger};

use crate::{
    erase_readback::files_holding,
    support::{ReplicatedDb, ns, turn},
};

/// The pair's directory (`primary/`, `replica/`), whose files the erasure test reads back.
fn pair_data() -> std::path::PathBuf {
    let dir = std::env::var_os("EVICORTEX_TEST_POSTGRES_PAIR_DATA").unwrap_or_else(|| {
        panic!(
            "EVICORTEX_TEST_POSTGRES_PAIR_DATA is not set: the replica erasure test reads the \
             pair's files. Run `scripts/postgres start-replicated` and export what it prints"
        )
    });
    std::path::PathBuf::from(dir)
}

/// The standby's `host:port`, as its errors must name it.
fn server_of(url: &str) -> &str {
    let rest = &url[url.find('@').map_or(url.find("://").unwrap() + 3, |i| i + 1)..];
    &rest[..rest.find('/').unwrap_or(rest.len())]
}

#[test]
fn a_replica_verifies_the_primary_s_head_and_refuses_every_write_before_sending_it() {
    let db = ReplicatedDb::new();
    let primary = db.primary_ledger();
    let batch: Vec<_> = (0..4).map(|i| turn("alice", "s1", i, &format!("turn {i}"))).collect();
    primary.append(&batch).unwrap();
    primary.append(&[turn("bob", "s9", 0, "bob's turn")]).unwrap();
    db.wait_for_replay();

    let replica = db.replica_ledger();
    assert!(replica.is_replica() && !primary.is_replica());
    let (on_primary, on_replica) = (primary.verify().unwrap(), replica.verify().unwrap());
    assert_eq!(on_replica, on_primary);
    assert_eq!(replica.head().unwrap(), primary.head().unwrap());
    assert_eq!(replica.evidence(&ns("alice")).unwrap(), primary.evidence(&ns("alice")).unwrap());
    // A dry run of turns the replica already holds writes nothing, so it is answered.
    assert_eq!(replica.check_append(&batch).unwrap(), 0);

    let server = server_of(&db.replica_url);
    let refused_append = |e: AppendError| match e {
        AppendError::ReadOnlyReplica { server: url } => assert!(url.contains(server), "{url}"),
        other => panic!("expected the replica refusal, got {other}"),
    };
    let new = [turn("alice", "s2", 0, "only the primary may store this")];
    let err = replica.append(&new).unwrap_err();
    let message = err.to_string();
    assert!(message.contains(server) && message.contains("go to the primary"), "{message}");
    refused_append(err);
    refused_append(replica.check_append(&new).unwrap_err());
    for result in replica.append_group(&[&new, &batch]).unwrap() {
        refused_append(result.unwrap_err());
    }
    match replica.erase(&EraseTarget::Namespace(ns("alice"))).unwrap_err() {
        EraseError::ReadOnlyReplica { server: url } => assert!(url.contains(server), "{url}"),
        other => panic!("expected the replica refusal, got {other}"),
    }
    let dir = tempfile::tempdir().unwrap();
    let source = Ledger::open(&dir.path().join("ledger.sqlite")).unwrap();
    match replica.import_ledger(&source, &mut |_, _| {}).unwrap_err() {
        ImportError::ReadOnlyReplica { url } => assert!(url.contains(server), "{url}"),
        other => panic!("expected the replica refusal, got {other}"),
    }

    db.wait_for_replay();
    assert_eq!(primary.verify().unwrap(), on_primary);
    assert_eq!(replica.verify().unwrap(), on_primary);
}

#[test]
fn a_replica_without_the_ledger_says_to_create_it_on_the_primary() {
    let db = ReplicatedDb::new();
    let err = PgLedger::connect(&db.replica_url).unwrap_err();
    let message = err.to_string();
    assert!(matches!(err, ConnectError::ReplicaWithoutLedger { .. }), "{message}");
    assert!(message.contains(server_of(&db.replica_url)), "{message}");
    assert!(
        message.contains("the replica has no ledger yet; create it on the primary"),
        "{message}"
    );
}

#[test]
fn a_scrub_left_pending_on_the_primary_is_left_to_it_by_a_replica() {
    let db = ReplicatedDb::new();
    let primary = db.primary_ledger();
    primary.append(&[turn("alice", "s1", 0, "kept")]).unwrap();
    db.primary
        .raw()
        .execute("INSERT INTO ledger_meta (key, value) VALUES ('scrub_pending', '1 0')", &[])
        .unwrap();
    db.wait_for_replay();
    let replica = db.replica_ledger();
    assert_eq!(replica.verify().unwrap().turns, 1);
}

/// The standby replays the redaction and the table rewrite; the WAL it received keeps the text
/// until a restartpoint (`CHECKPOINT` on the standby) removes the old segments, as the README
/// tells operators.
#[test]
fn an_erasure_on_the_primary_is_replayed_by_its_standby_and_a_restartpoint_scrubs_its_wal() {
    let pair = pair_data();
    let db = ReplicatedDb::new();
    let primary = db.primary_ledger();
    let nonce = ContentSalt::random().unwrap();
    let secret = format!(
        "replica-erasure-probe {} my PIN is 4711",
        blake3::Hash::from_bytes(*nonce.as_bytes()).to_hex()
    );
    primary.append(&[turn("alice", "s1", 0, &secret), turn("alice", "s2", 0, "kept")]).unwrap();
    db.wait_for_replay();
    let replica = db.replica_ledger();
    assert_eq!(replica.evidence(&ns("alice")).unwrap().len(), 2);
    let standby = pair.join("replica");
    assert!(!files_holding(&standby, secret.as_bytes()).is_empty(), "the probe is on disk first");

    // The pair streams without a replication slot and keeps no old segment, so the erasure's
    // retention check passes on the primary.
    let receipt =
        primary.erase(&EraseTarget::Session(ns("alice"), SessionId::new("s1").unwrap())).unwrap();
    assert_eq!(receipt.erased.len(), 1);
    db.wait_for_replay();
    let report = replica.verify().unwrap();
    assert_eq!((report.turns, report.erased_turns, report.redactions), (1, 1, 1));
    assert_eq!(report, primary.verify().unwrap());
    let texts: Vec<String> =
        replica.evidence(&ns("alice")).unwrap().into_iter().map(|e| e.turn.text).collect();
    assert_eq!(texts, ["kept"]);

    let on_primary = files_holding(&pair.join("primary"), secret.as_bytes());
    assert!(on_primary.is_empty(), "the erased text is still in {on_primary:?}");
    let wal = standby.join("pg_wal");
    let on_standby = files_holding(&standby, secret.as_bytes());
    assert!(on_standby.iter().all(|f| f.starts_with(&wal)), "outside pg_wal: {on_standby:?}");
    postgres::Client::connect(&db.replica_url, postgres::NoTls)
        .unwrap()
        .batch_execute("CHECKPOINT")
        .unwrap();
    let on_standby = files_holding(&standby, secret.as_bytes());
    assert!(on_standby.is_empty(), "after a restartpoint the text is still in {on_standby:?}");
}
