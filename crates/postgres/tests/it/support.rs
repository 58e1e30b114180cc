//! A fresh database per test, and turns to append.

use std::sync::atomic::{AtomicU32, Ordering};

use evicortex_core::{EventTime, Namespace, Role, SessionId, Turn, TurnIndex};
use evicortex_postgres::PgLedger;

/// The server the tests use.
pub fn server_url() -> String {
    std::env::var("EVICORTEX_TEST_POSTGRES_URL").unwrap_or_else(|_| {
        panic!(
            "EVICORTEX_TEST_POSTGRES_URL is not set: the PostgreSQL ledger tests need a server. \
             Run `scripts/postgres start` and export the URL it prints as \
             EVICORTEX_TEST_POSTGRES_URL"
        )
    })
}

/// `url` naming database `name` instead of its own (URL form only).
pub fn with_database(url: &str, name: &str) -> String {
    let scheme_end = url
        .find("://")
        .map(|i| i + 3)
        .expect("EVICORTEX_TEST_POSTGRES_URL must be a postgres:// URL");
    let (query_start, query) = match url.find('?') {
        Some(q) => (q, &url[q..]),
        None => (url.len(), ""),
    };
    let path_start = url[scheme_end..query_start].find('/').map_or(query_start, |i| scheme_end + i);
    format!("{}/{name}{query}", &url[..path_start])
}

/// A database of its own for one test, dropped (with its connections) when this is dropped.
pub struct TestDb {
    pub url: String,
    name: String,
    server: String,
}

impl TestDb {
    pub fn new() -> TestDb {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let server = server_url();
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let name = format!(
            "evicortex_test_{}_{}_{nanos}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let mut admin = postgres::Client::connect(&server, postgres::NoTls)
            .unwrap_or_else(|e| panic!("connecting to the test server {server}: {e}"));
        admin
            .batch_execute(&format!("CREATE DATABASE {name} ENCODING 'UTF8' TEMPLATE template0"))
            .unwrap_or_else(|e| panic!("creating database {name}: {e}"));
        TestDb { url: with_database(&server, &name), name, server }
    }

    pub fn ledger(&self) -> PgLedger {
        PgLedger::connect(&self.url).unwrap_or_else(|e| panic!("connecting the ledger: {e}"))
    }

    /// The database's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A plain connection for raw SQL.
    pub fn raw(&self) -> postgres::Client {
        postgres::Client::connect(&self.url, postgres::NoTls).expect("raw connection")
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if let Ok(mut admin) = postgres::Client::connect(&self.server, postgres::NoTls) {
            let _ =
                admin.batch_execute(&format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name));
        }
    }
}

pub fn ns(name: &str) -> Namespace {
    Namespace::new(name).unwrap()
}

pub fn turn(namespace: &str, session: &str, index: u32, text: &str) -> Turn {
    Turn {
        namespace: ns(namespace),
        session: SessionId::new(session).unwrap(),
        turn: TurnIndex::new(index),
        role: if index.is_multiple_of(2) { Role::User } else { Role::Assistant },
        speaker: index.is_multiple_of(3).then(|| "Ada".to_owned()),
        text: text.to_owned(),
        time: EventTime::parse_rfc3339(&format!("2024-05-02T10:{:02}:00.25+01:00", index % 60))
            .unwrap(),
        meta: serde_json::from_str(&format!(r#"{{"z": {index}, "a": ["x", null]}}"#)).unwrap(),
    }
}

/// One count from a raw query.
pub fn count(db: &TestDb, sql: &str) -> i64 {
    db.raw().query_one(sql, &[]).unwrap().get(0)
}
