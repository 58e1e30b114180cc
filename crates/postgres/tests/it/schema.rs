//! The schema is created once, found again, and never altered to fit.

use evicortex_ledger::EvidenceLedger;
use evicortex_postgres::{ConnectError, PgLedger, SCHEMA_VERSION};

use crate::support::{TestDb, count, ns, turn};

#[test]
fn connecting_again_finds_the_same_ledger() {
    let db = TestDb::new();
    let first = db.ledger();
    first.append(&[turn("alice", "s1", 0, "kept")]).unwrap();
    // Several handles arriving together all find (or create) one schema.
    std::thread::scope(|s| {
        for _ in 0..3 {
            s.spawn(|| db.ledger());
        }
    });
    let second = db.ledger();
    assert_eq!(second.evidence(&ns("alice")).unwrap().len(), 1);
    assert_eq!(count(&db, "SELECT count(*) FROM ledger_meta WHERE key = 'schema_version'"), 1);
    let version: String = db
        .raw()
        .query_one("SELECT value FROM ledger_meta WHERE key = 'schema_version'", &[])
        .unwrap()
        .get(0);
    assert_eq!(version, SCHEMA_VERSION.to_string());
}

#[test]
fn another_schema_version_is_refused_unchanged() {
    let db = TestDb::new();
    db.ledger().append(&[turn("alice", "s1", 0, "kept")]).unwrap();
    db.raw()
        .execute("UPDATE ledger_meta SET value = '99' WHERE key = 'schema_version'", &[])
        .unwrap();
    let err = PgLedger::connect(&db.url).unwrap_err();
    assert!(matches!(err, ConnectError::UnsupportedSchema { .. }), "{err}");
    assert!(err.to_string().contains("schema version 99"), "{err}");
    let version: String = db
        .raw()
        .query_one("SELECT value FROM ledger_meta WHERE key = 'schema_version'", &[])
        .unwrap()
        .get(0);
    assert_eq!(version, "99", "left as it was");
    assert_eq!(count(&db, "SELECT count(*) FROM records"), 1);
}

#[test]
fn a_foreign_records_table_is_refused() {
    let db = TestDb::new();
    db.raw().batch_execute("CREATE TABLE records (id int)").unwrap();
    let err = PgLedger::connect(&db.url).unwrap_err();
    assert!(matches!(err, ConnectError::UnsupportedSchema { .. }), "{err}");
    assert_eq!(count(&db, "SELECT count(*) FROM pg_tables WHERE tablename = 'ledger_meta'"), 0);
}
