//! Appending a batch: one transaction, all or nothing, idempotent per turn, serialised with
//! every other writer of the database.

use std::collections::{HashMap, HashSet};

use evicortex_core::{Turn, TurnId};
use evicortex_ledger::{
    AppendOutcome, AppendReceipt, AppendStatus, ConflictingRecord, ContentSalt, LedgerPosition,
    canonical_json, turn_digest, validate_turn,
};
use postgres::{GenericClient, Transaction};

use crate::{
    AppendError, PgLedger,
    append_rows::{NewRow, NewRows, TurnKey, stored_turns},
    head::{self, Head},
    record_row::{Corrupt, RawRecord, StoredBody},
};

/// Taken by every append and erasure before it reads the head: it conflicts with itself and
/// with every row write, not with reads, so writers queue while readers go on reading their
/// snapshots.
pub(crate) const LOCK_RECORDS: &str = "LOCK TABLE records IN EXCLUSIVE MODE";

impl PgLedger {
    /// Appends `turns` as one transaction: when this returns `Ok`, the batch is committed
    /// (durable as the server's `synchronous_commit` makes commits); when it returns `Err`,
    /// nothing of it is. Semantics and digests are the embedded ledger's
    /// (`evicortex_ledger::Ledger::append`): a turn identical to a stored one (same namespace,
    /// session, turn index and content) is counted as already present; the same key with other
    /// content is an [`AppendError::Conflict`] naming the stored record; an erased turn cannot
    /// be appended again; new records are numbered within their namespace. The last record and
    /// every stored turn answered as present are checked against their digests first.
    /// On a read replica it is refused before anything is sent ([`AppendError::ReadOnlyReplica`]).
    pub fn append(&self, turns: &[Turn]) -> Result<AppendReceipt, AppendError> {
        if self.is_replica() {
            return Err(AppendError::ReadOnlyReplica { url: self.url().to_owned() });
        }
        let metas = validated_metas(turns)?;
        let mut client = self.client();
        let mut tx = client.transaction().map_err(self.db("starting an append"))?;
        let mut head = self.lock_and_read_head(&mut tx)?;
        let receipt = self.append_in(&mut tx, &mut head, turns, &metas)?;
        head::write_head(&mut tx, head).map_err(self.db("recording the head"))?;
        tx.commit().map_err(self.db("committing an append"))?;
        Ok(receipt)
    }

    /// Takes the writers' lock in `tx` and returns the head, its last record checked.
    pub(crate) fn lock_and_read_head(&self, tx: &mut Transaction<'_>) -> Result<Head, AppendError> {
        tx.batch_execute(LOCK_RECORDS).map_err(self.db("locking the records table"))?;
        let head = head::read_head(tx).map_err(self.db("reading the head"))?.map_err(|detail| {
            AppendError::Corrupted { position: LedgerPosition::from_raw(0), detail }
        })?;
        head::check_last_record(tx, &head)
            .map_err(self.db("checking the last record"))?
            .map_err(corrupted)?;
        Ok(head)
    }

    /// Writes the new records of `turns` in `tx` (which holds the writers' lock), moving `head`
    /// past them; the caller records the head and commits.
    pub(crate) fn append_in(
        &self,
        tx: &mut Transaction<'_>,
        head: &mut Head,
        turns: &[Turn],
        metas: &[String],
    ) -> Result<AppendReceipt, AppendError> {
        let plans = self.plan(tx, turns, metas)?;
        let ingest_utc_micros = chrono::Utc::now().timestamp_micros();
        let mut next_numbers: HashMap<&str, TurnId> = HashMap::new();
        let mut outcomes: Vec<AppendOutcome> = Vec::with_capacity(turns.len());
        let mut rows = NewRows::default();
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
                        None => {
                            next_number(tx, namespace).map_err(self.db("numbering a record"))?
                        }
                    };
                    next_numbers.insert(namespace, number.next());
                    let salt = ContentSalt::random()
                        .map_err(|e| AppendError::NoRandomness { detail: e.to_string() })?;
                    let digest = turn_digest(turn, ingest_utc_micros, &salt);
                    let chain = head.chain.link(&digest);
                    let seq = head.next_position();
                    rows.push(NewRow {
                        seq: seq as i64,
                        turn,
                        meta: &metas[index],
                        digest: digest.as_bytes().to_vec(),
                        chain: chain.as_bytes().to_vec(),
                        salt: salt.as_bytes().to_vec(),
                        number: number.raw() as i64,
                    });
                    *head = Head { last: Some(LedgerPosition::from_raw(seq)), chain };
                    AppendOutcome { id: number, digest, status: AppendStatus::Appended }
                }
            };
            outcomes.push(outcome);
        }
        rows.insert(tx, ingest_utc_micros).map_err(self.db("inserting records"))?;
        Ok(AppendReceipt { outcomes, head: head.last })
    }

    /// Decides, against the ledger as `tx` sees it (under the lock), what to do with each turn;
    /// refuses the batch on the first conflict, erased turn or corrupted stored turn.
    pub(crate) fn plan(
        &self,
        tx: &mut Transaction<'_>,
        turns: &[Turn],
        metas: &[String],
    ) -> Result<Vec<Plan>, AppendError> {
        let mut seen: HashSet<TurnKey<'_>> = HashSet::new();
        let keys: Vec<TurnKey<'_>> = turns
            .iter()
            .map(|t| (t.namespace.as_str(), t.session.as_str(), t.turn.raw()))
            .filter(|key| seen.insert(*key))
            .collect();
        let mut in_batch: HashMap<TurnKey<'_>, usize> = HashMap::new();
        let mut stored = stored_turns(tx, &keys).map_err(self.db("looking up the stored turns"))?;
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
            let lookup = (key.0.to_owned(), key.1.to_owned(), i64::from(key.2));
            let Some((raw, prev_chain)) = stored.remove(&lookup) else {
                plans.push(Plan::New);
                continue;
            };
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
            let record = raw.decode().map_err(corrupted)?;
            raw.check_turn(&record, prev_chain.as_deref()).map_err(corrupted)?;
            if !matches!(record.body, StoredBody::Turn(_)) {
                return Err(corrupted(raw.corrupt("a live turn row did not decode as a turn")));
            }
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
}

/// What an append does with one turn of its batch.
pub(crate) enum Plan {
    /// Store it as a new record.
    New,
    /// An identical turn is stored.
    Present(AppendOutcome),
    /// An identical turn comes earlier in the batch (its position).
    SameAsEarlier(usize),
}

pub(crate) fn corrupted(c: Corrupt) -> AppendError {
    AppendError::Corrupted { position: c.position, detail: c.detail }
}

/// The next record number of `namespace`: numbers count the namespace's own records only.
pub(crate) fn next_number(
    client: &mut impl GenericClient,
    namespace: &str,
) -> Result<TurnId, postgres::Error> {
    let last: Option<i64> = client
        .query_one("SELECT max(number) FROM records WHERE namespace = $1", &[&namespace])?
        .get(0);
    Ok(TurnId::from_raw(last.map_or(1, |n| n as u64 + 1)))
}

/// Refuses what the embedded ledger refuses (its own check), and what PostgreSQL text cannot
/// hold; returns each turn's canonical meta JSON.
pub(crate) fn validated_metas(turns: &[Turn]) -> Result<Vec<String>, AppendError> {
    for (index, turn) in turns.iter().enumerate() {
        validate_turn(index, turn).map_err(|refused| match refused {
            evicortex_ledger::AppendError::InvalidTurn { index, field, reason } => {
                AppendError::InvalidTurn { index, field, reason }
            }
            other => AppendError::InvalidTurn { index, field: "turn", reason: other.to_string() },
        })?;
        // The embedded ledger stores U+0000; PostgreSQL's text type cannot. Refused here, by
        // name, rather than failing inside the transaction with the server's encoding error.
        let nul = "holds the character U+0000, which PostgreSQL text cannot store".to_owned();
        if turn.text.contains('\0') {
            return Err(AppendError::InvalidTurn { index, field: "text", reason: nul });
        }
        if turn.speaker.as_deref().is_some_and(|s| s.contains('\0')) {
            return Err(AppendError::InvalidTurn { index, field: "speaker", reason: nul });
        }
    }
    Ok(turns.iter().map(|t| canonical_json(&serde_json::Value::Object(t.meta.clone()))).collect())
}

/// The stored fields a new turn is compared with.
#[derive(Debug)]
struct Existing<'a> {
    role: Option<&'a str>,
    speaker: Option<&'a str>,
    text: Option<&'a str>,
    event_utc_us: Option<i64>,
    event_offset_s: Option<i32>,
    meta: Option<&'a str>,
}

impl<'a> Existing<'a> {
    fn from_turn(turn: &'a Turn, meta: &'a str) -> Existing<'a> {
        Existing {
            role: Some(turn.role.as_str()),
            speaker: turn.speaker.as_deref(),
            text: Some(&turn.text),
            event_utc_us: Some(turn.time.utc_micros()),
            event_offset_s: Some(turn.time.offset_seconds()),
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

/// The first field in which `turn` differs from what is stored, if any; the embedded ledger
/// compares in the same order, so both name the same field.
fn first_difference(turn: &Turn, meta: &str, existing: &Existing) -> Option<&'static str> {
    if existing.role != Some(turn.role.as_str()) {
        Some("role")
    } else if existing.speaker != turn.speaker.as_deref() {
        Some("speaker")
    } else if existing.text != Some(turn.text.as_str()) {
        Some("text")
    } else if existing.event_utc_us != Some(turn.time.utc_micros())
        || existing.event_offset_s != Some(turn.time.offset_seconds())
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
