//! A database of its own on the TLS test server (`scripts/postgres start-tls`: TLS only, a
//! throwaway CA), reached by an administrator's connection independent of the code under test:
//! shared through `#[path]` by the PostgreSQL crate's TLS tests and the facade's. It sits beside
//! `test_db.rs`, whose module every suite names `test_db`.

use crate::test_db::{unique_name, with_database};

/// The TLS server's URL (no sslmode) and its CA's PEM file.
pub fn tls_server() -> (String, String) {
    let var = |name: &str| {
        std::env::var(name).unwrap_or_else(|_| {
            panic!(
                "{name} is not set: the TLS tests need a TLS server. Run `scripts/postgres \
                 start-tls` and export the variables it prints"
            )
        })
    };
    (var("EVICORTEX_TEST_POSTGRES_TLS_URL"), var("EVICORTEX_TEST_POSTGRES_TLS_CA"))
}

/// `url` with `query` appended (the test URLs have none).
pub fn with_query(url: &str, query: &str) -> String {
    format!("{url}?{query}")
}

/// An administrator's connection over verified TLS.
pub fn admin(url: &str, ca: &str) -> postgres::Client {
    let pem = fs_err::read(ca).unwrap();
    let connector = native_tls::TlsConnector::builder()
        .add_root_certificate(native_tls::Certificate::from_pem(&pem).unwrap())
        .disable_built_in_roots(true)
        .build()
        .unwrap();
    let mut config: postgres::Config = url.parse().unwrap();
    config.ssl_mode(postgres::config::SslMode::Require);
    config
        .connect(postgres_native_tls::MakeTlsConnector::new(connector))
        .unwrap_or_else(|e| panic!("connecting to the TLS test server {url}: {e:?}"))
}

/// A database of its own on the TLS server, dropped at the end.
pub struct TlsDb {
    server: String,
    /// The CA's PEM file, for `sslrootcert`.
    pub ca: String,
    name: String,
}

impl TlsDb {
    pub fn new() -> TlsDb {
        let (server, ca) = tls_server();
        let name = unique_name("evicortex_tls");
        admin(&server, &ca)
            .batch_execute(&format!("CREATE DATABASE {name} ENCODING 'UTF8' TEMPLATE template0"))
            .unwrap_or_else(|e| panic!("creating database {name}: {e}"));
        TlsDb { server, ca, name }
    }

    /// The database's URL with `query`.
    pub fn url(&self, query: &str) -> String {
        with_query(&with_database(&self.server, &self.name), query)
    }

    /// Whether every session the code under test (application `evicortex`) holds open on this
    /// database is encrypted, and how many there are.
    pub fn encrypted_sessions(&self) -> (bool, i64) {
        let row = admin(&self.server, &self.ca)
            .query_one(
                "SELECT coalesce(bool_and(s.ssl), false), count(*) FROM pg_stat_ssl s \
                 JOIN pg_stat_activity a USING (pid) \
                 WHERE a.datname = $1 AND a.application_name = 'evicortex'",
                &[&self.name],
            )
            .unwrap();
        (row.get(0), row.get(1))
    }
}

impl Drop for TlsDb {
    fn drop(&mut self) {
        let _ = admin(&self.server, &self.ca)
            .batch_execute(&format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name));
    }
}
