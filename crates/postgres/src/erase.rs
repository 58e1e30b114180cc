//! Erasure: a redaction record in the chain, the erased texts and salts cleared, then the old
//! bytes removed from the server's files (the table rewritten, the write-ahead log retired).

use std::{
    collections::HashSet,
    time::{Duration, Instant},
};

use evicortex_core::{EvidenceDigest, TextDigest, TurnId};
use evicortex_ledger::{EraseReceipt, EraseTarget, ErasedTurn, LedgerPosition, redaction_digest};
use postgres::types::ToSql;

use crate::{
    EraseError, PgLedger,
    append::{LOCK_RECORDS, next_number},
    head::{self, Head},
    record_row::{Corrupt, PREV_CHAIN, PREV_CHAIN_COLUMN, RECORD_COLUMNS, RawRecord},
    retention_check::retained_bytes,
    schema::{KIND_REDACTION, KIND_TURN},
};

/// The `ledger_meta` key set in an erasure's transaction and removed once its scrub has
/// finished (value: the redaction's position and the erasing transaction's id): while present,
/// the old bytes may still be in the server's files, and the next connect scrubs.
pub(crate) const SCRUB_PENDING: &str = "scrub_pending";

/// How long a scrub waits for transactions and snapshots from before the erasure to end: while
/// one lives, the table rewrite must keep the old row versions (with their texts) for it.
const SNAPSHOT_WAIT: Duration = Duration::from_secs(30);

impl PgLedger {
    /// Erases `target` with the embedded ledger's semantics: appends a redaction record naming
    /// every erased record and its digest, and clears text, speaker, meta and content salt of
    /// those records, in one transaction (each keeps its salted content digest, so the chain
    /// still verifies and confirms no guessed text). Then scrubs the server's files (see
    /// [`PgLedger::scrub`]). A target whose turns were all erased before appends nothing and
    /// scrubs again. The last record and every erased record are checked against their digests
    /// first.
    ///
    /// On a read replica it is refused before anything is sent ([`EraseError::ReadOnlyReplica`]).
    pub fn erase(&self, target: &EraseTarget) -> Result<EraseReceipt, EraseError> {
        if self.is_replica() {
            return Err(EraseError::ReadOnlyReplica { url: self.url().to_owned() });
        }
        // Checked before anything is written: on such a server the erasure could not keep its
        // promise, and a committed redaction with texts left in the files is worse than none.
        let problems = retained_bytes(&mut *self.client())
            .map_err(self.db("reading the server's retention settings"))?;
        if !problems.is_empty() {
            return Err(EraseError::ServerRetainsBytes { problems });
        }
        let receipt = self.erase_in_transaction(target)?;
        // The redaction is committed: a failure from here on must say so.
        self.scrub().map_err(|e| match e {
            EraseError::ScrubIncomplete { .. } => e,
            other => EraseError::ScrubIncomplete {
                detail: format!("{other}; erasing the same target again retries the scrub"),
            },
        })?;
        Ok(receipt)
    }

    fn erase_in_transaction(&self, target: &EraseTarget) -> Result<EraseReceipt, EraseError> {
        let corrupted =
            |c: Corrupt| EraseError::Corrupted { position: c.position, detail: c.detail };
        let mut client = self.client();
        let mut tx = client.transaction().map_err(self.db("starting an erasure"))?;
        tx.batch_execute(LOCK_RECORDS).map_err(self.db("locking the records table"))?;
        let head =
            head::read_head(&mut tx).map_err(self.db("reading the head"))?.map_err(|detail| {
                EraseError::Corrupted { position: LedgerPosition::from_raw(0), detail }
            })?;
        head::check_last_record(&mut tx, &head)
            .map_err(self.db("checking the last record"))?
            .map_err(corrupted)?;
        let ns = target.namespace().as_str();
        let columns = format!("{RECORD_COLUMNS}, {PREV_CHAIN}");
        let rows = match target {
            EraseTarget::Namespace(_) => tx.query(
                &format!(
                    "SELECT {columns} FROM records WHERE kind = {KIND_TURN} AND namespace = $1 \
                     ORDER BY seq"
                ),
                &[&ns],
            ),
            EraseTarget::Session(_, session) => tx.query(
                &format!(
                    "SELECT {columns} FROM records WHERE kind = {KIND_TURN} AND namespace = $1 \
                     AND session = $2 ORDER BY seq"
                ),
                &[&ns, &session.as_str()],
            ),
            EraseTarget::Record(_, number) => tx.query(
                &format!("SELECT {columns} FROM records WHERE namespace = $1 AND number = $2"),
                &[&ns, &(number.raw() as i64)],
            ),
        }
        .map_err(self.db("finding the records to erase"))?;
        let mut matches = Vec::with_capacity(rows.len());
        for row in &rows {
            let raw = RawRecord::from_row(row).map_err(self.db("reading a record to erase"))?;
            let prev: Option<Vec<u8>> =
                row.try_get(PREV_CHAIN_COLUMN).map_err(self.db("reading a record to erase"))?;
            matches.push((raw, prev));
        }
        if matches.is_empty() {
            return Err(EraseError::NotFound { target: target.to_string() });
        }
        if let EraseTarget::Record(namespace, id) = target
            && matches.iter().any(|(raw, _)| raw.kind != KIND_TURN)
        {
            return Err(EraseError::NotATurn { turn_id: *id, namespace: namespace.clone() });
        }
        // The chain commits to positions: the redaction names its target record and the records
        // it erased by position, while the receipt speaks the namespace's numbers.
        let chained_target = match target {
            EraseTarget::Record(namespace, _) => {
                EraseTarget::Record(namespace.clone(), matches[0].0.seq_id())
            }
            other => other.clone(),
        };
        let already_erased = matches.iter().filter(|(raw, _)| raw.erased_by.is_some()).count();
        let mut live = Vec::new();
        let mut listed: Vec<(TurnId, EvidenceDigest)> = Vec::new();
        let mut contents = Vec::new();
        let mut texts = Vec::new();
        for (raw, prev) in matches.iter().filter(|(raw, _)| raw.erased_by.is_none()) {
            // What the redaction lists must be what the chain committed to.
            let record = raw.decode().map_err(corrupted)?;
            raw.check_turn(&record, prev.as_deref()).map_err(corrupted)?;
            let text = raw
                .text
                .clone()
                .ok_or_else(|| corrupted(raw.corrupt("a live turn lacks its text")))?;
            contents.push(raw.live_content_digest().map_err(corrupted)?);
            listed.push((raw.seq_id(), record.digest));
            live.push(ErasedTurn {
                id: raw.number().map_err(corrupted)?,
                digest: record.digest,
                text_digest: TextDigest::of(&text),
                namespace: target.namespace().clone(),
            });
            texts.push(text);
        }
        if live.is_empty() {
            tx.commit().map_err(self.db("ending an erasure"))?;
            return Ok(EraseReceipt {
                redaction: None,
                erased: live,
                already_erased,
                orphaned_texts: Vec::new(),
            });
        }
        let redaction = head.next_position();
        let redaction_number =
            next_number(&mut tx, ns).map_err(self.db("numbering the redaction record"))?;
        let ingest_utc_micros = chrono::Utc::now().timestamp_micros();
        let digest = redaction_digest(&chained_target, ingest_utc_micros, &listed);
        let chain = head.chain.link(&digest);
        let erased_seqs: Vec<u8> =
            listed.iter().flat_map(|(id, _)| id.raw().to_le_bytes()).collect();
        let (session, target_record) = match &chained_target {
            EraseTarget::Namespace(_) => (None, None),
            EraseTarget::Session(_, s) => (Some(s.as_str()), None),
            EraseTarget::Record(_, seq) => (None, Some(seq.raw() as i64)),
        };
        tx.execute(
            &format!(
                "INSERT INTO records (seq, kind, namespace, session, ingest_utc_us, \
                 target_record, erased_seqs, digest, chain, number) \
                 VALUES ($1, {KIND_REDACTION}, $2, $3, $4, $5, $6, $7, $8, $9)"
            ),
            &[
                &(redaction as i64),
                &ns,
                &session,
                &ingest_utc_micros,
                &target_record,
                &erased_seqs,
                &digest.as_bytes().as_slice(),
                &chain.as_bytes().as_slice(),
                &(redaction_number.raw() as i64),
            ],
        )
        .map_err(self.db("inserting the redaction record"))?;
        let clear = tx
            .prepare(
                "UPDATE records SET text = NULL, speaker = NULL, meta = NULL, salt = NULL, \
                 erased_by = $1, content_digest = $2 WHERE seq = $3",
            )
            .map_err(self.db("preparing the clearing of erased records"))?;
        for ((seq, _), content) in listed.iter().zip(&contents) {
            tx.execute(&clear, &[&(redaction as i64), &content.as_slice(), &(seq.raw() as i64)])
                .map_err(self.db("clearing an erased record"))?;
        }
        head::write_head(&mut tx, Head { last: Some(LedgerPosition::from_raw(redaction)), chain })
            .map_err(self.db("recording the head"))?;
        // Old row versions stay in the table until the scrub rewrites it; a crash before then
        // leaves this mark, and the next connect scrubs.
        let xid: String = tx
            .query_one("SELECT pg_current_xact_id()::text", &[])
            .map_err(self.db("reading the erasure's transaction id"))?
            .get(0);
        tx.execute(
            "INSERT INTO ledger_meta (key, value) VALUES ($1, $2) \
             ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
            &[&SCRUB_PENDING, &format!("{redaction} {xid}")],
        )
        .map_err(self.db("marking the scrub pending"))?;
        let still_held: Vec<String> = tx
            .query(
                &format!(
                    "SELECT DISTINCT text FROM records WHERE kind = {KIND_TURN} \
                     AND erased_by IS NULL AND text = ANY($1)"
                ),
                &[&texts as &(dyn ToSql + Sync)],
            )
            .map_err(self.db("finding texts still held by live turns"))?
            .iter()
            .map(|r| r.get(0))
            .collect();
        let held: HashSet<TextDigest> = still_held.iter().map(|t| TextDigest::of(t)).collect();
        let mut orphaned_texts: Vec<TextDigest> =
            live.iter().map(|e| e.text_digest).filter(|d| !held.contains(d)).collect();
        orphaned_texts.sort();
        orphaned_texts.dedup();
        tx.commit().map_err(self.db("committing an erasure"))?;
        Ok(EraseReceipt {
            redaction: Some(redaction_number),
            erased: live,
            already_erased,
            orphaned_texts,
        })
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
    /// ([`PgLedger::erase`] refuses such a server before writing anything; the scrub reports it
    /// as incomplete and leaves its mark for the next connect). A standby replays the rewrite
    /// but keeps the WAL it received until its next restartpoint (`CHECKPOINT` on the standby
    /// once it has replayed the erasure); on a read replica's handle this is refused, nothing
    /// sent. `VACUUM FULL` locks the table (reads and writes wait) while it copies it: its cost
    /// grows with the whole ledger.
    pub fn scrub(&self) -> Result<(), EraseError> {
        if self.is_replica() {
            return Err(EraseError::ReadOnlyReplica { url: self.url().to_owned() });
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
                detail: format!("{sql}: {}", self.db(op)(e)),
            })?;
        }
        // Settings changed since the erasure began would have kept what the steps removed.
        let problems = retained_bytes(&mut *client)
            .map_err(self.db("reading the server's retention settings"))?;
        if !problems.is_empty() {
            return Err(EraseError::ScrubIncomplete { detail: problems.join("; ") });
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
