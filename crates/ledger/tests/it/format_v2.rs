//! S2: a version-2 ledger (ids were ledger positions) is refused until migrated; migrating
//! numbers each namespace's records from 1 in ledger order and keeps the chain.

use evicortex_core::{Namespace, TurnId};
use evicortex_ledger::{
    EraseTarget, EvidenceLedger, Ledger, LedgerPosition, OpenError, VerifyError,
};

use crate::fixture::{Store, raw, turn};

/// Two tenants interleaved, one erasure: what the migration must number.
fn interleaved() -> Store {
    let store = Store::new();
    let ledger = &store.ledger;
    ledger.append(&[turn("a", "s", 0, "a one"), turn("b", "s", 0, "b one")]).unwrap();
    ledger.append(&[turn("b", "s", 1, "b two"), turn("a", "s", 1, "a two")]).unwrap();
    ledger.erase(&EraseTarget::Record(Namespace::new("b").unwrap(), TurnId::from_raw(1))).unwrap();
    ledger.append(&[turn("a", "s", 2, "a three")]).unwrap();
    store
}

fn numbers(ledger: &Ledger, ns: &str) -> Vec<u64> {
    ledger.evidence(&Namespace::new(ns).unwrap()).unwrap().iter().map(|e| e.id.raw()).collect()
}

#[test]
fn a_version_2_ledger_is_refused_then_migrated_to_numbers_per_namespace() {
    let store = interleaved();
    let path = store.path();
    let (a, b) = (numbers(&store.ledger, "a"), numbers(&store.ledger, "b"));
    assert_eq!((a.as_slice(), b.as_slice()), ([1, 2, 3].as_slice(), [2].as_slice()));
    let chain_head = store.ledger.verify().unwrap().chain_head;
    drop(store.ledger);
    // Back to version 2 as it was written: no number column.
    raw(&path)
        .execute_batch(
            "DROP INDEX records_number; ALTER TABLE records DROP COLUMN number; \
             UPDATE ledger_meta SET value = '2' WHERE key = 'format_version';",
        )
        .unwrap();
    let err = Ledger::open(&path).unwrap_err();
    assert!(
        matches!(&err, OpenError::UnsupportedFormat { found, supported: 3, .. } if found == "2"),
        "{err:?}"
    );

    let report = Ledger::migrate(&path).unwrap();
    assert_eq!((report.from_version, report.to_version, report.records), (2, 3, 6));
    assert_eq!(report.chain_head, chain_head, "numbers are beside the chain, not in it");
    let ledger = Ledger::open(&path).unwrap();
    assert_eq!(ledger.verify().unwrap().chain_head, chain_head);
    assert_eq!((numbers(&ledger, "a"), numbers(&ledger, "b")), (a, b));
    let next = ledger.append(&[turn("b", "s", 2, "b three")]).unwrap();
    assert_eq!(next.outcomes[0].id, TurnId::from_raw(4), "after b's two turns and its redaction");
    assert_eq!(Ledger::migrate(&path).unwrap().from_version, 3, "a second run does nothing");
}

#[test]
fn verify_refuses_a_renumbered_record() {
    let store = interleaved();
    let path = store.path();
    raw(&path).execute("UPDATE records SET number = 7 WHERE seq = 5", []).unwrap();
    let err = store.ledger.verify().unwrap_err();
    assert!(
        matches!(&err, VerifyError::BadRecord { position, detail }
            if *position == LedgerPosition::from_raw(5) && detail.contains("record number 7")),
        "{err:?}"
    );
}
