//! Running the HTTP server: accept on a listener until a shutdown signal, then drain.

use std::future::Future;
use std::time::Duration;

use tokio::net::TcpListener;

use crate::{AppState, router};

/// Why the server stopped other than by a clean drain.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// Accepting or serving failed.
    #[error("http server: {0}")]
    Io(#[from] std::io::Error),
    /// In-flight requests did not finish within the drain timeout after the shutdown signal.
    /// Requests cut off were never acknowledged; every acknowledged write is on disk.
    #[error("in-flight requests did not finish within {0:?} after the shutdown signal")]
    DrainTimeout(Duration),
}

/// Serves the API on `listener` until `shutdown` completes, then stops accepting, lets in-flight
/// requests finish (at most `drain_timeout`) and returns. Writes acknowledged before the signal
/// are durable; so are writes that complete during the drain.
pub async fn serve_http(
    listener: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
    drain_timeout: Duration,
) -> Result<(), ServeError> {
    let (signalled_tx, mut signalled_rx) = tokio::sync::watch::channel(false);
    let graceful = async move {
        shutdown.await;
        tracing::info!("shutdown signal received, draining in-flight requests");
        // The receiver lives until the end of this function, so the send cannot fail.
        signalled_tx.send_replace(true);
    };
    let server = axum::serve(listener, router(state)).with_graceful_shutdown(graceful);
    let deadline = async move {
        // An error means the sender is gone, which happens only once the server has finished.
        if signalled_rx.wait_for(|signalled| *signalled).await.is_ok() {
            tokio::time::sleep(drain_timeout).await;
        } else {
            std::future::pending::<()>().await;
        }
    };
    tokio::select! {
        served = server => Ok(served?),
        () = deadline => Err(ServeError::DrainTimeout(drain_timeout)),
    }
}

/// Completes on SIGTERM or SIGINT (Ctrl-C).
pub async fn termination_signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::error!("cannot listen for ctrl-c: {e}");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut sigterm) => {
                sigterm.recv().await;
            }
            Err(e) => {
                tracing::error!("cannot listen for SIGTERM: {e}");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}
