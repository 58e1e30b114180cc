//! The two statements an append sends per batch rather than per turn: the lookup of the stored
//! turns with the batch's keys, and the insert of its new records. A round trip per turn made
//! ingest into PostgreSQL 19 times slower than into the embedded store.

use std::collections::HashMap;

use evicortex_ledger::storage::{ChainedRow, NewTurn, TurnKey};
use postgres::Transaction;

use crate::{
    record_row::{PREV_CHAIN, RECORD_COLUMNS, chained_row},
    schema::KIND_TURN,
};

/// Keys or rows per statement: large enough that round trips stop mattering, small enough that
/// one statement's parameters stay a few megabytes.
const ROWS_PER_STATEMENT: usize = 1_000;

/// Text bytes (texts, speakers, metas) past which an insert statement takes no further row:
/// an array parameter must stay under PostgreSQL's 1 GiB for one value, and a thousand long
/// turns would pass it.
const TEXT_BYTES_PER_STATEMENT: usize = 32 << 20;

/// The stored turn rows whose keys are among `keys`, by key.
pub(crate) fn stored_turns(
    tx: &mut Transaction<'_>,
    keys: &[TurnKey<'_>],
) -> Result<HashMap<(String, String, u32), ChainedRow>, postgres::Error> {
    let find = tx.prepare(&format!(
        "SELECT {RECORD_COLUMNS}, {PREV_CHAIN} FROM records \
         WHERE kind = {KIND_TURN} AND (namespace, session, turn) IN \
         (SELECT k.namespace, k.session, k.turn \
          FROM unnest($1::text[], $2::text[], $3::bigint[]) AS k(namespace, session, turn))"
    ))?;
    let mut stored = HashMap::new();
    for chunk in keys.chunks(ROWS_PER_STATEMENT) {
        let namespaces: Vec<&str> = chunk.iter().map(|k| k.0).collect();
        let sessions: Vec<&str> = chunk.iter().map(|k| k.1).collect();
        let turns: Vec<i64> = chunk.iter().map(|k| i64::from(k.2)).collect();
        for row in tx.query(&find, &[&namespaces, &sessions, &turns])? {
            let found = chained_row(&row)?;
            // The selection asks for these three columns (the schema bounds `turn` to u32),
            // and the table's UNIQUE key holds at most one row per key.
            let raw = &found.raw;
            let key = (
                raw.namespace.clone().unwrap_or_default(),
                raw.session.clone().unwrap_or_default(),
                raw.turn.and_then(|t| u32::try_from(t).ok()).unwrap_or_default(),
            );
            stored.insert(key, found);
        }
    }
    Ok(stored)
}

/// The new turn records of a batch, column by column, inserted by [`NewRows::insert`].
#[derive(Default)]
pub(crate) struct NewRows<'a> {
    seq: Vec<i64>,
    namespace: Vec<&'a str>,
    session: Vec<&'a str>,
    turn: Vec<i64>,
    role: Vec<&'a str>,
    speaker: Vec<Option<&'a str>>,
    text: Vec<&'a str>,
    event_utc_us: Vec<i64>,
    event_offset_s: Vec<i32>,
    meta: Vec<&'a str>,
    digest: Vec<Vec<u8>>,
    chain: Vec<Vec<u8>>,
    salt: Vec<Vec<u8>>,
    number: Vec<i64>,
}

impl<'a> NewRows<'a> {
    pub(crate) fn push(&mut self, row: &NewTurn<'a>) {
        let turn = row.turn;
        self.seq.push(row.position.raw() as i64);
        self.namespace.push(turn.namespace.as_str());
        self.session.push(turn.session.as_str());
        self.turn.push(i64::from(turn.turn.raw()));
        self.role.push(turn.role.as_str());
        self.speaker.push(turn.speaker.as_deref());
        self.text.push(turn.text.as_str());
        self.event_utc_us.push(turn.time.utc_micros());
        self.event_offset_s.push(turn.time.offset_seconds());
        self.meta.push(row.meta);
        self.digest.push(row.digest.as_bytes().to_vec());
        self.chain.push(row.chain.as_bytes().to_vec());
        self.salt.push(row.salt.to_vec());
        self.number.push(row.number.raw() as i64);
    }

    /// Inserts every pushed row in `tx`, stamped with `ingest_utc_us`, in statements of
    /// [`ROWS_PER_STATEMENT`] rows.
    pub(crate) fn insert(
        &self,
        tx: &mut Transaction<'_>,
        ingest_utc_us: i64,
    ) -> Result<(), postgres::Error> {
        if self.seq.is_empty() {
            return Ok(());
        }
        let insert = tx.prepare(&format!(
            "INSERT INTO records (seq, kind, namespace, session, turn, role, speaker, text, \
             event_utc_us, event_offset_s, ingest_utc_us, meta, digest, chain, salt, number) \
             SELECT r.seq, {KIND_TURN}, r.namespace, r.session, r.turn, r.role, r.speaker, \
             r.text, r.event_utc_us, r.event_offset_s, $1, r.meta::json, r.digest, r.chain, \
             r.salt, r.number \
             FROM unnest($2::bigint[], $3::text[], $4::text[], $5::bigint[], $6::text[], \
             $7::text[], $8::text[], $9::bigint[], $10::integer[], $11::text[], $12::bytea[], \
             $13::bytea[], $14::bytea[], $15::bigint[]) \
             AS r(seq, namespace, session, turn, role, speaker, text, event_utc_us, \
             event_offset_s, meta, digest, chain, salt, number)"
        ))?;
        for r in self.statements() {
            tx.execute(
                &insert,
                &[
                    &ingest_utc_us,
                    &&self.seq[r.clone()],
                    &&self.namespace[r.clone()],
                    &&self.session[r.clone()],
                    &&self.turn[r.clone()],
                    &&self.role[r.clone()],
                    &&self.speaker[r.clone()],
                    &&self.text[r.clone()],
                    &&self.event_utc_us[r.clone()],
                    &&self.event_offset_s[r.clone()],
                    &&self.meta[r.clone()],
                    &&self.digest[r.clone()],
                    &&self.chain[r.clone()],
                    &&self.salt[r.clone()],
                    &&self.number[r],
                ],
            )?;
        }
        Ok(())
    }

    /// The rows of each insert statement: at most [`ROWS_PER_STATEMENT`], and no row added
    /// once [`TEXT_BYTES_PER_STATEMENT`] is reached (a longer row goes alone).
    fn statements(&self) -> Vec<std::ops::Range<usize>> {
        let bytes = |i: usize| {
            self.text[i].len() + self.speaker[i].map_or(0, str::len) + self.meta[i].len()
        };
        let mut ranges = Vec::new();
        let (mut start, mut held) = (0, 0);
        for i in 0..self.seq.len() {
            let row = bytes(i);
            if i > start
                && (i - start == ROWS_PER_STATEMENT || held + row > TEXT_BYTES_PER_STATEMENT)
            {
                ranges.push(start..i);
                (start, held) = (i, 0);
            }
            held += row;
        }
        if start < self.seq.len() {
            ranges.push(start..self.seq.len());
        }
        ranges
    }
}

#[cfg(test)]
mod tests {
    use evicortex_core::{
        EventTime, EvidenceDigest, Namespace, Role, SessionId, Turn, TurnId, TurnIndex,
    };
    use evicortex_ledger::{ChainHash, LedgerPosition};

    use super::*;

    fn turn(i: u32, text_bytes: usize) -> Turn {
        Turn {
            namespace: Namespace::new("n").unwrap(),
            session: SessionId::new("s").unwrap(),
            turn: TurnIndex::new(i),
            role: Role::User,
            speaker: None,
            text: "x".repeat(text_bytes),
            time: EventTime::parse_rfc3339("2024-05-02T10:00:00Z").unwrap(),
            meta: serde_json::Map::new(),
        }
    }

    fn statements(sizes: &[usize]) -> Vec<std::ops::Range<usize>> {
        let turns: Vec<Turn> = sizes.iter().enumerate().map(|(i, &n)| turn(i as u32, n)).collect();
        let mut rows = NewRows::default();
        for (i, t) in turns.iter().enumerate() {
            rows.push(&NewTurn {
                position: LedgerPosition::from_raw(i as u64 + 1),
                number: TurnId::from_raw(1),
                turn: t,
                meta: "{}",
                digest: EvidenceDigest::from_bytes([0; 32]),
                chain: ChainHash::GENESIS,
                salt: [0; 32],
            });
        }
        rows.statements()
    }

    #[test]
    fn statements_hold_a_thousand_rows_or_32_mib_of_text_and_a_longer_row_alone() {
        assert_eq!(statements(&[]), []);
        assert_eq!(statements(&[10; 2_500]), [0..1_000, 1_000..2_000, 2_000..2_500]);
        let mib = 1 << 20;
        assert_eq!(statements(&[20 * mib, 20 * mib, 1, 1]), [0..1, 1..4]);
        assert_eq!(statements(&[40 * mib, 1, 40 * mib]), [0..1, 1..2, 2..3]);
        assert_eq!(statements(&[16 * mib - 2, 16 * mib - 2, 1]), [0..2, 2..3]);
    }
}
