//! Why a connection's TLS could not be set up or was refused.

use std::path::PathBuf;

/// A TLS failure of [`crate::PgLedger::connect`] or [`crate::PgVectors::connect`]: the
/// connection string's TLS parameters, the CA file they name, or the handshake with the server.
/// Every variant names the server without its password.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// `sslmode` or `sslrootcert` has a value this build refuses, or one that contradicts the
    /// rest of the connection string; or `pool_max`, taken out of the string with them, is not
    /// a whole number from 1 to 64.
    #[error("invalid {parameter} in {url}: {reason}")]
    InvalidParameter {
        /// The connection string, without its password.
        url: String,
        /// The parameter.
        parameter: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// The CA file named by `sslrootcert` cannot be read.
    #[error("cannot read the CA certificate file {} (sslrootcert of {url}): {source}", path.display())]
    CaFileUnreadable {
        /// The connection string, without its password.
        url: String,
        /// The file.
        path: PathBuf,
        /// The read failure.
        #[source]
        source: std::io::Error,
    },
    /// The CA file named by `sslrootcert` holds no PEM certificate.
    #[error(
        "the CA certificate file {} (sslrootcert of {url}) holds no usable PEM certificate: {detail}",
        path.display()
    )]
    CaFileInvalid {
        /// The connection string, without its password.
        url: String,
        /// The file.
        path: PathBuf,
        /// What the TLS library said, or that no certificate was found.
        detail: String,
    },
    /// The TLS library could not be set up (its configuration, not the server's answer).
    #[error("setting up TLS for {url}: {detail}")]
    Setup {
        /// The connection string, without its password.
        url: String,
        /// What the TLS library said.
        detail: String,
    },
    /// The server does not offer TLS, or the handshake failed: nothing was sent over the
    /// connection but the request for TLS.
    #[error("TLS with the PostgreSQL server at {url} failed: {failure}: {detail}")]
    Handshake {
        /// The connection string, without its password.
        url: String,
        /// What failed.
        failure: TlsFailure,
        /// What the TLS library or the client said.
        detail: String,
        /// The client's error.
        #[source]
        source: postgres::Error,
    },
}

/// What part of a TLS handshake failed.
#[derive(Copy, Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TlsFailure {
    /// The server answered that it does not support TLS.
    #[error(
        "the server does not support TLS (sslmode=disable talks plaintext, if the network may \
         see the traffic)"
    )]
    NotOffered,
    /// The server's certificate does not chain to a trusted CA.
    #[error(
        "the server's certificate is not signed by a trusted CA (name the CA's PEM file with \
         sslrootcert=PATH)"
    )]
    Untrusted,
    /// The server's certificate chains to a trusted CA but does not name the host connected to.
    #[error("the server's certificate does not name the host connected to")]
    HostNameMismatch,
    /// The server's certificate failed verification for another reason (expired, not yet
    /// valid, revoked, wrong purpose, ...).
    #[error("the server's certificate failed verification")]
    CertificateRejected,
    /// The handshake failed before or apart from the certificate's verification.
    #[error("the TLS handshake failed")]
    Handshake,
}

impl TlsError {
    /// Whether the connection string (or the CA file it names) is at fault, rather than the
    /// server or the network.
    pub fn is_configuration(&self) -> bool {
        matches!(self, TlsError::InvalidParameter { .. } | TlsError::CaFileInvalid { .. })
    }
}
