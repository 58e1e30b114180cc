//! Erasure: a redaction record in the chain, the erased texts and salts cleared, then the old
//! bytes removed from the server's files (the table rewritten, the write-ahead log retired).

use std::time::{Duration, Instant};

use evicortex_ledger::{EraseError, EraseReceipt, EraseTarget, storage::erase_in};

use crate::{
    PgLedger,
    retention_check::retained_bytes,
    table::{LOCK_RECORDS, PgTable, SCRUB_PENDING},
};

/// How long a scrub waits for transactions and snapshots from before the erasure to end: while
/// one lives, the table rewrite must keep the old row versions (with their texts) for it.
const SNAPSHOT_WAIT: Duration = Duration::from_secs(30);

/// Erases `target` with the ledger crate's erasure in one transaction, then scrubs the server's
/// files (see [`PgLedger::scrub`]). Refused before anything is written on a read replica, and
/// on a server configured to keep the erased texts in its files.
pub(crate) fn erase(ledger: &PgLedger, target: &EraseTarget) -> Result<EraseReceipt, EraseError> {
    if ledger.is_replica() {
        return Err(EraseError::ReadOnlyReplica { server: ledger.url().to_owned() });
    }
    // Checked before anything is written: on such a server the erasure could not keep its
    // promise, and a committed redaction with texts left in the files is worse than none.
    let problems = retained_bytes(&mut *ledger.client())
        .map_err(ledger.db("reading the server's retention settings"))?;
    if !problems.is_empty() {
        return Err(EraseError::ServerRetainsBytes { problems });
    }
    let receipt = ledger.erase_in_transaction(target)?;
    // The redaction is committed: a failure from here on must say so.
    ledger.scrub().map_err(|e| e.after_commit(ledger.url().as_ref()))?;
    Ok(receipt)
}

impl PgLedger {
    fn erase_in_transaction(&self, target: &EraseTarget) -> Result<EraseReceipt, EraseError> {
        let mut client = self.client();
        let mut tx = client.transaction().map_err(self.db("starting an erasure"))?;
        tx.batch_execute(LOCK_RECORDS).map_err(self.db("locking the records table"))?;
        let receipt = erase_in(&mut PgTable::new(&mut tx, self), target)?;
        tx.commit().map_err(self.db("committing an erasure"))?;
        Ok(receipt)
    }

    /// Removes the old bytes of erased records from the server's files: waits until no
    /// transaction of the server that began before the erasure still runs and no session of
    /// this database holds a snapshot from before it (the rewrite would have to keep the old
    /// row versions for them; after 30 s, [`EraseError::ScrubIncomplete`]), rewrites the
    /// records table and its indexes (`VACUUM FULL`: the old files are truncated at once and
    /// unlinked at the next checkpoint), then `CHECKPOINT`, `pg_switch_wal()` and `CHECKPOINT`
    /// again, so every write-ahead log segment that held the texts (inserts, full-page images)
    /// lies before the redo point and is removed. Finally clears the scrub-pending mark.
    ///
    /// Needs a role that may run `CHECKPOINT` and `pg_switch_wal()` (a superuser, or
    /// `pg_checkpoint` plus EXECUTE on `pg_switch_wal`), and a server that removes old segments
    /// rather than keeping or recycling them: `wal_recycle = off`, `wal_keep_size = 0`, no
    /// replication slot or archiver holding them, and no statement logging with parameters
    /// ([`PgLedger`'s `erase`](evicortex_ledger::EvidenceLedger::erase) refuses such a server before writing anything; the scrub reports it
    /// as incomplete and leaves its mark for the next connect). A standby replays the rewrite
    /// but keeps the WAL it received until its next restartpoint (`CHECKPOINT` on the standby
    /// once it has replayed the erasure); on a read replica's handle this is refused, nothing
    /// sent. `VACUUM FULL` locks the table (reads and writes wait) while it copies it: its cost
    /// grows with the whole ledger.
    pub fn scrub(&self) -> Result<(), EraseError> {
        if self.is_replica() {
            return Err(EraseError::ReadOnlyReplica { server: self.url().to_owned() });
        }
        let mut client = self.client();
        let pending = crate::schema::meta_value(&mut *client, SCRUB_PENDING)
            .map_err(self.db("reading ledger_meta"))?;
        let erase_xid =
            pending.as_deref().and_then(|v| v.split_once(' ')).map(|(_, x)| x.to_owned());
        wait_for_old_snapshots(&mut client, erase_xid.as_deref(), self)?;
        for (sql, op) in [
            ("VACUUM FULL records", "rewriting the records table"),
            ("CHECKPOINT", "checkpointing"),
            ("SELECT pg_switch_wal()", "switching to a new write-ahead log segment"),
            ("CHECKPOINT", "checkpointing"),
        ] {
            // One statement per call: VACUUM cannot run inside a transaction block.
            client.batch_execute(sql).map_err(|e| EraseError::ScrubIncomplete {
                path: self.url().into(),
                detail: format!("{sql}: {}", self.db(op)(e)),
            })?;
        }
        // Settings changed since the erasure began would have kept what the steps removed.
        let problems = retained_bytes(&mut *client)
            .map_err(self.db("reading the server's retention settings"))?;
        if !problems.is_empty() {
            return Err(EraseError::ScrubIncomplete {
                path: self.url().into(),
                detail: problems.join("; "),
            });
        }
        client
            .execute("DELETE FROM ledger_meta WHERE key = $1", &[&SCRUB_PENDING])
            .map_err(self.db("clearing the scrub-pending mark"))?;
        Ok(())
    }
}

/// Waits (up to [`SNAPSHOT_WAIT`]) until the rewrite can drop the old row versions of the
/// erasing transaction `erase_xid` (of every transaction finished before the scrub began when it
/// is unknown): until no transaction of the whole server that started before it is still
/// running, and no session of this database holds a snapshot from before it. The first matters
/// even in other databases: `VACUUM FULL` keeps what its own snapshot may see, and a snapshot's
/// horizon is the oldest transaction still running anywhere on the server.
fn wait_for_old_snapshots(
    client: &mut postgres::Client,
    erase_xid: Option<&str>,
    ledger: &PgLedger,
) -> Result<(), EraseError> {
    // The first transaction id whose snapshots see the erasure.
    let target: String = match erase_xid.and_then(|x| x.parse::<u64>().ok()) {
        Some(xid) => (xid + 1).to_string(),
        None => client
            .query_one("SELECT pg_snapshot_xmax(pg_current_snapshot())::text", &[])
            .map_err(ledger.db("reading the next transaction id"))?
            .get(0),
    };
    let started = Instant::now();
    loop {
        let row = client
            .query_one(
                "SELECT pg_snapshot_xmin(pg_current_snapshot()) >= $1::text::xid8, \
                 ARRAY(SELECT pid FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND ( \
                     (backend_xid IS NOT NULL AND age(backend_xid) > age(xid($1::text::xid8))) \
                     OR (datname = current_database() AND backend_xmin IS NOT NULL \
                         AND age(backend_xmin) > age(xid($1::text::xid8)))) ORDER BY pid)",
                &[&target],
            )
            .map_err(ledger.db("looking for transactions older than the erasure"))?;
        let (horizon_passed, pids): (bool, Vec<i32>) = (row.get(0), row.get(1));
        if horizon_passed && pids.is_empty() {
            return Ok(());
        }
        if started.elapsed() >= SNAPSHOT_WAIT {
            let who = if pids.is_empty() {
                "a prepared transaction".to_owned()
            } else {
                let pids: Vec<String> = pids.iter().map(i32::to_string).collect();
                format!("server processes {}", pids.join(", "))
            };
            return Err(EraseError::ScrubIncomplete {
                path: ledger.url().into(),
                detail: format!(
                    "{who} still run transactions or hold snapshots from before the erasure, so \
                     the old row versions cannot be removed yet; erasing the same target again \
                     retries the scrub"
                ),
            });
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
