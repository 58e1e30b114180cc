//! A ledger written by format version 1 (committed fixture, made by the version-1 code): refused
//! with what to do, left untouched, and migrated on request.

use std::path::PathBuf;

use evicortex_core::Namespace;
use evicortex_ledger::{
    EvidenceLedger, Ledger, LedgerPosition, MigrateError, OpenError, OpenMode, VerifyError,
    canonical_json,
};

use crate::{
    fixture::{raw, turn},
    store_bytes::{all_bytes, contains},
};

/// Three live and three erased turns, a record and a session redaction.
const FIXTURE: &[u8] = include_bytes!("../fixtures/ledger-v1.sqlite");

fn copy_of_fixture() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.sqlite");
    fs_err::write(&path, FIXTURE).unwrap();
    (dir, path)
}

/// Format version 1's unsalted content digest.
fn v1_content_digest(speaker: Option<&str>, text: &str, meta: &str) -> Vec<u8> {
    let str_ = |bytes: &mut Vec<u8>, s: &str| {
        bytes.extend_from_slice(&(s.len() as u64).to_le_bytes());
        bytes.extend_from_slice(s.as_bytes());
    };
    let mut bytes = b"EVCX".to_vec();
    bytes.extend_from_slice(&1u16.to_le_bytes());
    bytes.push(3);
    match speaker {
        Some(s) => {
            bytes.push(1);
            str_(&mut bytes, s);
        }
        None => bytes.push(0),
    }
    str_(&mut bytes, text);
    str_(&mut bytes, meta);
    blake3::hash(&bytes).as_bytes().to_vec()
}

#[test]
fn a_version_1_ledger_is_refused_with_what_to_do_and_left_untouched() {
    let (dir, path) = copy_of_fixture();
    for mode in [OpenMode::ReadWrite, OpenMode::Inspect] {
        let err = Ledger::open_with(&path, mode).unwrap_err();
        assert!(
            matches!(&err, OpenError::UnsupportedFormat { found, supported: 3, .. } if found == "1"),
            "{mode:?}: {err:?}"
        );
        let message = err.to_string();
        assert!(
            message.contains(&format!("evicortex migrate --store {}", dir.path().display())),
            "{message}"
        );
        assert!(fs_err::read(&path).unwrap() == FIXTURE, "{mode:?} changed the file");
    }
}

/// The fixture shows the weakness version 2 removes: an erased turn's kept digest confirms its
/// text. After migration every turn reads back the same, verify passes, and no version-1
/// content digest is left in any file.
#[test]
fn migrating_keeps_every_turn_and_leaves_no_guessable_digest() {
    let (dir, path) = copy_of_fixture();
    let conn = raw(&path);
    let v1_head: String = conn
        .query_row("SELECT value FROM ledger_meta WHERE key = 'chain_head'", [], |r| r.get(0))
        .unwrap();
    let kept: Vec<Vec<u8>> = conn
        .prepare("SELECT content_digest FROM records WHERE erased_by IS NOT NULL ORDER BY seq")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    drop(conn);
    assert_eq!(kept.len(), 3);
    assert_eq!(
        kept[0],
        v1_content_digest(
            Some("Alice"),
            "My locker code is ZEBRAQUOKKA4711.",
            r#"{"tags":["private"]}"#
        ),
        "version 1 confirms a guessed erased text"
    );

    let report = Ledger::migrate(&path).unwrap();
    assert_eq!(
        (report.from_version, report.to_version, report.records, report.erased_turns),
        (1, 3, 8, 3)
    );
    assert_eq!(report.previous_chain_head.map(|h| h.to_hex()), Some(v1_head.clone()));

    let ledger = Ledger::open(&path).unwrap();
    let verified = ledger.verify().unwrap();
    assert_eq!(
        (verified.records, verified.turns, verified.erased_turns, verified.redactions),
        (8, 3, 3, 2)
    );
    assert_eq!(verified.chain_head, report.chain_head);
    let alice = ledger.evidence(&Namespace::new("alice").unwrap()).unwrap();
    let read: Vec<_> = alice
        .iter()
        .map(|e| {
            (
                e.id.raw(),
                e.turn.session.as_str().to_owned(),
                e.turn.speaker.clone(),
                e.turn.text.clone(),
                e.turn.time.to_rfc3339(),
                canonical_json(&serde_json::Value::Object(e.turn.meta.clone())),
            )
        })
        .collect();
    assert_eq!(
        read,
        [
            (
                1,
                "s1".to_owned(),
                Some("Alice".to_owned()),
                "I adopted a dog called Biscuit.".to_owned(),
                "2024-05-02T10:00:00+01:00".to_owned(),
                r#"{"n":1,"source":"fixture"}"#.to_owned()
            ),
            (
                2,
                "s1".to_owned(),
                None,
                "Biscuit is a lovely name.".to_owned(),
                "2024-05-02T10:00:05.250+01:00".to_owned(),
                "{}".to_owned()
            ),
            // Ledger position 8; alice's fifth record once numbered per namespace.
            (
                5,
                "s2".to_owned(),
                None,
                "Session two begins.".to_owned(),
                "2024-07-01T00:00:00Z".to_owned(),
                "{}".to_owned()
            ),
        ]
    );
    assert!(ledger.evidence(&Namespace::new("bob").unwrap()).unwrap().is_empty());
    for (file, bytes) in all_bytes(dir.path()) {
        for digest in &kept {
            assert!(!contains(&bytes, digest), "a version-1 digest is left in {}", file.display());
        }
    }
    let conn = raw(&path);
    let recorded: String = conn
        .query_row(
            "SELECT value FROM ledger_meta WHERE key = 'migrated_from_v1_chain_head'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(recorded, v1_head);
    drop(conn);

    // The migrated ledger takes appends; migrating again has nothing to do.
    ledger.append(&[turn("alice", "s2", 1, "After the migration.")]).unwrap();
    ledger.verify().unwrap();
    drop(ledger);
    let again = Ledger::migrate(&path).unwrap();
    assert_eq!((again.from_version, again.records, again.previous_chain_head), (3, 0, None));
}

#[test]
fn a_version_1_ledger_that_fails_verification_is_not_migrated() {
    let (_dir, path) = copy_of_fixture();
    raw(&path)
        .execute("UPDATE records SET text = 'Biscuit is a dreadful name.' WHERE seq = 2", [])
        .unwrap();
    let before = fs_err::read(&path).unwrap();
    let err = Ledger::migrate(&path).unwrap_err();
    assert!(
        matches!(&err, MigrateError::Unverified { source: VerifyError::BadRecord { position, .. }, .. }
            if *position == LedgerPosition::from_raw(2)),
        "{err:?}"
    );
    assert!(fs_err::read(&path).unwrap() == before, "the refused migration changed the file");
    let columns: i64 = raw(&path)
        .query_row(
            "SELECT count(*) FROM pragma_table_info('records') WHERE name = 'salt'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(columns, 0, "the schema change was rolled back");
}
