//! A handle's one connection, shared behind a mutex and closed off any async runtime.
//!
//! The sync `postgres` client drives its connection on a runtime of its own and blocks on it,
//! also when dropped (to close the connection). On a thread that is driving a tokio runtime (a
//! server shutting down drops the facade there) that blocking panics, so the client is dropped
//! on a short-lived thread of its own, and the handle's drop waits for it.

use std::{
    ops::{Deref, DerefMut},
    sync::{Mutex, MutexGuard, PoisonError},
};

use postgres::Client;

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

/// The connection of a [`crate::PgLedger`] or [`crate::PgVectors`].
pub(crate) struct ClientCell(Mutex<Option<Client>>);

/// Exclusive use of the connection.
pub(crate) struct ClientGuard<'a>(MutexGuard<'a, Option<Client>>);

impl ClientCell {
    pub(crate) fn new(client: Client) -> ClientCell {
        ClientCell(Mutex::new(Some(client)))
    }

    /// The connection. A panic while it was held leaves no transaction open on it (the client
    /// rolls back a dropped transaction), so a poisoned lock is still usable.
    pub(crate) fn lock(&self) -> ClientGuard<'_> {
        ClientGuard(self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

impl Deref for ClientGuard<'_> {
    type Target = Client;
    fn deref(&self) -> &Client {
        self.0.as_ref().expect("the client is taken only when its cell is dropped")
    }
}

impl DerefMut for ClientGuard<'_> {
    fn deref_mut(&mut self) -> &mut Client {
        self.0.as_mut().expect("the client is taken only when its cell is dropped")
    }
}

impl Drop for ClientCell {
    fn drop(&mut self) {
        let Some(client) = self.0.get_mut().unwrap_or_else(PoisonError::into_inner).take() else {
            return;
        };
        // Should the thread not start, the closure, and the client with it, is dropped here.
        let closing =
            std::thread::Builder::new().name("postgres-close".into()).spawn(move || drop(client));
        if let Ok(closing) = closing {
            let _ = closing.join();
        }
    }
}
