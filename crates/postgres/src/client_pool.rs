//! A handle's connections: a small pool, so that concurrent calls on one handle (a server's
//! requests, each on a blocking thread) run side by side instead of queueing on one connection.
//!
//! The pool starts with the connection the handle was opened with and grows on demand, up to
//! the connection string's `pool_max` or [`default_max_connections`]. A connection the server
//! closed (a restart, a terminated backend) is replaced before a call gets it once the client
//! has seen it close: after a call failed on it, or, for one idle longer than [`IDLE_CHECK`],
//! by a round trip made before it is handed out. So a restart fails no call that comes after a
//! quiet spell, and at most one call per open connection during steady traffic.
//! When the pool cannot grow (the server at `max_connections`, a network fault), calls wait for
//! a connection in use, and the failure is logged: nothing fails that one connection would have
//! served, and growth is retried after [`GROWTH_BACKOFF`].
//!
//! The sync `postgres` client drives its connection on a runtime of its own and blocks on it,
//! also when dropped (to close the connection). On a thread that is driving a tokio runtime (a
//! server shutting down drops the facade there) that blocking panics, so clients are dropped on
//! a short-lived thread of their own, and the drop waits for it.

use std::{
    ops::{Deref, DerefMut},
    sync::{Condvar, Mutex, MutexGuard, PoisonError},
    time::{Duration, Instant},
};

use postgres::Client;

use crate::connect::{ConnectFailure, connect, pool_max};

/// A connection idle this long is checked with a round trip before a call gets it.
pub(crate) const IDLE_CHECK: Duration = Duration::from_secs(10);

/// How long that check waits for the server.
const CHECK_TIMEOUT: Duration = Duration::from_secs(2);

/// How long a pool that failed to open a connection waits before trying again.
pub(crate) const GROWTH_BACKOFF: Duration = Duration::from_secs(30);

/// The most connections one handle opens unless the connection string's `pool_max` says
/// otherwise: the machine's cores, at least 2 and at most 8 (a call is one query at a time, so
/// more connections than cores buy little and cost the server a backend each). A process with
/// a ledger and a vector store opens up to twice that.
pub(crate) fn default_max_connections() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get()).clamp(2, 8)
}

/// A read-only transaction over one snapshot (repeatable read): every read that must see the
/// ledger as of one moment starts with it.
pub(crate) fn read_snapshot(
    client: &mut Client,
) -> Result<postgres::Transaction<'_>, postgres::Error> {
    client
        .build_transaction()
        .isolation_level(postgres::IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
}

/// What every new connection runs before its first call (session settings).
pub(crate) type Setup = fn(&mut Client) -> Result<(), postgres::Error>;

/// The connections of a [`crate::PgLedger`] or [`crate::PgVectors`].
pub(crate) struct ClientPool {
    /// The connection string as given, password included: new connections need it. Never
    /// shown: errors and logs use `shown`.
    url: String,
    shown: String,
    setup: Setup,
    max: usize,
    /// [`IDLE_CHECK`], shorter in tests.
    idle_check: Duration,
    state: Mutex<State>,
    returned: Condvar,
}

struct State {
    /// Connections not in use, with when each came back.
    idle: Vec<(Client, Instant)>,
    /// Connections idle or in use.
    open: usize,
    /// No new connection is tried before this, after one failed.
    grow_after: Option<Instant>,
}

/// Exclusive use of one connection, returned to its pool when dropped.
pub(crate) struct ClientGuard<'a> {
    pool: &'a ClientPool,
    client: Option<Client>,
}

impl ClientPool {
    /// A pool holding `first`, an open connection to `url` on which `setup` has run; `shown` is
    /// `url` without its password.
    /// Its maximum is the string's `pool_max` (which [`connect`] has checked), else
    /// [`default_max_connections`].
    pub(crate) fn new(first: Client, url: &str, shown: &str, setup: Setup) -> ClientPool {
        let max = pool_max(url, shown).ok().flatten().unwrap_or_else(default_max_connections);
        ClientPool::with_max(first, url, shown, setup, max)
    }

    pub(crate) fn with_max(
        first: Client,
        url: &str,
        shown: &str,
        setup: Setup,
        max: usize,
    ) -> ClientPool {
        ClientPool {
            url: url.to_owned(),
            shown: shown.to_owned(),
            setup,
            max: max.max(1),
            idle_check: IDLE_CHECK,
            state: Mutex::new(State {
                idle: vec![(first, Instant::now())],
                open: 1,
                grow_after: None,
            }),
            returned: Condvar::new(),
        }
    }

    /// A connection: an idle one, else a new one while fewer than the maximum are open, else
    /// the first to come back. A panic while one was held leaves no transaction open on it
    /// (the client rolls back a dropped transaction), so a poisoned lock is still usable.
    pub(crate) fn lock(&self) -> ClientGuard<'_> {
        let mut state = self.state();
        loop {
            if let Some((client, since)) = state.idle.pop() {
                drop(state);
                return ClientGuard { pool: self, client: Some(self.renewed(client, since)) };
            }
            let may_grow = state.grow_after.is_none_or(|after| Instant::now() >= after);
            if state.open < self.max && may_grow {
                state.open += 1;
                drop(state);
                match self.open_one() {
                    Ok(client) => return ClientGuard { pool: self, client: Some(client) },
                    Err(reason) => {
                        state = self.state();
                        state.open -= 1;
                        state.grow_after = Some(Instant::now() + GROWTH_BACKOFF);
                        tracing::warn!(
                            server = %self.shown,
                            "could not open another connection ({reason}); calls share the \
                             {} open, and another is tried in {} s",
                            state.open,
                            GROWTH_BACKOFF.as_secs()
                        );
                        continue;
                    }
                }
            }
            state = self.returned.wait(state).unwrap_or_else(PoisonError::into_inner);
        }
    }

    #[cfg(test)]
    pub(crate) fn check_when_idle_for(mut self, idle: Duration) -> ClientPool {
        self.idle_check = idle;
        self
    }

    /// How many connections are open (idle or in use).
    #[cfg(test)]
    pub(crate) fn open_connections(&self) -> usize {
        self.state().open
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `client`, or a fresh connection in its place when the server has closed it. When no
    /// fresh one can be had, the closed one is handed out: the call fails with the client's
    /// own error, as it would have without the pool.
    fn renewed(&self, mut client: Client, idle_since: Instant) -> Client {
        let closed = client.is_closed()
            || (idle_since.elapsed() >= self.idle_check && client.is_valid(CHECK_TIMEOUT).is_err());
        if !closed {
            return client;
        }
        match self.open_one() {
            Ok(fresh) => {
                close_off_runtime(vec![client]);
                fresh
            }
            Err(reason) => {
                tracing::warn!(
                    server = %self.shown,
                    "the server closed a connection and reconnecting failed: {reason}"
                );
                client
            }
        }
    }

    fn open_one(&self) -> Result<Client, String> {
        let mut client = connect(&self.url, &self.shown).map_err(|failure| match failure {
            ConnectFailure::InvalidUrl(e) | ConnectFailure::Server(e) => e.to_string(),
            ConnectFailure::Tls(e) => e.to_string(),
        })?;
        match (self.setup)(&mut client) {
            Ok(()) => Ok(client),
            Err(e) => {
                close_off_runtime(vec![client]);
                Err(format!("setting up the session: {e}"))
            }
        }
    }
}

impl Deref for ClientGuard<'_> {
    type Target = Client;
    fn deref(&self) -> &Client {
        self.client.as_ref().expect("the client is taken only when the guard is dropped")
    }
}

impl DerefMut for ClientGuard<'_> {
    fn deref_mut(&mut self) -> &mut Client {
        self.client.as_mut().expect("the client is taken only when the guard is dropped")
    }
}

impl Drop for ClientGuard<'_> {
    fn drop(&mut self) {
        if let Some(client) = self.client.take() {
            self.pool.state().idle.push((client, Instant::now()));
            self.pool.returned.notify_one();
        }
    }
}

impl Drop for ClientPool {
    fn drop(&mut self) {
        let state = self.state.get_mut().unwrap_or_else(PoisonError::into_inner);
        close_off_runtime(std::mem::take(&mut state.idle).into_iter().map(|(c, _)| c).collect());
    }
}

/// Drops `clients` on a thread of its own (see the module's documentation) and waits for it.
fn close_off_runtime(clients: Vec<Client>) {
    if clients.is_empty() {
        return;
    }
    // Should the thread not start, the closure, and the clients with it, are dropped here.
    let closing =
        std::thread::Builder::new().name("postgres-close".into()).spawn(move || drop(clients));
    if let Ok(closing) = closing {
        let _ = closing.join();
    }
}

#[cfg(test)]
mod tests;
