//! Erasure: a redaction record in the chain, and the erased text scrubbed from every file.

use std::collections::HashSet;

use evicortex_core::{EvidenceDigest, Namespace, SessionId, TextDigest, TurnId};
use rusqlite::{Connection, TransactionBehavior, params};

use crate::{
    EraseError, Ledger,
    record::{content_digest, redaction_digest},
    store::{self, Head, KIND_REDACTION, KIND_TURN, sql_err},
};

/// What to erase. Every target names its namespace, so an erasure never crosses namespaces.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum EraseTarget {
    /// Every turn of a namespace.
    Namespace(Namespace),
    /// Every turn of one session of a namespace.
    Session(Namespace, SessionId),
    /// One record, which must be a turn of the namespace.
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
    /// The redaction record appended, or `None` when every matching turn was already erased
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
    /// The erased record.
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
    /// clears text, speaker and meta of those records in the same durable transaction, then
    /// scrubs the old bytes from every file of the ledger (secure delete, WAL checkpoint with
    /// truncation, vacuum). `verify` still passes afterwards.
    pub fn erase(&self, target: &EraseTarget) -> Result<EraseReceipt, EraseError> {
        let receipt = self.with_writer(
            |path| EraseError::ReadOnly { path },
            |conn| self.erase_in_transaction(conn, target),
        )?;
        self.scrub()?;
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
        let ns = target.namespace().as_str();
        let columns = "seq, kind, namespace, text, erased_by, digest, speaker, meta";
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
                EraseTarget::Record(_, id) => {
                    stmt = tx
                        .prepare(&format!("SELECT {columns} FROM records WHERE seq = ?1"))
                        .map_err(&sql)?;
                    stmt.query_map(params![id.raw() as i64], Match::from_row)
                }
            }
            .map_err(&sql)?;
            rows.collect::<Result<_, _>>().map_err(&sql)?
        };
        if matches.is_empty() {
            return Err(EraseError::NotFound { target: target.to_string() });
        }
        if let EraseTarget::Record(namespace, id) = target
            && matches.iter().any(|m| m.kind != KIND_TURN || m.namespace != ns)
        {
            return Err(EraseError::WrongNamespace { turn_id: *id, namespace: namespace.clone() });
        }
        let already_erased = matches.iter().filter(|m| m.erased_by.is_some()).count();
        let mut live = Vec::new();
        let mut contents = Vec::new();
        for m in matches.into_iter().filter(|m| m.erased_by.is_none()) {
            let id = TurnId::from_raw(m.seq as u64);
            let corrupt =
                |detail: &str| EraseError::Corrupted { turn_id: id, detail: detail.to_owned() };
            let digest = <[u8; 32]>::try_from(m.digest.as_slice())
                .map(EvidenceDigest::from_bytes)
                .map_err(|_| corrupt("column digest is not 32 bytes"))?;
            let text = m.text.ok_or_else(|| corrupt("a live turn has no text"))?;
            let meta = m.meta.ok_or_else(|| corrupt("a live turn has no meta"))?;
            contents.push(content_digest(m.speaker.as_deref(), &text, &meta));
            live.push(ErasedTurn {
                id,
                digest,
                text_digest: TextDigest::of(&text),
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
        let ingest_utc_micros = chrono::Utc::now().timestamp_micros();
        let listed: Vec<(TurnId, EvidenceDigest)> = live.iter().map(|e| (e.id, e.digest)).collect();
        let digest = redaction_digest(target, ingest_utc_micros, &listed);
        let chain = head.chain.link(&digest);
        let erased_seqs: Vec<u8> =
            listed.iter().flat_map(|(id, _)| id.raw().to_le_bytes()).collect();
        let (session, target_record) = match target {
            EraseTarget::Namespace(_) => (None, None),
            EraseTarget::Session(_, s) => (Some(s.as_str()), None),
            EraseTarget::Record(_, id) => (None, Some(id.raw() as i64)),
        };
        tx.execute(
            &format!(
                "INSERT INTO records (seq, kind, namespace, session, ingest_utc_us, target_record, \
                 erased_seqs, digest, chain) VALUES (?1, {KIND_REDACTION}, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"
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
            ],
        )
        .map_err(&sql)?;
        {
            let mut clear = tx
                .prepare(
                    "UPDATE records SET text = NULL, speaker = NULL, meta = NULL, erased_by = ?1, \
                     content_digest = ?2 WHERE seq = ?3",
                )
                .map_err(&sql)?;
            for (e, content) in live.iter().zip(&contents) {
                clear
                    .execute(params![redaction.raw() as i64, content.as_slice(), e.id.raw() as i64])
                    .map_err(&sql)?;
            }
        }
        store::write_head(&tx, Head { last: Some(redaction), chain }).map_err(&sql)?;
        let orphaned_texts = orphaned(&tx, &live).map_err(&sql)?;
        tx.commit().map_err(&sql)?;
        Ok(EraseReceipt {
            redaction: Some(redaction),
            erased: live,
            already_erased,
            orphaned_texts,
        })
    }

    /// Removes every trace of cleared bytes from the files: checkpoint the WAL into the main
    /// file and truncate it, rebuild the main file without free pages (`VACUUM`; with
    /// `secure_delete` freed cells are zeroed as well), and checkpoint again.
    pub fn scrub(&self) -> Result<(), EraseError> {
        self.with_writer(
            |path| EraseError::ReadOnly { path },
            |conn| {
                let sql = sql_err(self.path());
                checkpoint_truncate(conn, self)?;
                conn.execute_batch("VACUUM;").map_err(&sql)?;
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

#[derive(Debug)]
struct Match {
    seq: i64,
    kind: i64,
    namespace: String,
    text: Option<String>,
    erased_by: Option<i64>,
    digest: Vec<u8>,
    speaker: Option<String>,
    meta: Option<String>,
}

impl Match {
    fn from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Match> {
        Ok(Match {
            seq: r.get(0)?,
            kind: r.get(1)?,
            namespace: r.get(2)?,
            text: r.get(3)?,
            erased_by: r.get(4)?,
            digest: r.get(5)?,
            speaker: r.get(6)?,
            meta: r.get(7)?,
        })
    }
}
