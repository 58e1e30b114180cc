//! TLS against a server that takes TLS connections only (`scripts/postgres start-tls`: a
//! throwaway CA, a certificate for `localhost`, plaintext logins rejected by pg_hba.conf).

use evicortex_ledger::EvidenceLedger;

use evicortex_postgres::{
    ConnectError, PgLedger, PgVectors, TlsError, TlsFailure, VectorStoreError,
};

use crate::{
    support::turn,
    test_db::server_url,
    tls_db::{TlsDb, tls_server, with_query},
};

fn handshake_failure(err: &ConnectError) -> TlsFailure {
    match err {
        ConnectError::Tls(TlsError::Handshake { failure, .. }) => *failure,
        other => panic!("expected a TLS handshake failure, got: {other}"),
    }
}

#[test]
fn verify_full_with_the_ca_connects_encrypted_and_appends() {
    let db = TlsDb::new();
    let url = db.url(&format!("sslmode=verify-full&sslrootcert={}", db.ca));
    let ledger = PgLedger::connect(&url).unwrap_or_else(|e| panic!("{e}"));
    ledger.append(&[turn("tls", "s1", 0, "over TLS")]).unwrap();
    assert_eq!(db.encrypted_sessions(), (true, 1));
    assert_eq!(ledger.verify().unwrap().records, 1);
}

#[test]
fn require_verifies_too_and_an_untrusted_certificate_is_refused_without_the_password() {
    let db = TlsDb::new();
    let with_password =
        db.url("sslmode=require").replacen("postgres@", "postgres:hunter2-secret@", 1);
    for url in [db.url("sslmode=require"), db.url("sslmode=verify-full"), with_password] {
        let err = PgLedger::connect(&url).unwrap_err();
        let message = err.to_string();
        assert_eq!(handshake_failure(&err), TlsFailure::Untrusted, "{message}");
        assert!(message.contains("not signed by a trusted CA"), "{message}");
        assert!(message.contains("@localhost:"), "{message}");
        assert!(!message.contains("hunter2") && !format!("{err:?}").contains("hunter2"), "{err:?}");
    }
}

#[test]
fn a_certificate_for_another_host_name_is_refused_unless_verify_ca() {
    let db = TlsDb::new();
    // The certificate names localhost only.
    let by_address = |query: &str| db.url(query).replacen("@localhost:", "@127.0.0.1:", 1);
    let err = PgLedger::connect(&by_address(&format!("sslmode=verify-full&sslrootcert={}", db.ca)))
        .unwrap_err();
    assert_eq!(handshake_failure(&err), TlsFailure::HostNameMismatch, "{err}");
    assert!(err.to_string().contains("does not name the host"), "{err}");

    let _ledger =
        PgLedger::connect(&by_address(&format!("sslmode=verify-ca&sslrootcert={}", db.ca)))
            .unwrap_or_else(|e| panic!("verify-ca checks no host name: {e}"));
    assert_eq!(db.encrypted_sessions(), (true, 1));
}

#[test]
fn plaintext_is_sent_when_asked_for_or_by_default_on_loopback_and_this_server_rejects_it() {
    let db = TlsDb::new();
    // pg_hba.conf rejects every plaintext login over TCP.
    for query in ["sslmode=disable", "sslmode=prefer", "application_name=evicortex"] {
        let err = PgLedger::connect(&db.url(query)).unwrap_err();
        assert!(matches!(err, ConnectError::Refused { .. }), "{query}: {err}");
        let server_says = match &err {
            ConnectError::Refused { source, .. } => {
                source.as_db_error().unwrap().message().to_owned()
            }
            _ => unreachable!(),
        };
        assert!(server_says.contains("no encryption"), "{query}: {server_says}");
    }
}

#[test]
fn a_server_without_tls_is_refused_when_tls_is_asked_for() {
    let (_, ca) = tls_server();
    let url = with_query(&server_url(), &format!("sslmode=verify-full&sslrootcert={ca}"));
    let err = PgLedger::connect(&url).unwrap_err();
    assert_eq!(handshake_failure(&err), TlsFailure::NotOffered, "{err}");
    assert!(err.to_string().contains("does not support TLS"), "{err}");
}

#[test]
fn a_missing_ca_file_or_a_bad_parameter_is_refused_by_name() {
    let db = TlsDb::new();
    let missing = std::env::temp_dir().join("evicortex-no-such-ca.pem");
    let err = PgLedger::connect(
        &db.url(&format!("sslmode=verify-full&sslrootcert={}", missing.display())),
    )
    .unwrap_err();
    assert!(
        matches!(&err, ConnectError::Tls(TlsError::CaFileUnreadable { path, .. }) if *path == missing),
        "{err}"
    );
    assert!(err.to_string().contains(&missing.display().to_string()), "{err}");

    let not_pem = tempfile::NamedTempFile::new().unwrap();
    fs_err::write(not_pem.path(), "not a certificate\n").unwrap();
    let err = PgLedger::connect(&db.url(&format!("sslrootcert={}", not_pem.path().display())))
        .unwrap_err();
    assert!(matches!(&err, ConnectError::Tls(TlsError::CaFileInvalid { .. })), "{err}");

    for (query, parameter) in [
        ("sslmode=verify-everything", "sslmode"),
        ("sslmode=allow", "sslmode"),
        ("sslmode=verify-ca", "sslmode"),
        ("sslmode=disable&sslmode=require", "sslmode"),
        ("sslmode=disable&sslrootcert=/ca.pem", "sslrootcert"),
    ] {
        let err = PgLedger::connect(&db.url(query)).unwrap_err();
        assert!(
            matches!(&err, ConnectError::Tls(TlsError::InvalidParameter { parameter: p, .. }) if *p == parameter),
            "{query}: {err}"
        );
        assert!(err.to_string().contains(parameter), "{query}: {err}");
    }
    // Client certificates are not supported: refused by name, never ignored.
    let err = PgLedger::connect(&db.url("sslmode=verify-full&sslcert=/client.pem")).unwrap_err();
    assert!(matches!(err, ConnectError::InvalidUrl { .. }), "{err}");
    assert!(err.to_string().contains("unknown option `sslcert`"), "{err}");
}

#[test]
fn the_vector_store_connects_the_same_way() {
    let db = TlsDb::new();
    // The TLS server has no pgvector: reaching the extension check means TLS was accepted.
    let err = PgVectors::connect(&db.url(&format!("sslmode=verify-full&sslrootcert={}", db.ca)))
        .unwrap_err();
    assert!(matches!(err, VectorStoreError::Extension { .. }), "{err}");

    let err = PgVectors::connect(&db.url("sslmode=verify-full")).unwrap_err();
    assert!(
        matches!(
            err,
            VectorStoreError::Tls(TlsError::Handshake { failure: TlsFailure::Untrusted, .. })
        ),
        "{err}"
    );
}
