//! A handle's connection pool: `pool_max` caps it, concurrent calls share it, and a connection
//! the server closed is replaced.

use evicortex_ledger::EvidenceLedger;
use evicortex_postgres::{ConnectError, PgLedger};

use crate::support::{TestDb, count, turn};

/// `url` with `param` added to its query.
fn with_param(url: &str, param: &str) -> String {
    format!("{url}{}{param}", if url.contains('?') { '&' } else { '?' })
}

/// The connections the server has open to `db`, the counting one excluded.
fn connections(db: &TestDb) -> i64 {
    count(
        db,
        "SELECT count(*) FROM pg_stat_activity \
         WHERE datname = current_database() AND pid <> pg_backend_pid()",
    )
}

#[test]
fn a_pool_max_out_of_range_is_refused_by_name() {
    let db = TestDb::new();
    for bad in ["0", "65", "two", ""] {
        let err = PgLedger::connect(&with_param(&db.url, &format!("pool_max={bad}"))).unwrap_err();
        assert!(matches!(err, ConnectError::Tls(_)), "{err}");
        assert!(err.to_string().contains("invalid pool_max"), "{err}");
    }
}

#[test]
fn concurrent_calls_never_open_more_connections_than_pool_max() {
    let db = TestDb::new();
    let ledger = PgLedger::connect(&with_param(&db.url, "pool_max=3")).unwrap();
    let turns: Vec<_> = (0..40).map(|i| turn("pool", "s", i, &format!("turn {i}"))).collect();
    ledger.append(&turns).unwrap();
    std::thread::scope(|scope| {
        for _ in 0..6 {
            scope.spawn(|| {
                for _ in 0..10 {
                    assert_eq!(ledger.verify().unwrap().records, 40);
                }
            });
        }
    });
    let open = connections(&db);
    assert!((1..=3).contains(&open), "{open} connections open with pool_max=3");

    let single = PgLedger::connect(&with_param(&db.url, "pool_max=1")).unwrap();
    drop(ledger);
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| single.verify().unwrap());
        }
    });
    assert_eq!(connections(&db), 1);
}

#[test]
fn after_the_server_drops_the_connection_one_call_fails_and_the_next_reconnects() {
    let db = TestDb::new();
    let ledger = PgLedger::connect(&with_param(&db.url, "pool_max=1")).unwrap();
    ledger.append(&[turn("pool", "s", 0, "before the restart")]).unwrap();
    let terminated = count(
        &db,
        "SELECT count(*) FROM pg_stat_activity, pg_terminate_backend(pid) \
         WHERE datname = current_database() AND pid <> pg_backend_pid()",
    );
    assert_eq!(terminated, 1);
    while connections(&db) > 0 {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // The client learns that the server is gone from the call that finds it so (the pool
    // checks a connection with a round trip only after it sat idle for 10 s).
    assert!(ledger.verify().is_err(), "a call on the terminated backend succeeded");
    assert_eq!(ledger.verify().unwrap().records, 1);
    ledger.append(&[turn("pool", "s", 1, "after the restart")]).unwrap();
    assert_eq!(ledger.verify().unwrap().records, 2);
}
