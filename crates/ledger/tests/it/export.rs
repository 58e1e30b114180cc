use evicortex_core::{Namespace, SessionId};
use evicortex_ledger::{
    EraseTarget, EvidenceLedger, StoredRecordExport, StoredRecordKind, VerifyError,
};

use crate::fixture::{Store, raw, turn};

fn exported(store: &Store) -> Result<Vec<StoredRecordExport>, VerifyError> {
    let mut out = Vec::new();
    store.ledger.for_each_stored_record(|r| {
        out.push(r);
        Ok::<(), VerifyError>(())
    })?;
    Ok(out)
}

/// Every record comes out in position order with the columns the chain covers, and the report
/// is verify's.
#[test]
fn every_record_is_exported_as_stored_with_verifys_report() {
    let store = Store::new();
    let a = Namespace::new("a").unwrap();
    store
        .ledger
        .append(&[turn("a", "s", 0, "secret"), turn("a", "t", 1, "kept"), turn("b", "s", 0, "b")])
        .unwrap();
    store.ledger.erase(&EraseTarget::Session(a.clone(), SessionId::new("s").unwrap())).unwrap();
    let mut records = Vec::new();
    let report = store
        .ledger
        .for_each_stored_record(|r| {
            records.push(r);
            Ok::<(), VerifyError>(())
        })
        .unwrap();
    assert_eq!(report, store.ledger.verify().unwrap());
    let positions: Vec<u64> = records.iter().map(|r| r.position.raw()).collect();
    assert_eq!(positions, [1, 2, 3, 4]);
    let erased = &records[0];
    assert_eq!((erased.kind, erased.erased_by.map(|p| p.raw())), (StoredRecordKind::Turn, Some(4)));
    assert!(erased.text.is_none() && erased.salt.is_none() && erased.content_digest.is_some());
    let live = &records[1];
    assert_eq!(live.text.as_deref(), Some("kept"));
    assert!(live.salt.is_some() && live.meta_json.is_some());
    assert_eq!(live.digest, store.ledger.evidence(&a).unwrap()[0].digest);
    let redaction = &records[3];
    assert_eq!(redaction.kind, StoredRecordKind::Redaction);
    assert_eq!((redaction.namespace.as_str(), redaction.number.raw()), ("a", 3));
    assert_eq!(
        redaction.erased.as_ref().map(|e| e.iter().map(|p| p.raw()).collect::<Vec<_>>()),
        Some(vec![1])
    );
    assert_eq!(records[3].chain, report.chain_head);
}

/// A record that does not match its digest is named, and no record from it on is exported.
#[test]
fn a_tampered_record_is_named_and_not_exported() {
    let store = Store::new();
    store
        .ledger
        .append(&[turn("a", "s", 0, "one"), turn("a", "s", 1, "two"), turn("a", "s", 2, "three")])
        .unwrap();
    raw(&store.path()).execute("UPDATE records SET text = 'forged' WHERE seq = 2", []).unwrap();
    let mut seen = Vec::new();
    let err = store
        .ledger
        .for_each_stored_record(|r| {
            seen.push(r.position.raw());
            Ok::<(), VerifyError>(())
        })
        .unwrap_err();
    assert!(
        matches!(&err, VerifyError::BadRecord { position, detail }
            if position.raw() == 2 && detail.contains("digest mismatch")),
        "{err:?}"
    );
    assert_eq!(seen, [1]);
    assert!(exported(&store).is_err());
}
