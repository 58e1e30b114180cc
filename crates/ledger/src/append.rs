//! Appending a batch of turns: atomic, durable before it returns, idempotent per turn.

use std::{collections::HashMap, path::Path};

use evicortex_core::{EvidenceDigest, Turn, TurnId};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use crate::{
    AppendError, Ledger, LedgerPosition, StorageError,
    canonical_json::canonical_json,
    error::ConflictingRecord,
    record::{ContentSalt, Format, turn_digest},
    store::{self, Head, KIND_TURN, PREV_CHAIN, RECORD_COLUMNS, RawRecord, sql_err},
};

/// What happened to each turn of an appended batch, in batch order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppendReceipt {
    /// One outcome per input turn, in input order.
    pub outcomes: Vec<AppendOutcome>,
    /// The position of the ledger's last record after the append.
    pub head: Option<LedgerPosition>,
}

/// The outcome of one turn of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendOutcome {
    /// The record holding the turn: its number in the turn's namespace.
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
    /// content is an [`AppendError::Conflict`]. The records the append builds on (the last
    /// record, and every stored turn it answers as already present) are checked against their
    /// digests and chain links first; a mismatch is [`AppendError::Corrupted`].
    pub fn append(&self, turns: &[Turn]) -> Result<AppendReceipt, AppendError> {
        let mut results = self.append_group(&[turns])?;
        results.pop().expect("one result per batch")
    }

    /// Group commit: appends several independent batches in ONE durable transaction (one
    /// fsync), in order, each all-or-nothing on its own as [`Ledger::append`] makes it. A batch
    /// that is refused (invalid turn, conflict, erased turn, corrupted stored turn) is rolled
    /// back to its savepoint and gets its error; the other batches are committed. A batch sees
    /// the batches before it, exactly as if they had been appended one after the other. When
    /// the transaction itself fails (storage), nothing is stored and the outer `Err` says why.
    pub fn append_group(
        &self,
        batches: &[&[Turn]],
    ) -> Result<Vec<Result<AppendReceipt, AppendError>>, AppendError> {
        let metas: Vec<Result<Vec<String>, AppendError>> =
            batches.iter().map(|turns| validated_metas(turns)).collect();
        self.with_writer(
            |path| AppendError::ReadOnly { path },
            |conn| {
                let path = self.path();
                let sql = sql_err(path);
                let mut tx =
                    conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(&sql)?;
                let mut head = store::read_meta(&tx).map_err(&sql)?.parse().map_err(|detail| {
                    AppendError::Corrupted { turn_id: TurnId::from_raw(0), detail }
                })?;
                store::check_last_record(&tx, &head)
                    .map_err(&sql)?
                    .map_err(|c| AppendError::Corrupted { turn_id: c.turn_id, detail: c.detail })?;
                let ingest_utc_micros = chrono::Utc::now().timestamp_micros();
                let mut results = Vec::with_capacity(batches.len());
                for (turns, metas) in batches.iter().zip(metas) {
                    let metas = match metas {
                        Ok(metas) => metas,
                        Err(refused) => {
                            results.push(Err(refused));
                            continue;
                        }
                    };
                    let savepoint = tx.savepoint().map_err(&sql)?;
                    match append_batch(&savepoint, path, head, turns, &metas, ingest_utc_micros) {
                        Ok((receipt, new_head)) => {
                            savepoint.commit().map_err(&sql)?;
                            head = new_head;
                            results.push(Ok(receipt));
                        }
                        // A storage failure fails the whole transaction; a refusal only its batch.
                        Err(AppendError::Storage(failure)) => {
                            return Err(AppendError::Storage(failure));
                        }
                        Err(refused) => {
                            drop(savepoint);
                            results.push(Err(refused));
                        }
                    }
                }
                store::write_head(&tx, head).map_err(&sql)?;
                tx.commit().map_err(&sql)?;
                Ok(results)
            },
        )
    }

    /// Checks `turns` exactly as [`Ledger::append`] would (validity, conflicts within the batch
    /// and with stored turns, erased turns, the digests of the stored turns it would answer as
    /// present) against one snapshot of the ledger, without writing anything. Returns how many
    /// turns would be new. A caller that commits a long input in several batches checks it
    /// whole first, so that a conflict near its end refuses it before anything is stored.
    pub fn check_append(&self, turns: &[Turn]) -> Result<usize, AppendError> {
        let metas = validated_metas(turns)?;
        let mut conn = self.reader()?;
        let sql = sql_err(self.path());
        let tx = conn.transaction().map_err(&sql)?;
        let plans = plan(&tx, self.path(), turns, &metas)?;
        Ok(plans.iter().filter(|p| matches!(p, Plan::New)).count())
    }
}

/// Plans and inserts one batch after `head` inside the open transaction `conn`; returns its
/// receipt and the new head. On `Err` the caller rolls the batch back.
fn append_batch(
    conn: &Connection,
    path: &Path,
    mut head: Head,
    turns: &[Turn],
    metas: &[String],
    ingest_utc_micros: i64,
) -> Result<(AppendReceipt, Head), AppendError> {
    let sql = sql_err(path);
    let plans = plan(conn, path, turns, metas)?;
    let mut outcomes: Vec<AppendOutcome> = Vec::with_capacity(turns.len());
    let mut insert = conn
        .prepare_cached(
            "INSERT INTO records (seq, kind, namespace, session, turn, role, speaker, text, \
             event_utc_us, event_offset_s, ingest_utc_us, meta, digest, chain, salt, number) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
        )
        .map_err(&sql)?;
    // Read inside this batch's savepoint, so a rolled-back batch gives its numbers back.
    let mut next_numbers: HashMap<&str, TurnId> = HashMap::new();
    for ((index, turn), planned) in turns.iter().enumerate().zip(plans) {
        let outcome = match planned {
            Plan::Present(outcome) => outcome,
            Plan::SameAsEarlier(first) => {
                AppendOutcome { status: AppendStatus::AlreadyPresent, ..outcomes[first] }
            }
            Plan::New => {
                let seq = head.last.map_or(TurnId::from_raw(1), TurnId::next);
                let namespace = turn.namespace.as_str();
                let number = match next_numbers.get(namespace) {
                    Some(&next) => next,
                    None => store::next_number(conn, namespace).map_err(&sql)?,
                };
                next_numbers.insert(namespace, number.next());
                let salt = ContentSalt::random().map_err(|e| {
                    AppendError::Storage(StorageError::Io {
                        op: "drawing a random content salt for",
                        path: path.to_owned(),
                        source: std::io::Error::other(e.to_string()),
                    })
                })?;
                let digest = turn_digest(turn, ingest_utc_micros, &salt);
                let chain = head.chain.link(&digest);
                insert
                    .execute(params![
                        seq.raw() as i64,
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
                        salt.as_bytes().as_slice(),
                        number.raw() as i64,
                    ])
                    .map_err(&sql)?;
                head = Head { last: Some(seq), chain };
                AppendOutcome { id: number, digest, status: AppendStatus::Appended }
            }
        };
        outcomes.push(outcome);
    }
    let position = head.last.map(|seq| LedgerPosition::from_raw(seq.raw()));
    Ok((AppendReceipt { outcomes, head: position }, head))
}

/// What an append does with one turn of its batch.
enum Plan {
    /// Store it as a new record.
    New,
    /// An identical turn is stored.
    Present(AppendOutcome),
    /// An identical turn comes earlier in the batch (its position).
    SameAsEarlier(usize),
}

fn validated_metas(turns: &[Turn]) -> Result<Vec<String>, AppendError> {
    for (index, turn) in turns.iter().enumerate() {
        validate_turn(index, turn)?;
    }
    Ok(turns.iter().map(|t| canonical_json(&serde_json::Value::Object(t.meta.clone()))).collect())
}

/// Decides, against the ledger as `conn` sees it, what to do with each turn; refuses the batch
/// on the first conflict, erased turn or corrupted stored turn.
fn plan(
    conn: &Connection,
    path: &Path,
    turns: &[Turn],
    metas: &[String],
) -> Result<Vec<Plan>, AppendError> {
    let sql = sql_err(path);
    let mut find = conn
        .prepare_cached(&format!(
            "SELECT {RECORD_COLUMNS}, {PREV_CHAIN} FROM records \
             WHERE namespace = ?1 AND session = ?2 AND turn = ?3 AND kind = {KIND_TURN}"
        ))
        .map_err(&sql)?;
    let mut in_batch: HashMap<(&str, &str, u32), usize> = HashMap::new();
    let mut plans = Vec::with_capacity(turns.len());
    for (index, turn) in turns.iter().enumerate() {
        let key = (turn.namespace.as_str(), turn.session.as_str(), turn.turn.raw());
        if let Some(&first) = in_batch.get(&key) {
            let earlier = Existing::from_turn(&turns[first], &metas[first]);
            if let Some(field) = first_difference(turn, &metas[index], &earlier) {
                return Err(conflict(index, turn, ConflictingRecord::InBatch(first), field));
            }
            plans.push(Plan::SameAsEarlier(first));
            continue;
        }
        in_batch.insert(key, index);
        let stored = find
            .query_row(params![key.0, key.1, key.2], |r| {
                Ok((RawRecord::from_row(r)?, store::prev_chain_at(r, store::AFTER_RECORD_COLUMNS)?))
            })
            .optional()
            .map_err(&sql)?;
        let Some((raw, prev_chain)) = stored else {
            plans.push(Plan::New);
            continue;
        };
        let corrupted =
            |c: store::Corrupt| AppendError::Corrupted { turn_id: c.turn_id, detail: c.detail };
        let id = raw.number().map_err(corrupted)?;
        if raw.erased_by.is_some() {
            return Err(AppendError::Erased {
                index,
                namespace: turn.namespace.clone(),
                session: turn.session.clone(),
                turn: turn.turn,
                existing: id,
            });
        }
        let record = raw.decode(Format::V2).map_err(corrupted)?;
        raw.check_turn(&record, prev_chain.as_deref()).map_err(corrupted)?;
        if let Some(field) = first_difference(turn, &metas[index], &Existing::from_raw(&raw)) {
            return Err(conflict(index, turn, ConflictingRecord::Stored(id), field));
        }
        plans.push(Plan::Present(AppendOutcome {
            id,
            digest: record.digest,
            status: AppendStatus::AlreadyPresent,
        }));
    }
    Ok(plans)
}

/// Refuses, as [`AppendError::InvalidTurn`] naming the field, what the ledger cannot store
/// faithfully (a leap second, sub-microsecond time, an offset that is not whole minutes, an
/// empty speaker): never rounded. `index` is the turn's position in its batch. Other ledger back
/// ends call it so that they refuse exactly what this one refuses.
pub fn validate_turn(index: usize, turn: &Turn) -> Result<(), AppendError> {
    let invalid = |field, reason: String| AppendError::InvalidTurn { index, field, reason };
    let nanos = turn.time.as_datetime().timestamp_subsec_nanos();
    if nanos >= 1_000_000_000 {
        return Err(invalid(
            "time",
            format!("{} is a leap second, which the ledger cannot store", turn.time),
        ));
    }
    if !nanos.is_multiple_of(1_000) {
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
struct Existing<'a> {
    role: Option<&'a str>,
    speaker: Option<&'a str>,
    text: Option<&'a str>,
    event_utc_us: Option<i64>,
    event_offset_s: Option<i64>,
    meta: Option<&'a str>,
}

impl<'a> Existing<'a> {
    fn from_turn(turn: &'a Turn, meta: &'a str) -> Existing<'a> {
        Existing {
            role: Some(turn.role.as_str()),
            speaker: turn.speaker.as_deref(),
            text: Some(&turn.text),
            event_utc_us: Some(turn.time.utc_micros()),
            event_offset_s: Some(i64::from(turn.time.offset_seconds())),
            meta: Some(meta),
        }
    }

    fn from_raw(raw: &'a RawRecord) -> Existing<'a> {
        Existing {
            role: raw.role.as_deref(),
            speaker: raw.speaker.as_deref(),
            text: raw.text.as_deref(),
            event_utc_us: raw.event_utc_us,
            event_offset_s: raw.event_offset_s,
            meta: raw.meta.as_deref(),
        }
    }
}

/// The first field in which `turn` differs from what is stored, if any.
fn first_difference(turn: &Turn, meta: &str, existing: &Existing) -> Option<&'static str> {
    if existing.role != Some(turn.role.as_str()) {
        Some("role")
    } else if existing.speaker != turn.speaker.as_deref() {
        Some("speaker")
    } else if existing.text != Some(turn.text.as_str()) {
        Some("text")
    } else if existing.event_utc_us != Some(turn.time.utc_micros())
        || existing.event_offset_s != Some(i64::from(turn.time.offset_seconds()))
    {
        Some("time")
    } else if existing.meta != Some(meta) {
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
