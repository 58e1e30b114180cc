use evicortex_core::{Namespace, TurnId};
use evicortex_ledger::{
    AppendError, ContentSalt, EraseError, EraseTarget, EvidenceLedger, Ledger, LedgerPosition,
    ReadError, ScanEvidence, turn_digest,
};

use crate::fixture::{Store, raw, turn};

fn stored() -> Store {
    let store = Store::new();
    store
        .ledger
        .append(&[
            turn("a", "s", 0, "He is chipped."),
            turn("a", "s", 1, "Booster in May."),
            turn("a", "s", 2, "Last words."),
        ])
        .unwrap();
    store
}

fn ns() -> Namespace {
    Namespace::new("a").unwrap()
}

/// S3: a record altered behind the ledger's back is never served; the error names it.
#[test]
fn a_record_altered_behind_the_ledgers_back_is_never_served() {
    let store = stored();
    raw(&store.path())
        .execute("UPDATE records SET text = 'He is NOT chipped.' WHERE seq = 1", [])
        .unwrap();
    let err = store.ledger.evidence(&ns()).unwrap_err();
    assert!(
        matches!(&err, ReadError::Corrupted { position, detail }
            if *position == LedgerPosition::from_raw(1) && detail.contains("digest mismatch")),
        "{err:?}"
    );
    let err = store
        .ledger
        .for_each_evidence_since(None, None, |_, _| Ok::<(), ReadError>(()))
        .unwrap_err();
    assert!(matches!(err, ReadError::Corrupted { .. }), "{err:?}");
}

/// S3: rewriting a record's digest along with its text does not help: its chain link to the
/// record before it no longer holds.
#[test]
fn a_record_rewritten_with_a_matching_digest_breaks_its_chain_link() {
    let store = stored();
    let conn = raw(&store.path());
    let (salt, ingest): (Vec<u8>, i64) = conn
        .query_row("SELECT salt, ingest_utc_us FROM records WHERE seq = 2", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    let forged = turn("a", "s", 1, "Booster in June.");
    let digest = turn_digest(&forged, ingest, &ContentSalt::from_bytes(salt.try_into().unwrap()));
    conn.execute(
        "UPDATE records SET text = ?1, digest = ?2 WHERE seq = 2",
        rusqlite::params![forged.text, digest.as_bytes().as_slice()],
    )
    .unwrap();
    drop(conn);
    let err = store.ledger.evidence(&ns()).unwrap_err();
    assert!(
        matches!(&err, ReadError::Corrupted { position, detail }
            if *position == LedgerPosition::from_raw(2) && detail.contains("chain hash mismatch")),
        "{err:?}"
    );
}

/// S3: an append builds on the last record and on the stored turns it answers as present;
/// both are checked first.
#[test]
fn an_append_on_a_tampered_ledger_is_refused() {
    let store = stored();
    raw(&store.path()).execute("UPDATE records SET text = 'Altered.' WHERE seq = 3", []).unwrap();
    // The cheap open check (head against the last record's chain hash) still passes.
    let path = store.path();
    drop(store.ledger);
    let ledger = Ledger::open(&path).unwrap();
    let err = ledger.append(&[turn("a", "s", 3, "more")]).unwrap_err();
    assert!(
        matches!(&err, AppendError::Corrupted { position, .. } if *position == LedgerPosition::from_raw(3)),
        "{err:?}"
    );
    assert_eq!(ledger.stats().unwrap().records, 3, "nothing was appended");

    // A stored turn altered into what is being re-ingested is not "already present".
    raw(&path).execute("UPDATE records SET text = 'Last words.' WHERE seq = 3", []).unwrap();
    raw(&path).execute("UPDATE records SET text = 'Booster in June.' WHERE seq = 2", []).unwrap();
    let err = ledger.append(&[turn("a", "s", 1, "Booster in June.")]).unwrap_err();
    assert!(
        matches!(&err, AppendError::Corrupted { position, .. } if *position == LedgerPosition::from_raw(2)),
        "{err:?}"
    );
    let err = ledger.check_append(&[turn("a", "s", 1, "Booster in June.")]).unwrap_err();
    assert!(matches!(err, AppendError::Corrupted { .. }), "{err:?}");
    // An erasure would list the altered record's digest as erased content: refused too.
    let err = ledger.erase(&EraseTarget::Record(ns(), TurnId::from_raw(2))).unwrap_err();
    assert!(
        matches!(&err, EraseError::Corrupted { position, .. } if *position == LedgerPosition::from_raw(2)),
        "{err:?}"
    );
}
