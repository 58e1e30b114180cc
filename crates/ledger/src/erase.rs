//! Erasure: a redaction record in the chain, and the erased text scrubbed from every file.

use std::collections::HashSet;

use evicortex_core::{EvidenceDigest, Namespace, SessionId, TextDigest, TurnId};
use rusqlite::{Connection, TransactionBehavior, params};

use crate::{
    EraseError, Ledger,
    record::{ContentSalt, Format, content_digest, redaction_digest},
    store::{
        self, Head, KIND_REDACTION, KIND_TURN, PREV_CHAIN, RECORD_COLUMNS, RawRecord, sql_err,
    },
};

/// What to erase. Every target names its namespace, so an erasure never crosses namespaces.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum EraseTarget {
    /// Every turn of a namespace.
    Namespace(Namespace),
    /// Every turn of one session of a namespace.
    Session(Namespace, SessionId),
    /// One record, by its number in the namespace; it must be a turn.
    Record(Namespace, TurnId),
}

impl EraseTarget {
    /// The namespace the target lies in.
    pub fn namespace(&self) -> &Namespace {
        match self {
            EraseTarget::Namespace(ns)
            | EraseTarget::Session(ns, _)
            | EraseTarget::Record(ns, _) => ns,
        }
    }
}

impl std::fmt::Display for EraseTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EraseTarget::Namespace(ns) => write!(f, "namespace {ns}"),
            EraseTarget::Session(ns, s) => write!(f, "namespace {ns} session {:?}", s.as_str()),
            EraseTarget::Record(ns, id) => write!(f, "namespace {ns} record {id}"),
        }
    }
}

/// What an erasure did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EraseReceipt {
    /// The number (in the target's namespace) of the redaction record appended, or `None` when every matching turn was already erased
    /// (the scrub of the files is still redone).
    pub redaction: Option<TurnId>,
    /// The turns erased by this call.
    pub erased: Vec<ErasedTurn>,
    /// Turns matching the target that an earlier erasure had already erased.
    pub already_erased: usize,
    /// Digests of erased texts that no live turn of any namespace still holds: derived stores
    /// keyed by text (embedding caches) must drop these.
    pub orphaned_texts: Vec<TextDigest>,
}

/// One turn erased by an [`EraseReceipt`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErasedTurn {
    /// The erased record's number in its namespace.
    pub id: TurnId,
    /// Its digest, still kept in the chain.
    pub digest: EvidenceDigest,
    /// The digest of its former text, for purging derived data keyed by text.
    pub text_digest: TextDigest,
    /// Its namespace.
    pub namespace: Namespace,
}

impl Ledger {
    /// Erases `target`: appends a redaction record naming every erased record and its digest,
    /// clears text, speaker, meta and content salt of those records in the same durable
    /// transaction (each keeps its salted content digest, which confirms no guessed text once
    /// the salt is gone), then scrubs the old bytes from every file of the ledger (secure
    /// delete, WAL checkpoint with truncation, vacuum). `verify` still passes afterwards. The
    /// last record and every erased record are checked against their digests first.
    pub fn erase(&self, target: &EraseTarget) -> Result<EraseReceipt, EraseError> {
        let receipt = self.with_writer(
            |path| EraseError::ReadOnly { path },
            |conn| self.erase_in_transaction(conn, target),
        )?;
        // The redaction is committed: a failure from here on must say so.
        self.scrub().map_err(|e| match e {
            EraseError::ScrubIncomplete { .. } => e,
            other => EraseError::ScrubIncomplete {
                path: self.path().to_owned(),
                detail: format!("{other}; erasing the same target again retries the scrub"),
            },
        })?;
        Ok(receipt)
    }

    fn erase_in_transaction(
        &self,
        conn: &mut Connection,
        target: &EraseTarget,
    ) -> Result<EraseReceipt, EraseError> {
        let sql = sql_err(self.path());
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(&sql)?;
        let head = store::read_meta(&tx)
            .map_err(&sql)?
            .parse()
            .map_err(|detail| EraseError::Corrupted { turn_id: TurnId::from_raw(0), detail })?;
        let corrupted =
            |c: store::Corrupt| EraseError::Corrupted { turn_id: c.turn_id, detail: c.detail };
        store::check_last_record(&tx, &head).map_err(&sql)?.map_err(corrupted)?;
        let ns = target.namespace().as_str();
        let columns = format!("{RECORD_COLUMNS}, {PREV_CHAIN}");
        let matches: Vec<Match> = {
            let mut stmt;
            let rows = match target {
                EraseTarget::Namespace(_) => {
                    stmt = tx
                        .prepare(&format!(
                            "SELECT {columns} FROM records WHERE kind = {KIND_TURN} AND namespace = ?1 ORDER BY seq"
                        ))
                        .map_err(&sql)?;
                    stmt.query_map(params![ns], Match::from_row)
                }
                EraseTarget::Session(_, session) => {
                    stmt = tx
                        .prepare(&format!(
                            "SELECT {columns} FROM records WHERE kind = {KIND_TURN} AND namespace = ?1 \
                             AND session = ?2 ORDER BY seq"
                        ))
                        .map_err(&sql)?;
                    stmt.query_map(params![ns, session.as_str()], Match::from_row)
                }
                EraseTarget::Record(_, number) => {
                    stmt = tx
                        .prepare(&format!(
                            "SELECT {columns} FROM records WHERE namespace = ?1 AND number = ?2"
                        ))
                        .map_err(&sql)?;
                    stmt.query_map(params![ns, number.raw() as i64], Match::from_row)
                }
            }
            .map_err(&sql)?;
            rows.collect::<Result<_, _>>().map_err(&sql)?
        };
        if matches.is_empty() {
            return Err(EraseError::NotFound { target: target.to_string() });
        }
        if let EraseTarget::Record(namespace, id) = target
            && matches
                .iter()
                .any(|m| m.raw.kind != Some(KIND_TURN) || m.raw.namespace.as_deref() != Some(ns))
        {
            return Err(EraseError::WrongNamespace { turn_id: *id, namespace: namespace.clone() });
        }
        // The chain commits to ledger positions: the redaction names its target record and the
        // records it erased by sequence number, while the receipt speaks the namespace's numbers.
        let chained_target = match target {
            EraseTarget::Record(namespace, _) => {
                EraseTarget::Record(namespace.clone(), matches[0].raw.id())
            }
            other => other.clone(),
        };
        let already_erased = matches.iter().filter(|m| m.raw.erased_by.is_some()).count();
        let mut live = Vec::new();
        let mut live_seqs = Vec::new();
        let mut contents = Vec::new();
        for Match { raw, prev_chain } in matches.into_iter().filter(|m| m.raw.erased_by.is_none()) {
            // What the redaction lists must be what the chain committed to.
            let record = raw.decode(Format::V2).map_err(corrupted)?;
            raw.check_turn(&record, prev_chain.as_deref()).map_err(corrupted)?;
            let (Some(text), Some(meta), Some(salt)) = (&raw.text, &raw.meta, &raw.salt) else {
                return Err(EraseError::Corrupted {
                    turn_id: raw.id(),
                    detail: "a live turn lacks its text, meta or salt".to_owned(),
                });
            };
            let salt = <[u8; 32]>::try_from(salt.as_slice()).map(ContentSalt::from_bytes).map_err(
                |_| EraseError::Corrupted {
                    turn_id: raw.id(),
                    detail: "column salt is not 32 bytes".to_owned(),
                },
            )?;
            contents.push(content_digest(
                Format::V2,
                Some(&salt),
                raw.speaker.as_deref(),
                text,
                meta,
            ));
            live_seqs.push(raw.id());
            live.push(ErasedTurn {
                id: raw.number().map_err(corrupted)?,
                digest: record.digest,
                text_digest: TextDigest::of(text),
                namespace: target.namespace().clone(),
            });
        }
        if live.is_empty() {
            tx.commit().map_err(&sql)?;
            return Ok(EraseReceipt {
                redaction: None,
                erased: live,
                already_erased,
                orphaned_texts: Vec::new(),
            });
        }
        let redaction = head.last.map_or(TurnId::from_raw(1), TurnId::next);
        let redaction_number = store::next_number(&tx, ns).map_err(&sql)?;
        let ingest_utc_micros = chrono::Utc::now().timestamp_micros();
        let listed: Vec<(TurnId, EvidenceDigest)> =
            live_seqs.iter().zip(&live).map(|(&seq, e)| (seq, e.digest)).collect();
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
                "INSERT INTO records (seq, kind, namespace, session, ingest_utc_us, target_record, \
                 erased_seqs, digest, chain, number) \
                 VALUES (?1, {KIND_REDACTION}, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"
            ),
            params![
                redaction.raw() as i64,
                ns,
                session,
                ingest_utc_micros,
                target_record,
                erased_seqs,
                digest.as_bytes().as_slice(),
                chain.as_bytes().as_slice(),
                redaction_number.raw() as i64,
            ],
        )
        .map_err(&sql)?;
        {
            let mut clear = tx
                .prepare(
                    "UPDATE records SET text = NULL, speaker = NULL, meta = NULL, salt = NULL, \
                     erased_by = ?1, content_digest = ?2 WHERE seq = ?3",
                )
                .map_err(&sql)?;
            for (seq, content) in live_seqs.iter().zip(&contents) {
                clear
                    .execute(params![redaction.raw() as i64, content.as_slice(), seq.raw() as i64])
                    .map_err(&sql)?;
            }
        }
        store::write_head(&tx, Head { last: Some(redaction), chain }).map_err(&sql)?;
        // A crash after this commit and before the scrub ends leaves old bytes in the files:
        // the next read-write open sees the mark and scrubs.
        store::mark_scrub_pending(&tx, redaction.raw()).map_err(&sql)?;
        let orphaned_texts = orphaned(&tx, &live).map_err(&sql)?;
        tx.commit().map_err(&sql)?;
        Ok(EraseReceipt {
            redaction: Some(redaction_number),
            erased: live,
            already_erased,
            orphaned_texts,
        })
    }

    /// Removes every trace of cleared bytes from the files: checkpoint the WAL into the main
    /// file and truncate it, rebuild the main file without free pages (`VACUUM`; with
    /// `secure_delete` freed cells are zeroed as well), and checkpoint again; then clears the
    /// erasure's scrub-pending mark. A read-write open runs it when the mark is set.
    pub fn scrub(&self) -> Result<(), EraseError> {
        self.with_writer(
            |path| EraseError::ReadOnly { path },
            |conn| {
                let sql = sql_err(self.path());
                checkpoint_truncate(conn, self)?;
                conn.execute_batch("VACUUM;").map_err(&sql)?;
                checkpoint_truncate(conn, self)?;
                // Only now are the old bytes gone from both files; the mark's removal is
                // checkpointed too, so the WAL is left empty.
                store::clear_scrub_pending(conn).map_err(&sql)?;
                checkpoint_truncate(conn, self)?;
                Ok(())
            },
        )
    }
}

fn checkpoint_truncate(conn: &Connection, ledger: &Ledger) -> Result<(), EraseError> {
    let (busy, _log, _done): (i64, i64, i64) = conn
        .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .map_err(sql_err(ledger.path()))?;
    if busy != 0 {
        return Err(EraseError::ScrubIncomplete {
            path: ledger.path().to_owned(),
            detail: "another connection holds a read snapshot; the WAL could not be checkpointed"
                .to_owned(),
        });
    }
    Ok(())
}

/// The erased texts no live turn still holds (one scan over live texts).
fn orphaned(conn: &Connection, erased: &[ErasedTurn]) -> rusqlite::Result<Vec<TextDigest>> {
    let mut remaining: HashSet<TextDigest> = erased.iter().map(|e| e.text_digest).collect();
    let mut stmt = conn.prepare(&format!(
        "SELECT text FROM records WHERE kind = {KIND_TURN} AND erased_by IS NULL AND text IS NOT NULL"
    ))?;
    let mut rows = stmt.query([])?;
    while let Some(row) = rows.next()? {
        if remaining.is_empty() {
            break;
        }
        if let rusqlite::types::ValueRef::Text(bytes) = row.get_ref(0)? {
            remaining.remove(&TextDigest::from_bytes(*blake3::hash(bytes).as_bytes()));
        }
    }
    let mut out: Vec<TextDigest> = remaining.into_iter().collect();
    out.sort();
    Ok(out)
}

/// A record matching the erase target, with the chain hash of the record before it.
#[derive(Debug)]
struct Match {
    raw: RawRecord,
    prev_chain: Option<Vec<u8>>,
}

impl Match {
    fn from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Match> {
        Ok(Match {
            raw: RawRecord::from_row(r)?,
            prev_chain: store::prev_chain_at(r, store::AFTER_RECORD_COLUMNS)?,
        })
    }
}
