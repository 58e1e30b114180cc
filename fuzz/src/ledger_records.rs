//! The ledger's record decoding (`RawRecord::from_row` and `decode`, behind every read and
//! `verify`): a real ledger file (turns in two namespaces, an erasure, its redaction) whose
//! record and metadata columns are overwritten with fuzzed values of any SQLite type, as someone
//! with write access to the file could. Properties: no panic on open, verify or the checked
//! reads; a changed record never verifies; when verify passes, every checked read succeeds.

use std::path::Path;
use std::sync::OnceLock;

use evicortex::{IngestOptions, parse_jsonl};
use evicortex_ledger::{
    EraseTarget, EvidenceLedger, Ledger, OpenMode, storage::RECORD_COLUMN_NAMES,
};
use rusqlite::types::Value;

use crate::edits::{edits, sqlite_value};

/// The bytes of a closed ledger file, built once (`postgres_records` reads its rows).
pub(crate) fn template() -> &'static [u8] {
    static TEMPLATE: OnceLock<Vec<u8>> = OnceLock::new();
    TEMPLATE.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.sqlite");
        let lines = [
            r#"{"namespace":"a","session":"s1","turn":0,"role":"user","text":"I moved to Lisbon.","time":"2024-05-02T10:00:00+01:00"}"#,
            r#"{"namespace":"a","session":"s1","turn":1,"role":"assistant","speaker":"bot","text":"Nice!","time":"2024-05-02T10:00:05+01:00","meta":{"k":[1,2.5,null]}}"#,
            r#"{"namespace":"a","session":"s2","turn":0,"role":"user","text":"Erase me.","time":"2024-05-03T10:00:00Z"}"#,
            r#"{"namespace":"b","session":"s1","turn":0,"role":"tool","text":"42","time":"2024-05-04T10:00:00-07:30"}"#,
        ];
        let turns =
            parse_jsonl("seed", lines.join("\n").as_bytes(), &IngestOptions::default()).unwrap();
        {
            let ledger = Ledger::open(&path).unwrap();
            ledger.append(&turns).unwrap();
            let namespace = turns[2].namespace.clone();
            ledger.erase(&EraseTarget::Session(namespace, turns[2].session.clone())).unwrap();
        }
        fs_err::read(&path).unwrap()
    })
}

fn dump(conn: &rusqlite::Connection) -> Vec<Vec<Value>> {
    let mut statement = conn.prepare("SELECT * FROM records ORDER BY seq").unwrap();
    let n = statement.column_count();
    statement
        .query_map([], |row| (0..n).map(|i| row.get::<_, Value>(i)).collect())
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// Applies edits read from `data`: per edit a row, a column, a type and a value.
fn edit(path: &Path, data: &[u8]) -> bool {
    let conn = rusqlite::Connection::open(path).unwrap();
    let before = dump(&conn);
    for ([row, column, kind, _], raw) in edits(data, 4, 48) {
        let value = sqlite_value(kind, raw, f64::from(i32::from(column) - i32::from(row)));
        if column as usize % (RECORD_COLUMN_NAMES.len() + 1) == RECORD_COLUMN_NAMES.len() {
            // The metadata table: the head, the format, the salt.
            let _ = conn.execute(
                "UPDATE ledger_meta SET value = ?1 WHERE rowid = (SELECT rowid FROM ledger_meta \
                 ORDER BY key LIMIT 1 OFFSET ?2)",
                rusqlite::params![value, i64::from(row % 8)],
            );
            continue;
        }
        let column = RECORD_COLUMN_NAMES[column as usize % (RECORD_COLUMN_NAMES.len() + 1)];
        let _ = conn.execute(
            &format!("UPDATE records SET {column} = ?1 WHERE seq = ?2"),
            rusqlite::params![value, i64::from(row % 6)],
        );
    }
    before != dump(&conn)
}

/// One input (what libFuzzer calls the target with): panics on a violated property.
pub fn run(data: &[u8]) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.sqlite");
    fs_err::write(&path, template()).unwrap();
    let changed = edit(&path, data);
    let Ok(ledger) = Ledger::open_with(&path, OpenMode::Inspect) else { return };
    let verified = ledger.verify();
    if changed {
        assert!(verified.is_err(), "an edited record verifies: {verified:?}");
    }
    let namespaces = ledger.namespaces();
    let _ = ledger.head();
    let _ = ledger.stats();
    if let Ok(namespaces) = &namespaces {
        for namespace in namespaces {
            let evidence = ledger.evidence(namespace);
            if verified.is_ok() {
                evidence.unwrap_or_else(|e| {
                    panic!("verify passed but reading {namespace} failed: {e}")
                });
            }
        }
    }
    if verified.is_ok() {
        namespaces.unwrap();
    }
    drop(ledger);
    // A writer must refuse or accept the store without panicking either.
    let _ = Ledger::open(&path);
}
