use evicortex_ledger::{
    EraseTarget, EvidenceLedger, Ledger, LedgerPosition, OpenMode, VerifyError,
};
use proptest::prelude::*;

use crate::{fixture::raw, round_trip::arb_batches};

/// One way of editing a stored row behind the ledger's back.
#[derive(Debug, Clone)]
enum Edit {
    FlipTextByte(usize),
    AppendToText,
    Namespace,
    Session,
    TurnIndex,
    Role,
    Speaker,
    EventTime,
    Offset,
    IngestTime,
    Meta,
    FlipDigestBit(usize),
    FlipChainBit(usize),
    Kind,
    Renumber,
    ClearErasedBy,
    FlipSaltBit(usize),
}

fn arb_edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        any::<usize>().prop_map(Edit::FlipTextByte),
        Just(Edit::AppendToText),
        Just(Edit::Namespace),
        Just(Edit::Session),
        Just(Edit::TurnIndex),
        Just(Edit::Role),
        Just(Edit::Speaker),
        Just(Edit::EventTime),
        Just(Edit::Offset),
        Just(Edit::IngestTime),
        Just(Edit::Meta),
        (0usize..256).prop_map(Edit::FlipDigestBit),
        (0usize..256).prop_map(Edit::FlipChainBit),
        Just(Edit::Kind),
        Just(Edit::Renumber),
        Just(Edit::ClearErasedBy),
        (0usize..256).prop_map(Edit::FlipSaltBit),
    ]
}

/// Applies `edit` to record `seq`; returns false when the edit does not apply to that record
/// (e.g. a text edit on a redaction), in which case the case is skipped.
fn apply(conn: &rusqlite::Connection, seq: i64, edit: &Edit) -> bool {
    let kind: i64 =
        conn.query_row("SELECT kind FROM records WHERE seq = ?1", [seq], |r| r.get(0)).unwrap();
    let erased: bool = conn
        .query_row("SELECT erased_by IS NOT NULL FROM records WHERE seq = ?1", [seq], |r| r.get(0))
        .unwrap();
    let live_turn = kind == 1 && !erased;
    let exec = |sql: &str| conn.execute(sql, [seq]).unwrap() == 1;
    match edit {
        Edit::FlipTextByte(at) if live_turn => {
            let text: Vec<u8> = conn
                .query_row("SELECT CAST(text AS BLOB) FROM records WHERE seq = ?1", [seq], |r| {
                    r.get(0)
                })
                .unwrap();
            if text.is_empty() {
                return false;
            }
            let mut bytes = text;
            let i = at % bytes.len();
            bytes[i] ^= 0x01;
            conn.execute(
                "UPDATE records SET text = CAST(?1 AS TEXT) WHERE seq = ?2",
                rusqlite::params![bytes, seq],
            )
            .unwrap()
                == 1
        }
        Edit::AppendToText if live_turn => {
            exec("UPDATE records SET text = text || ' ' WHERE seq = ?1")
        }
        Edit::Namespace => exec("UPDATE records SET namespace = 'zz-tampered' WHERE seq = ?1"),
        Edit::Session if kind == 1 => {
            exec("UPDATE records SET session = session || '~' WHERE seq = ?1")
        }
        Edit::TurnIndex if kind == 1 => {
            exec("UPDATE records SET turn = turn + 1000000 WHERE seq = ?1")
        }
        Edit::Role if live_turn => exec(
            "UPDATE records SET role = CASE role WHEN 'user' THEN 'tool' ELSE 'user' END WHERE seq = ?1",
        ),
        Edit::Speaker if live_turn => exec(
            "UPDATE records SET speaker = CASE WHEN speaker IS NULL THEN 'Mallory' ELSE NULL END WHERE seq = ?1",
        ),
        Edit::EventTime if live_turn => {
            exec("UPDATE records SET event_utc_us = event_utc_us + 1 WHERE seq = ?1")
        }
        Edit::Offset if live_turn => exec(
            "UPDATE records SET event_offset_s = CASE WHEN event_offset_s > 0 THEN event_offset_s - 60 ELSE event_offset_s + 60 END WHERE seq = ?1",
        ),
        Edit::IngestTime => {
            exec("UPDATE records SET ingest_utc_us = ingest_utc_us - 1 WHERE seq = ?1")
        }
        Edit::Meta if live_turn => exec(
            "UPDATE records SET meta = CASE meta WHEN '{}' THEN '{\"x\":1}' ELSE '{}' END WHERE seq = ?1",
        ),
        Edit::FlipDigestBit(bit) | Edit::FlipChainBit(bit) => {
            let column = if matches!(edit, Edit::FlipDigestBit(_)) { "digest" } else { "chain" };
            let mut bytes: Vec<u8> = conn
                .query_row(&format!("SELECT {column} FROM records WHERE seq = ?1"), [seq], |r| {
                    r.get(0)
                })
                .unwrap();
            bytes[bit / 8] ^= 1 << (bit % 8);
            conn.execute(
                &format!("UPDATE records SET {column} = ?1 WHERE seq = ?2"),
                rusqlite::params![bytes, seq],
            )
            .unwrap()
                == 1
        }
        Edit::Kind => exec("UPDATE records SET kind = 3 WHERE seq = ?1"),
        Edit::Renumber => exec("UPDATE records SET seq = seq + 1000000 WHERE seq = ?1"),
        Edit::ClearErasedBy if erased => exec("UPDATE records SET erased_by = NULL WHERE seq = ?1"),
        Edit::FlipSaltBit(bit) if live_turn => {
            let mut salt: Vec<u8> = conn
                .query_row("SELECT salt FROM records WHERE seq = ?1", [seq], |r| r.get(0))
                .unwrap();
            salt[bit / 8] ^= 1 << (bit % 8);
            conn.execute(
                "UPDATE records SET salt = ?1 WHERE seq = ?2",
                rusqlite::params![salt, seq],
            )
            .unwrap()
                == 1
        }
        _ => false,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// Whatever column of whatever record is edited, verify fails and names that record.
    #[test]
    fn verify_names_the_edited_record(
        batches in arb_batches(3, 8),
        erase_session in any::<bool>(),
        pick in any::<prop::sample::Index>(),
        edit in arb_edit(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.sqlite");
        let ledger = Ledger::open(&path).unwrap();
        for batch in &batches {
            ledger.append(batch).unwrap();
        }
        if erase_session {
            let t = &batches[0][0];
            ledger.erase(&EraseTarget::Session(t.namespace.clone(), t.session.clone())).unwrap();
        }
        let n = ledger.verify().unwrap().records;
        drop(ledger);
        let seq = pick.index(n as usize) as i64 + 1;
        let conn = raw(&path);
        prop_assume!(apply(&conn, seq, &edit));
        drop(conn);
        let inspected = Ledger::open_with(&path, OpenMode::Inspect).unwrap();
        let err = inspected.verify().unwrap_err();
        match err {
            VerifyError::BadRecord { position, .. } => prop_assert_eq!(position, LedgerPosition::from_raw(seq as u64), "{:?}", edit),
            other => prop_assert!(false, "expected a bad record #{seq} after {edit:?}, got {other}"),
        }
    }
}

/// Every column a record kind does not use must be NULL, since its digest does not cover it: a
/// value written into one is an edit that verify must find. Found by fuzzing
/// (fuzz/regressions/ledger_records: `event_offset_s` of a redaction set to -2 verified).
#[test]
fn verify_refuses_a_value_in_a_column_the_record_kind_does_not_use() {
    use crate::fixture::turn;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.sqlite");
    {
        let ledger = Ledger::open(&path).unwrap();
        let turns =
            [turn("a", "s1", 0, "kept"), turn("a", "s2", 0, "gone"), turn("a", "s2", 1, "too")];
        ledger.append(&turns).unwrap();
        let (namespace, session) = (turns[1].namespace.clone(), turns[1].session.clone());
        ledger.erase(&EraseTarget::Session(namespace, session)).unwrap();
        ledger.verify().unwrap();
    }
    assert!(!dir.path().join("ledger.sqlite-wal").exists(), "closing checkpoints the WAL");
    let (live, erased, redaction) = (1, 2, 4);
    let kind: i64 =
        raw(&path).query_row("SELECT kind FROM records WHERE seq = 4", [], |r| r.get(0)).unwrap();
    assert_eq!(kind, 2, "record 4 is the redaction");
    let unused: &[(i64, &str, &str)] = &[
        (live, "target_record", "1"),
        (live, "erased_seqs", "x'0100000000000000'"),
        (live, "content_digest", "zeroblob(32)"),
        (erased, "text", "'erased'"),
        (erased, "speaker", "'Mallory'"),
        (erased, "meta", "'{}'"),
        (erased, "salt", "zeroblob(32)"),
        (erased, "target_record", "1"),
        (erased, "erased_seqs", "x'0100000000000000'"),
        (redaction, "turn", "7"),
        (redaction, "role", "'user'"),
        (redaction, "speaker", "'Mallory'"),
        (redaction, "text", "''"),
        (redaction, "event_utc_us", "0"),
        (redaction, "event_offset_s", "-2"),
        (redaction, "meta", "'{}'"),
        (redaction, "erased_by", "5"),
        (redaction, "content_digest", "zeroblob(32)"),
        (redaction, "salt", "zeroblob(32)"),
    ];
    let original = fs_err::read(&path).unwrap();
    for &(seq, column, value) in unused {
        fs_err::write(&path, &original).unwrap();
        let conn = raw(&path);
        let sql = format!("UPDATE records SET {column} = {value} WHERE seq = ?1");
        assert_eq!(conn.execute(&sql, [seq]).unwrap(), 1, "{sql}");
        drop(conn);
        let inspected = Ledger::open_with(&path, OpenMode::Inspect).unwrap();
        match inspected.verify() {
            Err(VerifyError::BadRecord { position, .. }) => {
                assert_eq!(
                    position,
                    LedgerPosition::from_raw(seq as u64),
                    "{column} of record {seq}"
                )
            }
            other => {
                panic!("{column} = {value} in record {seq}: expected a bad record, got {other:?}")
            }
        }
    }
}
