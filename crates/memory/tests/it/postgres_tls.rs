//! A store on a PostgreSQL server reached over verified TLS (`scripts/postgres start-tls`: TLS
//! only, a throwaway CA, no pgvector), opened through the facade with the URL's `sslmode` and
//! `sslrootcert`: it appends and compiles, every session it holds is encrypted, and without the
//! CA the open fails as an I/O failure naming what failed.

use evicortex::{CompileConfig, DenseConfig, ErrorClass, Memory};

use crate::{incremental_indexes::compile_alice, postgres_backend::turns};

fn tls_server() -> (String, String) {
    let var = |name: &str| {
        std::env::var(name).unwrap_or_else(|_| {
            panic!(
                "{name} is not set: the TLS store test needs a TLS server. Run `scripts/postgres \
                 start-tls` and export the variables it prints"
            )
        })
    };
    (var("EVICORTEX_TEST_POSTGRES_TLS_URL"), var("EVICORTEX_TEST_POSTGRES_TLS_CA"))
}

fn admin(server: &str, ca: &str) -> postgres::Client {
    let pem = fs_err::read(ca).unwrap();
    let connector = native_tls::TlsConnector::builder()
        .add_root_certificate(native_tls::Certificate::from_pem(&pem).unwrap())
        .disable_built_in_roots(true)
        .build()
        .unwrap();
    let mut config: postgres::Config = server.parse().unwrap();
    config.ssl_mode(postgres::config::SslMode::Require);
    config
        .connect(postgres_native_tls::MakeTlsConnector::new(connector))
        .unwrap_or_else(|e| panic!("connecting to the TLS test server {server}: {e:?}"))
}

/// A database of its own on the TLS server, dropped at the end.
struct TlsDb {
    server: String,
    ca: String,
    name: String,
}

impl TlsDb {
    fn new() -> TlsDb {
        let (server, ca) = tls_server();
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let name = format!("evicortex_memory_tls_{}_{nanos}", std::process::id());
        admin(&server, &ca)
            .batch_execute(&format!("CREATE DATABASE {name} ENCODING 'UTF8' TEMPLATE template0"))
            .unwrap_or_else(|e| panic!("creating database {name}: {e}"));
        TlsDb { server, ca, name }
    }

    /// The database's URL (the server's names `/postgres`) with `query`.
    fn url(&self, query: &str) -> String {
        let base = self.server.strip_suffix("/postgres").expect("the server URL ends in /postgres");
        format!("{base}/{}?{query}", self.name)
    }
}

impl Drop for TlsDb {
    fn drop(&mut self) {
        let _ = admin(&self.server, &self.ca)
            .batch_execute(&format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name));
    }
}

#[test]
fn a_store_over_verified_tls_appends_and_compiles_on_encrypted_sessions() {
    let db = TlsDb::new();
    let derived = tempfile::tempdir().unwrap();
    let url = db.url(&format!("sslmode=verify-full&sslrootcert={}", db.ca));
    let memory = Memory::builder(&url)
        .derived_dir(derived.path().join("derived"))
        .open()
        .unwrap_or_else(|e| panic!("opening {url}: {e}"));
    assert_eq!(memory.append(&turns(crate::postgres_backend::TURNS)).unwrap().appended(), 5);
    let config = CompileConfig::hybrid(10, DenseConfig::Off);
    let context = compile_alice(&memory, "Where did Ann swim?", &config, 200).unwrap();
    assert!(
        context.items.iter().any(|i| i.session.as_str() == "s1" && i.turn.raw() == 0),
        "the Lake Tahoe turn is cited"
    );
    assert_eq!(memory.verify().unwrap().turns, 5);

    let (all_encrypted, sessions): (bool, i64) = {
        let row = admin(&db.server, &db.ca)
            .query_one(
                "SELECT coalesce(bool_and(s.ssl), false), count(*) FROM pg_stat_ssl s \
                 JOIN pg_stat_activity a USING (pid) \
                 WHERE a.datname = $1 AND a.application_name = 'evicortex'",
                &[&db.name],
            )
            .unwrap();
        (row.get(0), row.get(1))
    };
    assert!(sessions >= 1 && all_encrypted, "{sessions} sessions, all encrypted: {all_encrypted}");
}

#[test]
fn a_store_whose_server_certificate_is_not_trusted_does_not_open() {
    let db = TlsDb::new();
    let derived = tempfile::tempdir().unwrap();
    let err = Memory::builder(db.url("sslmode=verify-full"))
        .derived_dir(derived.path().join("derived"))
        .open()
        .map(|_| ())
        .unwrap_err();
    assert_eq!(err.class(), ErrorClass::Io, "{err}");
    let message = err.to_string();
    assert!(message.contains("not signed by a trusted CA"), "{message}");
    assert!(message.contains("@localhost:"), "{message}");
}
