//! Connecting fails closed, naming the server and never its password.

use evicortex_ledger::EvidenceLedger;
use evicortex_postgres::{ConnectError, PgLedger};

use crate::support::TestDb;

#[test]
fn a_dead_port_is_a_clear_error_without_the_password() {
    // A port that was free a moment ago: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url =
        format!("postgres://ledger:hunter2-secret@127.0.0.1:{port}/evicortex?connect_timeout=5");
    let err = PgLedger::connect(&url).unwrap_err();
    let message = err.to_string();
    assert!(matches!(err, ConnectError::Unreachable { .. }), "{message}");
    assert!(
        message.contains(&format!(
            "no PostgreSQL server answers at postgres://ledger:***@127.0.0.1:{port}/evicortex"
        )),
        "{message}"
    );
    assert!(!message.contains("hunter2"), "{message}");
    assert!(!format!("{err:?}").contains("hunter2"), "{err:?}");
}

#[test]
fn an_unparsable_url_is_refused_by_name() {
    let err = PgLedger::connect("postgres://ledger:pw@127.0.0.1:notaport/db").unwrap_err();
    assert!(matches!(err, ConnectError::InvalidUrl { .. }), "{err}");
    assert!(!err.to_string().contains(":pw@"), "{err}");
}

#[test]
fn a_ledger_dropped_on_a_thread_driving_an_async_runtime_closes_without_panicking() {
    // A server shutting down drops the facade, and this ledger with it, inside its runtime.
    let db = TestDb::new();
    let ledger = db.ledger();
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(
        async move {
            drop(ledger);
        },
    );
    let again = db.ledger();
    assert_eq!(again.verify().unwrap().records, 0);
}
