//! The one way this crate connects: the ledger and the vector store share it, so both honour
//! the same TLS settings (`tls.rs`), timeout and application name.

use std::{str::FromStr, time::Duration};

use postgres::{Client, Config, NoTls};

use crate::{
    tls::{self, handshake_failure},
    tls_error::TlsError,
    tls_params::{TlsParams, take_tls_params},
};

/// How long a connection attempt waits for a server that does not answer, unless the
/// connection string says otherwise: a black-holed address fails instead of hanging.
const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Why [`connect`] failed, for each caller to put in its own error type.
#[derive(Debug)]
pub(crate) enum ConnectFailure {
    /// The client's parser refused the connection string.
    InvalidUrl(postgres::Error),
    /// The TLS parameters, the CA file, or the handshake.
    Tls(TlsError),
    /// No server answered, or one refused the connection.
    Server(postgres::Error),
}

/// The largest `pool_max` accepted: each connection is a backend process on the server.
const POOL_MAX_LIMIT: usize = 64;

/// The connection string's `pool_max` (the most connections one handle opens), if given.
pub(crate) fn pool_max(url: &str, shown: &str) -> Result<Option<usize>, ConnectFailure> {
    pool_max_of(&params(url, shown)?, shown)
}

fn pool_max_of(params: &TlsParams, shown: &str) -> Result<Option<usize>, ConnectFailure> {
    let Some(value) = params.pool_max.as_deref() else { return Ok(None) };
    match value.parse::<usize>() {
        Ok(n) if (1..=POOL_MAX_LIMIT).contains(&n) => Ok(Some(n)),
        _ => Err(ConnectFailure::Tls(TlsError::InvalidParameter {
            url: shown.to_owned(),
            parameter: "pool_max",
            reason: format!("{value:?} is not a whole number from 1 to {POOL_MAX_LIMIT}"),
        })),
    }
}

fn params(url: &str, shown: &str) -> Result<TlsParams, ConnectFailure> {
    take_tls_params(url).map_err(|e| {
        ConnectFailure::Tls(TlsError::InvalidParameter {
            url: shown.to_owned(),
            parameter: e.parameter,
            reason: e.reason,
        })
    })
}

/// A connection to the server `url` names; `shown` is `url` without its password (see
/// [`crate::redact_password`]), which errors name.
pub(crate) fn connect(url: &str, shown: &str) -> Result<Client, ConnectFailure> {
    let params = params(url, shown)?;
    pool_max_of(&params, shown)?;
    let mut config = Config::from_str(&params.rest).map_err(ConnectFailure::InvalidUrl)?;
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(DEFAULT_CONNECT_TIMEOUT);
    }
    if config.get_application_name().is_none() {
        config.application_name("evicortex");
    }
    let transport =
        tls::transport(params.sslmode.as_deref(), params.sslrootcert.as_deref(), &config, shown)
            .map_err(ConnectFailure::Tls)?;
    let connector = tls::connector(&transport, &mut config, shown).map_err(ConnectFailure::Tls)?;
    let connected = match connector {
        Some(connector) => config.connect(connector),
        None => config.connect(NoTls),
    };
    connected.map_err(|source| match handshake_failure(&source) {
        Some((failure, detail)) => ConnectFailure::Tls(TlsError::Handshake {
            url: shown.to_owned(),
            failure,
            detail,
            source,
        }),
        None => ConnectFailure::Server(source),
    })
}
