//! A fresh database per test (on the single test server, or on the primary of the replicated
//! pair), and turns to append.

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

/// The replicated pair the replica tests use: (primary, hot standby).
pub fn pair_urls() -> (String, String) {
    let var = |name: &str| {
        std::env::var(name).unwrap_or_else(|_| {
            panic!(
                "{name} is not set: the read-replica tests need a primary and a hot standby. Run \
                 `scripts/postgres start-replicated` and export the variables it prints"
            )
        })
    };
    (var("EVICORTEX_TEST_POSTGRES_PRIMARY_URL"), var("EVICORTEX_TEST_POSTGRES_REPLICA_URL"))
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
        TestDb::on(server_url())
    }

    /// A database of its own on `server`.
    pub fn on(server: String) -> TestDb {
        static NEXT: AtomicU32 = AtomicU32::new(0);
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

/// A database of its own on the pair's primary, and its name on the standby.
pub struct ReplicatedDb {
    /// The database on the primary (dropped there, and by replay on the standby).
    pub primary: TestDb,
    /// The same database on the standby.
    pub replica_url: String,
    replica_server: String,
}

impl ReplicatedDb {
    pub fn new() -> ReplicatedDb {
        let (primary, replica_server) = pair_urls();
        let primary = TestDb::on(primary);
        let replica_url = with_database(&replica_server, primary.name());
        let db = ReplicatedDb { primary, replica_url, replica_server };
        db.wait_for_replay();
        db
    }

    /// Waits until the standby has replayed everything the primary has written so far.
    pub fn wait_for_replay(&self) {
        let written: String = self
            .primary
            .raw()
            .query_one("SELECT pg_current_wal_lsn()::text", &[])
            .expect("reading the primary's WAL position")
            .get(0);
        let mut standby = postgres::Client::connect(&self.replica_server, postgres::NoTls)
            .unwrap_or_else(|e| panic!("connecting to the standby {}: {e}", self.replica_server));
        let started = std::time::Instant::now();
        loop {
            let replayed: bool = standby
                .query_one("SELECT pg_last_wal_replay_lsn() >= $1::text::pg_lsn", &[&written])
                .expect("reading the standby's replay position")
                .get(0);
            if replayed {
                return;
            }
            assert!(
                started.elapsed() < std::time::Duration::from_secs(30),
                "the standby {} has not replayed the primary's WAL up to {written} in 30 s",
                self.replica_server
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    pub fn primary_ledger(&self) -> PgLedger {
        self.primary.ledger()
    }

    pub fn replica_ledger(&self) -> PgLedger {
        PgLedger::connect(&self.replica_url)
            .unwrap_or_else(|e| panic!("connecting the ledger on the standby: {e}"))
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
