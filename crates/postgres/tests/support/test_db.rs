//! A database of its own for one test on the PostgreSQL test servers `scripts/postgres` starts
//! (the single server, or the primary of the replicated pair), dropped with its connections at the
//! end so that tests run in parallel: shared through `#[path]` by the PostgreSQL crate's tests,
//! the facade's and the CLI's. It needs only the `postgres` crate.

use std::sync::atomic::{AtomicU32, Ordering};

/// The server the tests use.
pub fn server_url() -> String {
    std::env::var("EVICORTEX_TEST_POSTGRES_URL").unwrap_or_else(|_| {
        panic!(
            "EVICORTEX_TEST_POSTGRES_URL is not set: the PostgreSQL tests need a server. Run \
             `scripts/postgres start` and export the URL it prints as EVICORTEX_TEST_POSTGRES_URL"
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
    let scheme_end = url.find("://").map(|i| i + 3).expect("a postgres:// URL");
    let (query_start, query) = match url.find('?') {
        Some(q) => (q, &url[q..]),
        None => (url.len(), ""),
    };
    let path_start = url[scheme_end..query_start].find('/').map_or(query_start, |i| scheme_end + i);
    format!("{}/{name}{query}", &url[..path_start])
}

/// A database name no other test (of this process or another) uses.
pub fn unique_name(prefix: &str) -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
    let next = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("{prefix}_{}_{next}_{nanos}", std::process::id())
}

/// A database of its own for one test, dropped (with its connections) when this is dropped.
pub struct TestDb {
    pub url: String,
    name: String,
    server: String,
}

impl TestDb {
    /// A database of its own on the test server.
    pub fn new() -> TestDb {
        TestDb::on(&server_url(), None)
    }

    /// A database of its own on `server`, in `tablespace` when one is named.
    pub fn on(server: &str, tablespace: Option<&str>) -> TestDb {
        let name = unique_name("evicortex_test");
        let in_tablespace = tablespace.map(|t| format!(" TABLESPACE {t}")).unwrap_or_default();
        postgres::Client::connect(server, postgres::NoTls)
            .unwrap_or_else(|e| panic!("connecting to the test server {server}: {e}"))
            .batch_execute(&format!(
                "CREATE DATABASE {name} ENCODING 'UTF8' TEMPLATE template0{in_tablespace}"
            ))
            .unwrap_or_else(|e| panic!("creating database {name}: {e}"));
        TestDb { url: with_database(server, &name), name, server: server.to_owned() }
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

/// A database of its own on the pair's primary, and its name on the standby (dropped there by
/// replay).
pub struct ReplicatedDb {
    /// The database on the primary.
    pub primary: TestDb,
    /// The same database on the standby.
    pub replica_url: String,
    replica_server: String,
}

impl ReplicatedDb {
    /// A fresh database that the standby has already replayed.
    pub fn new() -> ReplicatedDb {
        let (primary, replica_server) = pair_urls();
        let primary = TestDb::on(&primary, None);
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
}
