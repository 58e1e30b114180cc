//! Appending a batch of turns: atomic, durable before it returns, idempotent per turn.

use std::collections::{HashMap, HashSet};

use evicortex_core::{EvidenceDigest, Turn, TurnId};
use rusqlite::TransactionBehavior;

use crate::{
    AppendError, Ledger, LedgerPosition,
    canonical_json::canonical_json,
    error::ConflictingRecord,
    record::{ContentSalt, turn_digest},
    row::{Corrupt, RawRecord},
    store::{SqliteTable, sql_err},
    table::{Head, NewTurn, RecordTable, TurnKey, checked_head},
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

/// Each batch's metas as canonical JSON, or why the batch is refused: its turns checked as the
/// ledger checks them ([`validate_turn`]) and as the store `T` can hold them. Done before the
/// write transaction starts, so that the writer lock is not held for it.
pub fn canonical_metas<T: RecordTable + ?Sized>(
    turns: &[Turn],
) -> Result<Vec<String>, AppendError> {
    for (index, turn) in turns.iter().enumerate() {
        validate_turn(index, turn)?;
        T::refuse_unstorable(index, turn)?;
    }
    Ok(turns.iter().map(|t| canonical_json(&serde_json::Value::Object(t.meta.clone()))).collect())
}

/// Group commit inside `table`'s write transaction, which the caller commits on `Ok`: appends
/// each batch (with its metas from [`canonical_metas`]) in order, each all-or-nothing under a
/// savepoint of its own. A batch that is refused (invalid turn, conflict, erased turn,
/// corrupted stored turn) is rolled back alone and gets its error; a batch sees the batches
/// before it. A storage failure fails the whole group (the outer `Err`): then the caller rolls
/// the transaction back and nothing is stored. The last record is checked first.
pub fn append_group_in<T: RecordTable + ?Sized>(
    table: &mut T,
    batches: &[&[Turn]],
    metas: Vec<Result<Vec<String>, AppendError>>,
) -> Result<Vec<Result<AppendReceipt, AppendError>>, AppendError> {
    let mut head = checked_head(table, corrupted)?;
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
        table.savepoint()?;
        match append_batch(table, head, turns, &metas, ingest_utc_micros) {
            Ok((receipt, new_head)) => {
                table.release_savepoint()?;
                head = new_head;
                results.push(Ok(receipt));
            }
            // A storage failure fails the whole transaction; a refusal only its batch.
            Err(AppendError::Storage(failure)) => return Err(AppendError::Storage(failure)),
            Err(refused) => {
                table.rollback_to_savepoint()?;
                results.push(Err(refused));
            }
        }
    }
    table.write_head(head)?;
    Ok(results)
}

/// Checks `turns` exactly as an append would (validity, conflicts within the batch and with
/// stored turns, erased turns, the digests of the stored turns it would answer as present)
/// against the snapshot `table` reads, writing nothing. Returns how many turns would be new.
pub fn check_append_in<T: RecordTable + ?Sized>(
    table: &mut T,
    turns: &[Turn],
) -> Result<usize, AppendError> {
    let metas = canonical_metas::<T>(turns)?;
    let plans = plan(table, turns, &metas)?;
    Ok(plans.iter().filter(|p| matches!(p, Plan::New)).count())
}

/// [`crate::EvidenceLedger::append_group`] on the embedded ledger: one durable transaction
/// (one fsync) on the writer connection.
pub(crate) fn append_group(
    ledger: &Ledger,
    batches: &[&[Turn]],
) -> Result<Vec<Result<AppendReceipt, AppendError>>, AppendError> {
    let metas: Vec<_> = batches.iter().map(|turns| canonical_metas::<SqliteTable>(turns)).collect();
    ledger.with_writer(
        |path| AppendError::ReadOnly { path },
        |conn| {
            let sql = sql_err(ledger.path());
            let tx =
                conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(&sql)?;
            let results =
                append_group_in(&mut SqliteTable::new(&tx, ledger.path()), batches, metas)?;
            tx.commit().map_err(&sql)?;
            Ok(results)
        },
    )
}

/// [`crate::EvidenceLedger::check_append`] on the embedded ledger, on a reader's snapshot.
pub(crate) fn check_append(ledger: &Ledger, turns: &[Turn]) -> Result<usize, AppendError> {
    let mut conn = ledger.reader()?;
    let tx = conn.transaction().map_err(sql_err(ledger.path()))?;
    check_append_in(&mut SqliteTable::new(&tx, ledger.path()), turns)
}

fn corrupted(c: Corrupt) -> AppendError {
    AppendError::Corrupted { position: c.position, detail: c.detail }
}

/// Plans and inserts one batch after `head`; returns its receipt and the new head. On `Err`
/// the caller rolls the batch back.
fn append_batch<T: RecordTable + ?Sized>(
    table: &mut T,
    mut head: Head,
    turns: &[Turn],
    metas: &[String],
    ingest_utc_micros: i64,
) -> Result<(AppendReceipt, Head), AppendError> {
    let plans = plan(table, turns, metas)?;
    let mut outcomes: Vec<AppendOutcome> = Vec::with_capacity(turns.len());
    let mut rows = Vec::new();
    // Read inside this batch's savepoint, so a rolled-back batch gives its numbers back.
    let mut next_numbers: HashMap<&str, TurnId> = HashMap::new();
    for ((index, turn), planned) in turns.iter().enumerate().zip(plans) {
        let outcome = match planned {
            Plan::Present(outcome) => outcome,
            Plan::SameAsEarlier(first) => {
                AppendOutcome { status: AppendStatus::AlreadyPresent, ..outcomes[first] }
            }
            Plan::New => {
                let namespace = turn.namespace.as_str();
                let number = match next_numbers.get(namespace) {
                    Some(&next) => next,
                    None => table.next_number(namespace)?,
                };
                next_numbers.insert(namespace, number.next());
                let salt = ContentSalt::random()
                    .map_err(|e| AppendError::NoRandomness { detail: e.to_string() })?;
                let digest = turn_digest(turn, ingest_utc_micros, &salt);
                let chain = head.chain.link(&digest);
                let position = head.next_position();
                rows.push(NewTurn {
                    position,
                    number,
                    turn,
                    meta: &metas[index],
                    digest,
                    chain,
                    salt: *salt.as_bytes(),
                });
                head = Head { last: Some(position), chain };
                AppendOutcome { id: number, digest, status: AppendStatus::Appended }
            }
        };
        outcomes.push(outcome);
    }
    table.insert_turns(&rows, ingest_utc_micros)?;
    Ok((AppendReceipt { outcomes, head: head.last }, head))
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

/// Decides, against the ledger as `table` sees it, what to do with each turn; refuses the batch
/// on the first conflict, erased turn or corrupted stored turn.
fn plan<T: RecordTable + ?Sized>(
    table: &mut T,
    turns: &[Turn],
    metas: &[String],
) -> Result<Vec<Plan>, AppendError> {
    let mut seen: HashSet<TurnKey<'_>> = HashSet::new();
    let keys: Vec<TurnKey<'_>> = turns
        .iter()
        .map(|t| (t.namespace.as_str(), t.session.as_str(), t.turn.raw()))
        .filter(|key| seen.insert(*key))
        .collect();
    let mut stored = table.stored_turns(&keys)?;
    let mut in_batch: HashMap<TurnKey<'_>, usize> = HashMap::new();
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
        let Some(row) = stored.remove(&(key.0.to_owned(), key.1.to_owned(), key.2)) else {
            plans.push(Plan::New);
            continue;
        };
        let raw = &row.raw;
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
        let (_, evidence) = row.checked_evidence().map_err(corrupted)?;
        if let Some(field) = first_difference(turn, &metas[index], &Existing::from_raw(raw)) {
            return Err(conflict(index, turn, ConflictingRecord::Stored(id), field));
        }
        plans.push(Plan::Present(AppendOutcome {
            id,
            digest: evidence.digest,
            status: AppendStatus::AlreadyPresent,
        }));
    }
    Ok(plans)
}

/// Refuses, as [`AppendError::InvalidTurn`] naming the field, what the ledger cannot store
/// faithfully (a leap second, sub-microsecond time, an offset that is not whole minutes, an
/// empty speaker): never rounded. `index` is the turn's position in its batch.
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
