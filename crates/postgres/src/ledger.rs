//! The handle: a small pool of connections to the server (`client_pool.rs`).

use std::{ops::ControlFlow, path::Path};

use evicortex_core::{Evidence, Namespace, Turn, TurnId};
use evicortex_ledger::{
    AppendError, AppendReceipt, EraseError, EraseReceipt, EraseTarget, EvidenceLedger,
    EvidenceScan, LedgerPosition, LedgerStats, ReadError, VerifyError, VerifyReport,
    storage::check_last_record,
};

use crate::{
    ConnectError, DatabaseError,
    client_pool::{ClientGuard, ClientPool, Setup},
    connect::connect,
    head, redact_password, schema,
    table::{PgTable, SCRUB_PENDING},
};

/// A ledger in a PostgreSQL database. `Send + Sync`: concurrent calls run on connections of
/// their own (a pool that grows on demand, up to the machine's cores, at most 8), and a
/// connection the server dropped is replaced on its next use. Several handles (processes,
/// machines) may write the same database: each write locks the records table, so the ledger
/// stays one chain.
pub struct PgLedger {
    client: ClientPool,
    url: String,
    /// Connected to a hot standby: every write is refused before it reaches the server.
    replica: bool,
}

impl std::fmt::Debug for PgLedger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgLedger")
            .field("url", &self.url)
            .field("replica", &self.replica)
            .finish_non_exhaustive()
    }
}

impl PgLedger {
    /// Connects to the database named by `url` (a `postgres://` URL or a key-value connection
    /// string; TLS as its `sslmode` and `sslrootcert` say, the certificate always verified:
    /// see the crate's documentation), creates the ledger schema in an empty database or checks
    /// the one found, and checks the recorded head against the last record. Fails closed: no server answering,
    /// a refused login, a schema of another version (left unchanged) or a head that does not
    /// match are errors naming the server (never its password). An erasure whose scrub was
    /// interrupted is scrubbed before this returns.
    ///
    /// On a read replica (a hot standby: `pg_is_in_recovery()`) nothing is written: the schema
    /// and head are only checked, a database without the ledger is
    /// [`ConnectError::ReplicaWithoutLedger`], an unfinished scrub is left to the primary, and
    /// the handle refuses appends, imports and erasures (see [`PgLedger::is_replica`]).
    pub fn connect(url: &str) -> Result<PgLedger, ConnectError> {
        let shown = redact_password(url);
        let mut client =
            connect(url, &shown).map_err(|failure| crate::error::connect_error(failure, &shown))?;
        let replica: bool = client
            .query_one("SELECT pg_is_in_recovery()", &[])
            .map_err(|source| DatabaseError {
                url: shown.clone(),
                op: "asking whether the server is a standby",
                source,
            })?
            .get(0);
        let setup: Setup = if replica {
            schema::check_on_replica(&mut client, &shown)?;
            |_| Ok(())
        } else {
            durable_commit(&mut client).map_err(|source| DatabaseError {
                url: shown.clone(),
                op: "setting synchronous_commit",
                source,
            })?;
            schema::ensure(&mut client, &shown)?;
            durable_commit
        };
        let client = ClientPool::new(client, url, &shown, setup);
        let ledger = PgLedger { client, url: shown, replica };
        ledger.check_head()?;
        // A replica replays the primary's scrub when the primary finishes it.
        if !replica && ledger.scrub_pending()? {
            ledger.scrub().map_err(|e| ConnectError::ScrubPending {
                url: ledger.url.clone(),
                detail: e.to_string(),
            })?;
        }
        Ok(ledger)
    }

    /// Whether this handle is connected to a read replica (a hot standby, as found on
    /// connect): it reads and verifies what the standby has replayed, and refuses appends,
    /// imports and erasures before sending anything (they go to the primary).
    pub fn is_replica(&self) -> bool {
        self.replica
    }

    /// The connection string, without its password.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// A connection of the pool, for one call.
    pub(crate) fn client(&self) -> ClientGuard<'_> {
        self.client.lock()
    }

    /// Maps a client error to a [`DatabaseError`] naming this ledger's server and `op`.
    pub(crate) fn db(&self, op: &'static str) -> impl Fn(postgres::Error) -> DatabaseError + '_ {
        move |source| DatabaseError { url: self.url.clone(), op, source }
    }

    fn check_head(&self) -> Result<(), ConnectError> {
        let mut client = self.client();
        let mut tx = crate::client_pool::read_snapshot(&mut client)
            .map_err(self.db("starting the head check"))?;
        let corrupted = |detail: String| ConnectError::Corrupted { url: self.url.clone(), detail };
        let head =
            head::read_head(&mut tx).map_err(self.db("reading the head"))?.map_err(corrupted)?;
        check_last_record(&mut PgTable::new(&mut tx, self), &head)
            .map_err(ConnectError::Storage)?
            .map_err(|c| corrupted(format!("the record at {}: {}", c.position, c.detail)))?;
        tx.commit().map_err(self.db("ending the head check"))?;
        Ok(())
    }

    fn scrub_pending(&self) -> Result<bool, ConnectError> {
        let mut client = self.client();
        Ok(schema::meta_value(&mut *client, SCRUB_PENDING)
            .map_err(self.db("reading ledger_meta"))?
            .is_some())
    }
}

/// The ledger crate's one ledger on this store: its checks, append and erasure logic and error
/// enums, over a `PgTable` per transaction. Appends and erasures are refused on a read
/// replica before anything is sent (the enums' `ReadOnlyReplica`); an erasure is refused on a
/// server that would keep the erased texts in its files (`EraseError::ServerRetainsBytes`),
/// and after committing scrubs them (see [`PgLedger::scrub`]).
impl EvidenceLedger for PgLedger {
    fn location(&self) -> &Path {
        Path::new(&self.url)
    }

    fn append_group(
        &self,
        batches: &[&[Turn]],
    ) -> Result<Vec<Result<AppendReceipt, AppendError>>, AppendError> {
        crate::append::append_group(self, batches)
    }

    fn check_append(&self, turns: &[Turn]) -> Result<usize, AppendError> {
        crate::append::check_append(self, turns)
    }

    fn erase(&self, target: &EraseTarget) -> Result<EraseReceipt, EraseError> {
        crate::erase::erase(self, target)
    }

    fn verify_with_progress(
        &self,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<VerifyReport, VerifyError> {
        crate::verify::verify_with_progress(self, progress)
    }

    fn stats(&self) -> Result<LedgerStats, ReadError> {
        crate::summary_reads::stats(self)
    }

    fn scan_evidence(
        &self,
        scan: EvidenceScan<'_>,
        visit: &mut dyn FnMut(LedgerPosition, Evidence) -> ControlFlow<()>,
    ) -> Result<u64, ReadError> {
        crate::read::scan_evidence(self, scan, visit)
    }

    fn head(&self) -> Result<Option<LedgerPosition>, ReadError> {
        crate::read::head(self)
    }

    fn namespace_head(&self, namespace: &Namespace) -> Result<Option<TurnId>, ReadError> {
        crate::read::namespace_head(self, namespace)
    }

    fn namespaces(&self) -> Result<Vec<Namespace>, ReadError> {
        crate::read::namespaces(self)
    }

    fn erased_after(&self, after: Option<LedgerPosition>) -> Result<bool, ReadError> {
        crate::summary_reads::erased_after(self, after)
    }

    fn last_erasure(&self, namespace: &Namespace) -> Result<Option<TurnId>, ReadError> {
        crate::summary_reads::last_erasure(self, namespace)
    }
}

/// An acknowledged append must survive a crash of the server: a database or role whose default
/// waits for no flush is overridden for this session (stronger settings, which wait for
/// standbys, are kept). Run on every connection of the pool.
pub(crate) fn durable_commit(client: &mut postgres::Client) -> Result<(), postgres::Error> {
    let commit: String =
        client.query_one("SELECT current_setting('synchronous_commit')", &[])?.get(0);
    if commit == "off" {
        client.batch_execute("SET synchronous_commit = on")?;
    }
    Ok(())
}
