//! A store on a PostgreSQL server reached over verified TLS (`scripts/postgres start-tls`: TLS
//! only, a throwaway CA, no pgvector), opened through the facade with the URL's `sslmode` and
//! `sslrootcert`: it appends and compiles, every session it holds is encrypted, and without the
//! CA the open fails as an I/O failure naming what failed.

use evicortex::{CompileConfig, DenseConfig, ErrorClass, Memory};

use crate::{incremental_indexes::compile_alice, postgres_backend::turns, tls_db::TlsDb};

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

    let (all_encrypted, sessions) = db.encrypted_sessions();
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
