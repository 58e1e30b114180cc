//! What a connection string's `sslmode` and `sslrootcert` mean here, and the TLS connector.
//!
//! A store's integrity depends on talking to the right server, so every TLS mode verifies the
//! server's certificate, and plaintext is only ever what the string asked for, or the default
//! on the machine's own loopback or Unix socket:
//!
//! - `disable`: plaintext.
//! - no `sslmode`, or `prefer`: plaintext when every host is a loopback address, `localhost` or
//!   a Unix socket (a local trust-auth server keeps working); TLS as `verify-full` to any other
//!   host. Never libpq's "TLS if offered, else plaintext": a downgrade nobody sees.
//! - `require` and `verify-full`: TLS, the certificate chained to a trusted CA and naming the
//!   host (libpq's `require` checks neither: here it is `verify-full`).
//! - `verify-ca`: TLS, the certificate chained to the CA file `sslrootcert` names, the host
//!   name not checked; refused without a CA file, since any certificate a public CA issued
//!   would pass.
//! - `allow` and anything else: refused.
//!
//! `sslrootcert=PATH` trusts only the PEM certificates in PATH; absent or `system`, the
//! system's roots. A CA file without `sslmode` means `verify-full`: a named CA is never ignored.

use std::{net::IpAddr, path::PathBuf};

use native_tls::{Certificate, Protocol, TlsConnector};
use postgres::config::{Config, Host, SslMode};

use crate::tls_error::{TlsError, TlsFailure};

/// How one connection talks to its server.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Transport {
    Plaintext,
    Tls { roots: Roots, check_host_name: bool },
}

/// Whose certificates the server's must chain to.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Roots {
    System,
    File(PathBuf),
}

/// The transport `sslmode` and `sslrootcert` ask for, given the hosts in `config`.
pub(crate) fn transport(
    sslmode: Option<&str>,
    sslrootcert: Option<&str>,
    config: &Config,
    url: &str,
) -> Result<Transport, TlsError> {
    let invalid = |parameter: &'static str, reason: String| TlsError::InvalidParameter {
        url: url.to_owned(),
        parameter,
        reason,
    };
    let roots = match sslrootcert {
        None | Some("system") => Roots::System,
        Some("") => return Err(invalid("sslrootcert", "is empty".to_owned())),
        Some(path) => Roots::File(PathBuf::from(path)),
    };
    let full = |roots| Transport::Tls { roots, check_host_name: true };
    let transport = match sslmode {
        None | Some("prefer") if sslrootcert.is_none() && all_hosts_local(config) => {
            Transport::Plaintext
        }
        None | Some("prefer" | "require" | "verify-full") => full(roots),
        Some("verify-ca") => match roots {
            Roots::File(_) => Transport::Tls { roots, check_host_name: false },
            Roots::System => {
                return Err(invalid(
                    "sslmode",
                    "verify-ca checks no host name, so it needs sslrootcert=PATH naming the \
                     server's CA (with the system's roots any certificate a public CA issued \
                     would pass); use verify-full"
                        .to_owned(),
                ));
            }
        },
        Some("disable") if sslrootcert.is_some() => {
            return Err(invalid(
                "sslrootcert",
                "names a CA but sslmode=disable sends no TLS: remove one of them".to_owned(),
            ));
        }
        Some("disable") => Transport::Plaintext,
        Some("allow") => {
            return Err(invalid(
                "sslmode",
                "allow (plaintext first, TLS if the server insists) is not supported: write \
                 disable for plaintext or verify-full for TLS"
                    .to_owned(),
            ));
        }
        Some(other) => {
            return Err(invalid(
                "sslmode",
                format!("{other:?} is not one of disable, prefer, require, verify-ca, verify-full"),
            ));
        }
    };
    if transport != Transport::Plaintext
        && let Some(Host::Unix(path)) =
            config.get_hosts().iter().find(|h| matches!(h, Host::Unix(_)))
    {
        return Err(invalid(
            "sslmode",
            format!("host {} is a Unix socket, which carries no TLS", path.display()),
        ));
    }
    Ok(transport)
}

/// Whether every host the client may connect to is this machine: a loopback address (what
/// `hostaddr` gives, else the host), `localhost` or a Unix socket.
fn all_hosts_local(config: &Config) -> bool {
    let addrs = config.get_hostaddrs();
    if !addrs.is_empty() {
        return addrs.iter().all(IpAddr::is_loopback);
    }
    config.get_hosts().iter().all(|host| match host {
        Host::Tcp(name) => {
            name.eq_ignore_ascii_case("localhost")
                || name
                    .trim_start_matches('[')
                    .trim_end_matches(']')
                    .parse::<IpAddr>()
                    .is_ok_and(|ip| ip.is_loopback())
        }
        Host::Unix(_) => true,
    })
}

/// Sets `config` up for `transport` and returns the connector a TLS transport needs.
pub(crate) fn connector(
    transport: &Transport,
    config: &mut Config,
    url: &str,
) -> Result<Option<postgres_native_tls::MakeTlsConnector>, TlsError> {
    let Transport::Tls { roots, check_host_name } = transport else {
        config.ssl_mode(SslMode::Disable);
        return Ok(None);
    };
    // Require: a server that answers "no TLS" fails the connection, never falls back.
    config.ssl_mode(SslMode::Require);
    let mut builder = TlsConnector::builder();
    builder.min_protocol_version(Some(Protocol::Tlsv12));
    builder.danger_accept_invalid_hostnames(!check_host_name);
    if let Roots::File(path) = roots {
        for certificate in ca_certificates(path, url)? {
            builder.add_root_certificate(certificate);
        }
        builder.disable_built_in_roots(true);
    }
    let connector = builder
        .build()
        .map_err(|e| TlsError::Setup { url: url.to_owned(), detail: e.to_string() })?;
    Ok(Some(postgres_native_tls::MakeTlsConnector::new(connector)))
}

fn ca_certificates(path: &PathBuf, url: &str) -> Result<Vec<Certificate>, TlsError> {
    #[allow(clippy::disallowed_methods, reason = "CaFileUnreadable names the path")]
    let pem = std::fs::read(path).map_err(|source| TlsError::CaFileUnreadable {
        url: url.to_owned(),
        path: path.clone(),
        source,
    })?;
    let invalid = |detail: String| TlsError::CaFileInvalid {
        url: url.to_owned(),
        path: path.clone(),
        detail,
    };
    let certificates = Certificate::stack_from_pem(&pem).map_err(|e| invalid(e.to_string()))?;
    if certificates.is_empty() {
        return Err(invalid("no BEGIN CERTIFICATE block".to_owned()));
    }
    Ok(certificates)
}

/// What failed, when `error` is a TLS failure of the connection; `None` otherwise.
pub(crate) fn handshake_failure(error: &postgres::Error) -> Option<(TlsFailure, String)> {
    let cause = std::error::Error::source(error)?;
    let detail = cause.to_string();
    if let Some(tls) = cause.downcast_ref::<native_tls::Error>() {
        // native-tls exposes OpenSSL's verify result only in its message, "... (RESULT)".
        let text = tls.to_string();
        let failure = if ["(hostname mismatch)", "(IP address mismatch)"]
            .iter()
            .any(|mismatch| text.contains(mismatch))
        {
            TlsFailure::HostNameMismatch
        } else if [
            "unable to get local issuer certificate",
            "self-signed certificate",
            "self signed certificate",
            "unable to get issuer certificate",
        ]
        .iter()
        .any(|reason| text.contains(reason))
        {
            TlsFailure::Untrusted
        } else if text.contains("certificate verify failed") {
            TlsFailure::CertificateRejected
        } else {
            TlsFailure::Handshake
        };
        return Some((failure, detail));
    }
    // The client's own TLS errors carry plain messages; the kind is only in its Display.
    match detail.as_str() {
        "server does not support TLS" => Some((TlsFailure::NotOffered, detail)),
        _ if error.to_string() == "error performing TLS handshake" => {
            Some((TlsFailure::Handshake, detail))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use super::*;

    fn decide(
        sslmode: Option<&str>,
        sslrootcert: Option<&str>,
        url: &str,
    ) -> Result<Transport, TlsError> {
        transport(sslmode, sslrootcert, &Config::from_str(url).unwrap(), url)
    }

    fn full(roots: Roots) -> Transport {
        Transport::Tls { roots, check_host_name: true }
    }

    #[test]
    fn no_sslmode_is_plaintext_only_on_this_machine() {
        for local in [
            "postgres://u@127.0.0.1/db",
            "postgres://u@localhost/db",
            "postgres://u@[::1]:5433/db",
            "host=/run/postgresql dbname=db",
            "postgres://u@db.example/db?hostaddr=127.0.0.1",
        ] {
            assert_eq!(decide(None, None, local).unwrap(), Transport::Plaintext, "{local}");
            assert_eq!(
                decide(Some("prefer"), None, local).unwrap(),
                Transport::Plaintext,
                "{local}"
            );
        }
        for remote in [
            "postgres://u@db.example/db",
            "postgres://u@10.0.0.5/db",
            "postgres://u@localhost,db.example/db",
        ] {
            assert_eq!(decide(None, None, remote).unwrap(), full(Roots::System), "{remote}");
            assert_eq!(decide(Some("prefer"), None, remote).unwrap(), full(Roots::System));
        }
        // A named CA asks for verification, even on loopback.
        assert_eq!(
            decide(None, Some("/ca.pem"), "postgres://u@localhost/db").unwrap(),
            full(Roots::File("/ca.pem".into()))
        );
    }

    #[test]
    fn every_tls_mode_verifies() {
        let remote = "postgres://u@db.example/db";
        assert_eq!(decide(Some("disable"), None, remote).unwrap(), Transport::Plaintext);
        assert_eq!(decide(Some("require"), None, remote).unwrap(), full(Roots::System));
        assert_eq!(
            decide(Some("require"), None, "postgres://u@127.0.0.1/db").unwrap(),
            full(Roots::System)
        );
        assert_eq!(
            decide(Some("verify-full"), Some("system"), remote).unwrap(),
            full(Roots::System)
        );
        assert_eq!(
            decide(Some("verify-ca"), Some("/ca.pem"), remote).unwrap(),
            Transport::Tls { roots: Roots::File("/ca.pem".into()), check_host_name: false }
        );
    }

    #[test]
    fn refuses_what_it_cannot_honour_naming_the_parameter() {
        let remote = "postgres://u@db.example/db";
        let parameter = |e: TlsError| match e {
            TlsError::InvalidParameter { parameter, .. } => parameter,
            other => panic!("{other}"),
        };
        assert_eq!(parameter(decide(Some("verify-ca"), None, remote).unwrap_err()), "sslmode");
        assert_eq!(parameter(decide(Some("allow"), None, remote).unwrap_err()), "sslmode");
        assert_eq!(parameter(decide(Some("Verify-Full"), None, remote).unwrap_err()), "sslmode");
        assert_eq!(
            parameter(decide(Some("disable"), Some("/ca.pem"), remote).unwrap_err()),
            "sslrootcert"
        );
        assert_eq!(
            parameter(decide(Some("require"), Some(""), remote).unwrap_err()),
            "sslrootcert"
        );
        let unix = decide(Some("verify-full"), None, "host=/run/postgresql dbname=db").unwrap_err();
        assert!(unix.to_string().contains("Unix socket"), "{unix}");
    }
}
