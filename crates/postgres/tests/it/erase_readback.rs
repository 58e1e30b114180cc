//! After an erasure, the erased text and its salt are in no file of the server: not in the
//! table, an index, a log segment or anywhere else under the data directory.

use std::{
    path::PathBuf,
    time::{Duration, Instant},
};

use evicortex_core::TurnId;
use evicortex_ledger::{ContentSalt, EraseTarget, EvidenceLedger};
use postgres::IsolationLevel;

use crate::support::{TestDb, ns, turn};

fn data_directory() -> PathBuf {
    std::env::var_os("EVICORTEX_TEST_POSTGRES_DATA").map(PathBuf::from).unwrap_or_else(|| {
        panic!(
            "EVICORTEX_TEST_POSTGRES_DATA is not set: the erasure read-back test scans the test \
             server's data directory. Run `scripts/postgres start` and export the data \
             directory it prints"
        )
    })
}

pub(crate) use crate::files_holding::files_holding;

#[test]
fn an_erased_text_is_in_no_file_of_the_server() {
    let data = data_directory();
    assert!(data.join("PG_VERSION").is_file(), "{} is not a data directory", data.display());
    let db = TestDb::new();
    let pg = db.ledger();
    let nonce = ContentSalt::random().unwrap();
    let secret = format!(
        "erasure-probe {} my PIN is 4711",
        blake3::Hash::from_bytes(*nonce.as_bytes()).to_hex()
    );
    pg.append(&[turn("alice", "s1", 0, "a neighbour that stays"), turn("alice", "s1", 1, &secret)])
        .unwrap();
    let salt: Vec<u8> =
        db.raw().query_one("SELECT salt FROM records WHERE number = 2", &[]).unwrap().get(0);
    // Make sure the text reached the files before the erasure, so the scan below proves the
    // scrub removed it rather than that it was never written.
    db.raw().batch_execute("CHECKPOINT").unwrap();
    assert!(!files_holding(&data, secret.as_bytes()).is_empty(), "the probe is on disk first");

    pg.erase(&EraseTarget::Record(ns("alice"), TurnId::from_raw(2))).unwrap();

    let text_left = files_holding(&data, secret.as_bytes());
    let salt_left = files_holding(&data, &salt);
    assert!(text_left.is_empty(), "the erased text is still in {text_left:?}");
    assert!(salt_left.is_empty(), "the erased salt is still in {salt_left:?}");
    pg.verify().unwrap();
    assert_eq!(pg.evidence(&ns("alice")).unwrap().len(), 1);
}

/// A snapshot of this database and a transaction of another one, both older than the erasure,
/// hold the old row versions: the scrub waits for both to end, then removes the text.
#[test]
fn the_scrub_waits_for_older_snapshots_and_transactions() {
    let data = data_directory();
    let db = TestDb::new();
    let other = TestDb::new();
    let pg = db.ledger();
    let nonce = ContentSalt::random().unwrap();
    let secret =
        format!("erasure-probe {} held back", blake3::Hash::from_bytes(*nonce.as_bytes()).to_hex());
    pg.append(&[turn("alice", "s1", 0, &secret)]).unwrap();

    let mut reader = db.raw();
    let mut snapshot =
        reader.build_transaction().isolation_level(IsolationLevel::RepeatableRead).start().unwrap();
    // A snapshot without a lock on the records table: only its horizon holds the old rows.
    snapshot.query_one("SELECT 1", &[]).unwrap();
    let mut writer = other.raw();
    let mut elsewhere = writer.transaction().unwrap();
    elsewhere.query_one("SELECT pg_current_xact_id()", &[]).unwrap();

    let started = Instant::now();
    std::thread::scope(|s| {
        s.spawn(move || {
            std::thread::sleep(Duration::from_millis(1400));
            snapshot.commit().unwrap();
        });
        s.spawn(move || {
            std::thread::sleep(Duration::from_millis(700));
            elsewhere.commit().unwrap();
        });
        pg.erase(&EraseTarget::Record(ns("alice"), TurnId::from_raw(1))).unwrap();
    });
    assert!(started.elapsed() >= Duration::from_millis(1400), "{:?}", started.elapsed());
    let left = files_holding(&data, secret.as_bytes());
    assert!(left.is_empty(), "the erased text is still in {left:?}");
}

/// A text too long for its row lives in the table's TOAST table (out of line, uncompressed
/// when it does not compress): the scrub removes it from there too.
#[test]
fn a_long_erased_text_is_in_no_file_either() {
    let data = data_directory();
    let db = TestDb::new();
    let pg = db.ledger();
    // Random hex does not compress by a quarter, so it is stored as it is, out of line.
    let secret: String = (0..128)
        .map(|_| blake3::Hash::from_bytes(*ContentSalt::random().unwrap().as_bytes()).to_hex())
        .collect::<Vec<_>>()
        .concat();
    pg.append(&[turn("alice", "s1", 0, &secret)]).unwrap();
    let toasted: i64 = db
        .raw()
        .query_one(
            "SELECT pg_relation_size(reltoastrelid) FROM pg_class WHERE relname = 'records'",
            &[],
        )
        .unwrap()
        .get(0);
    assert!(toasted > 0, "the text is stored out of line");
    db.raw().batch_execute("CHECKPOINT").unwrap();
    let probe = &secret.as_bytes()[1000..1064];
    assert!(!files_holding(&data, probe).is_empty(), "the probe is on disk first");

    pg.erase(&EraseTarget::Namespace(ns("alice"))).unwrap();

    let left = files_holding(&data, probe);
    assert!(left.is_empty(), "the erased text is still in {left:?}");
    pg.verify().unwrap();
}
