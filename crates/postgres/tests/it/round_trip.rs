//! What goes in comes back, with the digests the embedded ledger computes for the same turns.

use evicortex_core::{EvidenceDigest, SessionId};
use evicortex_ledger::{
    AppendStatus, ContentSalt, EraseTarget, EvidenceLedger, Ledger, turn_digest,
};

use crate::support::{TestDb, ns, turn};

fn turns() -> Vec<evicortex_core::Turn> {
    vec![
        turn("alice", "s1", 0, "I moved to Lisbon in May."),
        turn("alice", "s1", 1, "Nice! How is the weather?"),
        turn("bob", "s1", 0, "Bob's first turn, with unicode: é ✓ 日本"),
        turn("alice", "s2", 3, "A second session."),
        turn("bob", "s9", 7, "  leading and trailing spaces kept  "),
    ]
}

#[test]
fn round_trip_matches_the_embedded_ledger() {
    let db = TestDb::new();
    let pg = db.ledger();
    let dir = tempfile::tempdir().unwrap();
    let sqlite = Ledger::open(&dir.path().join("ledger.sqlite")).unwrap();

    let pg_receipt = pg.append(&turns()).unwrap();
    let embedded_receipt = sqlite.append(&turns()).unwrap();
    assert_eq!(pg_receipt.head, embedded_receipt.head);
    for (p, e) in pg_receipt.outcomes.iter().zip(&embedded_receipt.outcomes) {
        assert_eq!((p.id, p.status), (e.id, e.status), "numbers within each namespace");
        assert_eq!(p.status, AppendStatus::Appended);
    }

    for name in ["alice", "bob"] {
        let from_pg = pg.evidence(&ns(name)).unwrap();
        let embedded = sqlite.evidence(&ns(name)).unwrap();
        let pg_turns: Vec<_> = from_pg.iter().map(|e| (e.id, &e.turn)).collect();
        let embedded_turns: Vec<_> = embedded.iter().map(|e| (e.id, &e.turn)).collect();
        assert_eq!(pg_turns, embedded_turns, "namespace {name}");
        assert_eq!(
            pg.namespace_head(&ns(name)).unwrap(),
            sqlite.namespace_head(&ns(name)).unwrap()
        );
    }
    assert_eq!(pg.namespaces().unwrap(), sqlite.namespaces().unwrap());
    assert_eq!(pg.head().unwrap(), sqlite.head().unwrap());

    // Each store's digests are the ledger crate's digest of the turn with that store's salt and
    // ingest time: the same function, the same bytes.
    let mut raw = db.raw();
    for row in
        raw.query("SELECT seq, salt, ingest_utc_us, digest FROM records ORDER BY seq", &[]).unwrap()
    {
        let seq: i64 = row.get(0);
        let salt = ContentSalt::from_bytes(row.get::<_, Vec<u8>>(1).try_into().unwrap());
        let stored = EvidenceDigest::from_bytes(row.get::<_, Vec<u8>>(3).try_into().unwrap());
        let t = &turns()[seq as usize - 1];
        assert_eq!(turn_digest(t, row.get(2), &salt), stored, "postgres record at {seq}");
        let served = pg.evidence(&t.namespace).unwrap();
        assert!(served.iter().any(|e| e.digest == stored && &e.turn == t));
    }
    let conn = rusqlite::Connection::open(dir.path().join("ledger.sqlite")).unwrap();
    let mut stmt = conn.prepare("SELECT seq, salt, ingest_utc_us, digest FROM records").unwrap();
    let rows = stmt
        .query_map([], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, Vec<u8>>(1)?,
                r.get::<_, i64>(2)?,
                r.get::<_, Vec<u8>>(3)?,
            ))
        })
        .unwrap();
    for row in rows {
        let (seq, salt, ingest, digest) = row.unwrap();
        let salt = ContentSalt::from_bytes(salt.try_into().unwrap());
        assert_eq!(
            turn_digest(&turns()[seq as usize - 1], ingest, &salt).as_bytes().as_slice(),
            digest.as_slice(),
            "embedded record at {seq}"
        );
    }
}

/// Given the embedded ledger's salts and times (copied row by row, redactions included), the
/// PostgreSQL ledger holds the embedded ledger's exact digests and chain, and verifies them: both
/// compute every digest and link alike.
#[test]
fn embedded_salts_and_times_give_the_embedded_chain() {
    let db = TestDb::new();
    let pg = db.ledger();
    let dir = tempfile::tempdir().unwrap();
    let sqlite = Ledger::open(&dir.path().join("ledger.sqlite")).unwrap();
    let erase = EraseTarget::Session(ns("alice"), SessionId::new("s1").unwrap());
    pg.append(&turns()).unwrap();
    sqlite.append(&turns()).unwrap();
    pg.erase(&erase).unwrap();
    sqlite.erase(&erase).unwrap();
    pg.append(&[turn("bob", "s10", 1, "after the erasure")]).unwrap();
    sqlite.append(&[turn("bob", "s10", 1, "after the erasure")]).unwrap();

    let conn = rusqlite::Connection::open(dir.path().join("ledger.sqlite")).unwrap();
    let mut stmt = conn
        .prepare(
            "SELECT seq, salt, ingest_utc_us, content_digest, digest, chain FROM records \
             ORDER BY seq",
        )
        .unwrap();
    type Row = (i64, Option<Vec<u8>>, i64, Option<Vec<u8>>, Vec<u8>, Vec<u8>);
    let rows: Vec<Row> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let mut raw = db.raw();
    let mut tx = raw.transaction().unwrap();
    for (seq, salt, ingest, content, digest, chain) in &rows {
        let changed = tx
            .execute(
                "UPDATE records SET salt = $2, ingest_utc_us = $3, content_digest = $4, \
                 digest = $5, chain = $6 WHERE seq = $1",
                &[seq, salt, ingest, content, digest, chain],
            )
            .unwrap();
        assert_eq!(changed, 1, "the same positions in both ledgers");
    }
    let chain_head: String = conn
        .query_row("SELECT value FROM ledger_meta WHERE key = 'chain_head'", [], |r| r.get(0))
        .unwrap();
    tx.execute("UPDATE ledger_meta SET value = $1 WHERE key = 'chain_head'", &[&chain_head])
        .unwrap();
    tx.commit().unwrap();

    let embedded_report = sqlite.verify().unwrap();
    let pg_report = pg.verify().unwrap();
    assert_eq!(pg_report, embedded_report);
    for name in ["alice", "bob"] {
        assert_eq!(pg.evidence(&ns(name)).unwrap(), sqlite.evidence(&ns(name)).unwrap());
    }
}
