//! Appending a batch of turns: atomic, durable before it returns, idempotent per turn.

use std::collections::HashMap;

use evicortex_core::{EvidenceDigest, Turn, TurnId};
use rusqlite::{OptionalExtension, TransactionBehavior, params};

use crate::{
    AppendError, Ledger,
    canonical_json::canonical_json,
    error::ConflictingRecord,
    record::turn_digest,
    store::{self, Head, KIND_TURN, sql_err},
};

/// What happened to each turn of an appended batch, in batch order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppendReceipt {
    /// One outcome per input turn, in input order.
    pub outcomes: Vec<AppendOutcome>,
    /// The last record of the ledger after the append.
    pub head: Option<TurnId>,
}

/// The outcome of one turn of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendOutcome {
    /// The record holding the turn.
    pub id: TurnId,
    /// The record's digest.
    pub digest: EvidenceDigest,
    /// Whether the turn was newly stored.
    pub status: AppendStatus,
}

/// Whether a turn was newly stored or already there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendStatus {
    /// Stored by this append.
    Appended,
    /// An identical turn was already stored (or given earlier in the batch); nothing changed.
    AlreadyPresent,
}

impl AppendReceipt {
    /// How many turns were newly stored.
    pub fn appended(&self) -> usize {
        self.outcomes.iter().filter(|o| o.status == AppendStatus::Appended).count()
    }

    /// How many turns were already present.
    pub fn already_present(&self) -> usize {
        self.outcomes.len() - self.appended()
    }
}

impl Ledger {
    /// Appends `turns` as one atomic, durable transaction: when this returns `Ok`, the batch is
    /// on disk (fsync'd); when it returns `Err`, nothing of it is. A turn identical to a stored
    /// one (same namespace, session, turn index and content) is a no-op; the same key with other
    /// content is an [`AppendError::Conflict`].
    pub fn append(&self, turns: &[Turn]) -> Result<AppendReceipt, AppendError> {
        for (index, turn) in turns.iter().enumerate() {
            validate(index, turn)?;
        }
        let metas: Vec<String> = turns
            .iter()
            .map(|t| canonical_json(&serde_json::Value::Object(t.meta.clone())))
            .collect();
        self.with_writer(
            |path| AppendError::ReadOnly { path },
            |conn| {
                let path = self.path();
                let sql = sql_err(path);
                let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(&sql)?;
                let mut head = store::read_meta(&tx)
                    .map_err(&sql)?
                    .parse()
                    .map_err(|detail| AppendError::Corrupted { turn_id: TurnId::from_raw(0), detail })?;
                let ingest_utc_micros = chrono::Utc::now().timestamp_micros();
                let mut outcomes = Vec::with_capacity(turns.len());
                let mut in_batch: HashMap<(&str, &str, u32), usize> = HashMap::new();
                {
                    let mut find = tx
                        .prepare_cached(
                            "SELECT seq, role, speaker, text, event_utc_us, event_offset_s, meta, \
                             erased_by, digest FROM records \
                             WHERE namespace = ?1 AND session = ?2 AND turn = ?3 AND kind = 1",
                        )
                        .map_err(&sql)?;
                    let mut insert = tx
                        .prepare_cached(
                            "INSERT INTO records (seq, kind, namespace, session, turn, role, speaker, \
                             text, event_utc_us, event_offset_s, ingest_utc_us, meta, digest, chain) \
                             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
                        )
                        .map_err(&sql)?;
                    for (index, turn) in turns.iter().enumerate() {
                        let key = (turn.namespace.as_str(), turn.session.as_str(), turn.turn.raw());
                        if let Some(&first) = in_batch.get(&key) {
                            if let Some(field) = first_difference(&turns[first], &metas[first], &Existing::from_turn(turn, &metas[index])) {
                                return Err(conflict(index, turn, ConflictingRecord::InBatch(first), field));
                            }
                            let prior: AppendOutcome = outcomes[first];
                            outcomes.push(AppendOutcome { status: AppendStatus::AlreadyPresent, ..prior });
                            continue;
                        }
                        in_batch.insert(key, index);
                        let existing = find
                            .query_row(
                                params![turn.namespace.as_str(), turn.session.as_str(), turn.turn.raw()],
                                |r| {
                                    Ok(Existing {
                                        seq: r.get(0)?,
                                        role: r.get(1)?,
                                        speaker: r.get(2)?,
                                        text: r.get(3)?,
                                        event_utc_us: r.get(4)?,
                                        event_offset_s: r.get(5)?,
                                        meta: r.get(6)?,
                                        erased_by: r.get(7)?,
                                        digest: r.get(8)?,
                                    })
                                },
                            )
                            .optional()
                            .map_err(&sql)?;
                        if let Some(existing) = existing {
                            let id = TurnId::from_raw(existing.seq as u64);
                            if existing.erased_by.is_some() {
                                return Err(AppendError::Erased {
                                    index,
                                    namespace: turn.namespace.clone(),
                                    session: turn.session.clone(),
                                    turn: turn.turn,
                                    existing: id,
                                });
                            }
                            if let Some(field) = first_difference(turn, &metas[index], &existing) {
                                return Err(conflict(index, turn, ConflictingRecord::Stored(id), field));
                            }
                            let digest = <[u8; 32]>::try_from(existing.digest.as_slice())
                                .map(EvidenceDigest::from_bytes)
                                .map_err(|_| AppendError::Corrupted {
                                    turn_id: id,
                                    detail: "column digest is not 32 bytes".to_owned(),
                                })?;
                            outcomes.push(AppendOutcome { id, digest, status: AppendStatus::AlreadyPresent });
                            continue;
                        }
                        let id = head.last.map_or(TurnId::from_raw(1), TurnId::next);
                        let digest = turn_digest(turn, ingest_utc_micros);
                        let chain = head.chain.link(&digest);
                        insert
                            .execute(params![
                                id.raw() as i64,
                                KIND_TURN,
                                turn.namespace.as_str(),
                                turn.session.as_str(),
                                turn.turn.raw(),
                                turn.role.as_str(),
                                turn.speaker.as_deref(),
                                turn.text.as_str(),
                                turn.time.utc_micros(),
                                turn.time.offset_seconds(),
                                ingest_utc_micros,
                                metas[index].as_str(),
                                digest.as_bytes().as_slice(),
                                chain.as_bytes().as_slice(),
                            ])
                            .map_err(&sql)?;
                        head = Head { last: Some(id), chain };
                        outcomes.push(AppendOutcome { id, digest, status: AppendStatus::Appended });
                    }
                }
                store::write_head(&tx, head).map_err(&sql)?;
                tx.commit().map_err(&sql)?;
                Ok(AppendReceipt { outcomes, head: head.last })
            },
        )
    }
}

/// What the ledger cannot store faithfully is refused, never rounded.
fn validate(index: usize, turn: &Turn) -> Result<(), AppendError> {
    let invalid = |field, reason: String| AppendError::InvalidTurn { index, field, reason };
    if !turn.time.as_datetime().timestamp_subsec_nanos().is_multiple_of(1_000) {
        return Err(invalid(
            "time",
            format!("{} has sub-microsecond precision; the ledger stores microseconds", turn.time),
        ));
    }
    if turn.time.offset_seconds() % 60 != 0 {
        return Err(invalid(
            "time",
            format!(
                "has a UTC offset of {} s, not a whole number of minutes; RFC 3339 cannot express it",
                turn.time.offset_seconds()
            ),
        ));
    }
    if turn.speaker.as_deref().is_some_and(str::is_empty) {
        return Err(invalid("speaker", "is empty; omit it instead".to_owned()));
    }
    Ok(())
}

/// The stored fields a new turn is compared with.
#[derive(Debug)]
struct Existing {
    seq: i64,
    role: Option<String>,
    speaker: Option<String>,
    text: Option<String>,
    event_utc_us: Option<i64>,
    event_offset_s: Option<i64>,
    meta: Option<String>,
    erased_by: Option<i64>,
    digest: Vec<u8>,
}

impl Existing {
    fn from_turn(turn: &Turn, meta: &str) -> Existing {
        Existing {
            seq: 0,
            role: Some(turn.role.as_str().to_owned()),
            speaker: turn.speaker.clone(),
            text: Some(turn.text.clone()),
            event_utc_us: Some(turn.time.utc_micros()),
            event_offset_s: Some(i64::from(turn.time.offset_seconds())),
            meta: Some(meta.to_owned()),
            erased_by: None,
            digest: Vec::new(),
        }
    }
}

/// The first field in which `turn` differs from what is stored, if any.
fn first_difference(turn: &Turn, meta: &str, existing: &Existing) -> Option<&'static str> {
    if existing.role.as_deref() != Some(turn.role.as_str()) {
        Some("role")
    } else if existing.speaker.as_deref() != turn.speaker.as_deref() {
        Some("speaker")
    } else if existing.text.as_deref() != Some(turn.text.as_str()) {
        Some("text")
    } else if existing.event_utc_us != Some(turn.time.utc_micros())
        || existing.event_offset_s != Some(i64::from(turn.time.offset_seconds()))
    {
        Some("time")
    } else if existing.meta.as_deref() != Some(meta) {
        Some("meta")
    } else {
        None
    }
}

fn conflict(
    index: usize,
    turn: &Turn,
    existing: ConflictingRecord,
    field: &'static str,
) -> AppendError {
    AppendError::Conflict {
        index,
        namespace: turn.namespace.clone(),
        session: turn.session.clone(),
        turn: turn.turn,
        existing,
        field,
    }
}
