//! The pool against the real test server (`scripts/postgres start`): growth, the maximum, and
//! a connection the server dropped.

use std::{sync::mpsc, time::Duration};

use postgres::Client;

use super::{ClientPool, Setup};
use crate::{connect::connect, redacted_url::redact_password};

fn server_url() -> String {
    std::env::var("EVICORTEX_TEST_POSTGRES_URL").unwrap_or_else(|_| {
        panic!(
            "EVICORTEX_TEST_POSTGRES_URL is not set: the connection pool's tests need a server. \
             Run `scripts/postgres start` and export the URL it prints"
        )
    })
}

fn pool(max: usize, setup: Setup) -> ClientPool {
    let url = server_url();
    let shown = redact_password(&url);
    let Ok(first) = connect(&url, &shown) else { panic!("the test server did not answer") };
    ClientPool::with_max(first, &url, &shown, setup, max)
}

fn backend_pid(client: &mut Client) -> i32 {
    client.query_one("SELECT pg_backend_pid()", &[]).expect("pid").get(0)
}

#[test]
fn a_second_caller_gets_a_connection_of_its_own_while_the_first_is_in_use() {
    let pool = pool(4, |_| Ok(()));
    let mut first = pool.lock();
    let mut second = pool.lock();
    assert_ne!(backend_pid(&mut first), backend_pid(&mut second));
    assert_eq!(pool.open_connections(), 2);
    drop(first);
    drop(second);
    // Returned connections are reused, not reopened.
    let _again = pool.lock();
    assert_eq!(pool.open_connections(), 2);
}

#[test]
fn at_the_maximum_a_caller_waits_for_a_connection_to_come_back() {
    let pool = pool(2, |_| Ok(()));
    let mut first = pool.lock();
    let first_pid = backend_pid(&mut first);
    let _second = pool.lock();
    let (sent, received) = mpsc::channel();
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let mut third = pool.lock();
            sent.send(backend_pid(&mut third)).expect("send");
        });
        assert!(
            received.recv_timeout(Duration::from_millis(300)).is_err(),
            "a third connection was handed out beyond the maximum of 2"
        );
        drop(first);
        let pid = received.recv_timeout(Duration::from_secs(10)).expect("the waiter was woken");
        assert_eq!(pid, first_pid, "the waiter got the connection that came back");
    });
    assert_eq!(pool.open_connections(), 2);
}

#[test]
fn every_new_connection_runs_the_setup() {
    let pool = pool(3, |client| client.batch_execute("SET application_name = 'pool-setup-test'"));
    let _first = pool.lock();
    let mut second = pool.lock();
    let name: String = second
        .query_one("SELECT current_setting('application_name')", &[])
        .expect("setting")
        .get(0);
    assert_eq!(name, "pool-setup-test");
}

#[test]
fn a_connection_the_server_dropped_during_a_call_is_replaced_on_its_next_use() {
    let pool = pool(1, |_| Ok(()));
    let url = server_url();
    let Ok(mut admin) = connect(&url, &redact_password(&url)) else {
        panic!("no admin connection")
    };
    let dropped_pid = {
        let mut held = pool.lock();
        let pid = backend_pid(&mut held);
        let terminated: bool =
            admin.query_one("SELECT pg_terminate_backend($1)", &[&pid]).expect("terminate").get(0);
        assert!(terminated);
        while admin
            .query_opt("SELECT 1 FROM pg_stat_activity WHERE pid = $1", &[&pid])
            .expect("pg_stat_activity")
            .is_some()
        {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(held.query_one("SELECT 1", &[]).is_err(), "the terminated backend answered");
        pid
    };
    let mut next = pool.lock();
    assert_ne!(backend_pid(&mut next), dropped_pid);
    assert_eq!(pool.open_connections(), 1);
}

#[test]
fn a_connection_the_server_closed_while_idle_is_checked_and_replaced_before_use() {
    let pool = pool(1, |_| Ok(())).check_when_idle_for(Duration::ZERO);
    let url = server_url();
    let Ok(mut admin) = connect(&url, &redact_password(&url)) else {
        panic!("no admin connection")
    };
    let dropped_pid = backend_pid(&mut pool.lock());
    admin.query_one("SELECT pg_terminate_backend($1)", &[&dropped_pid]).expect("terminate");
    while admin
        .query_opt("SELECT 1 FROM pg_stat_activity WHERE pid = $1", &[&dropped_pid])
        .expect("pg_stat_activity")
        .is_some()
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut next = pool.lock();
    assert_ne!(backend_pid(&mut next), dropped_pid, "no call failed, on a new connection");
    assert_eq!(pool.open_connections(), 1);
}
