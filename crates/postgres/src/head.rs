//! The head recorded in `ledger_meta` (last position and chain hash), and the check of the
//! record every write builds on.

use evicortex_core::EvidenceDigest;
use evicortex_ledger::{ChainHash, LedgerPosition, redaction_digest};
use postgres::GenericClient;

use crate::{
    record_row::{Corrupt, PREV_CHAIN, PREV_CHAIN_COLUMN, RECORD_COLUMNS, RawRecord, StoredBody},
    schema::meta_value,
};

/// The head: the last record's position and its chain hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Head {
    pub last: Option<LedgerPosition>,
    pub chain: ChainHash,
}

impl Head {
    /// The position the next record takes.
    pub(crate) fn next_position(&self) -> u64 {
        self.last.map_or(1, |p| p.raw() + 1)
    }
}

/// The head as `ledger_meta` records it; `Ok(Err(_))` says what is malformed.
pub(crate) fn read_head(
    client: &mut impl GenericClient,
) -> Result<Result<Head, String>, postgres::Error> {
    let seq = meta_value(client, "head_seq")?;
    let chain = meta_value(client, "chain_head")?;
    Ok(parse(seq.as_deref(), chain.as_deref()))
}

fn parse(seq: Option<&str>, chain: Option<&str>) -> Result<Head, String> {
    let seq_text = seq.ok_or("ledger_meta lacks head_seq")?;
    let seq: u64 = seq_text
        .parse()
        .map_err(|_| format!("ledger_meta head_seq {seq_text:?} is not a number"))?;
    let chain_text = chain.ok_or("ledger_meta lacks chain_head")?;
    let chain = ChainHash::from_hex(chain_text)
        .ok_or_else(|| format!("ledger_meta chain_head {chain_text:?} is not 64 hex digits"))?;
    Ok(Head { last: (seq > 0).then(|| LedgerPosition::from_raw(seq)), chain })
}

/// Records `head` in `ledger_meta`, in the transaction that wrote the records.
pub(crate) fn write_head(
    client: &mut impl GenericClient,
    head: Head,
) -> Result<(), postgres::Error> {
    let seq = head.last.map_or(0, LedgerPosition::raw).to_string();
    client.execute("UPDATE ledger_meta SET value = $1 WHERE key = 'head_seq'", &[&seq])?;
    client.execute(
        "UPDATE ledger_meta SET value = $1 WHERE key = 'chain_head'",
        &[&head.chain.to_hex()],
    )?;
    Ok(())
}

/// Checks the record that an append or an erasure builds on: the last one must be the head
/// `ledger_meta` records, match its digest and link to the record before it. `Ok(Err(_))` names
/// what is wrong.
pub(crate) fn check_last_record(
    client: &mut impl GenericClient,
    head: &Head,
) -> Result<Result<(), Corrupt>, postgres::Error> {
    let row = client.query_opt(
        &format!("SELECT {RECORD_COLUMNS}, {PREV_CHAIN} FROM records ORDER BY seq DESC LIMIT 1"),
        &[],
    )?;
    let last = match row {
        Some(row) => Some((
            RawRecord::from_row(&row)?,
            row.try_get::<_, Option<Vec<u8>>>(PREV_CHAIN_COLUMN)?,
        )),
        None => None,
    };
    let (raw, prev) = match (head.last, last) {
        (None, None) => return Ok(Ok(())),
        (Some(_), Some(found)) => found,
        (None, Some((raw, _))) => {
            return Ok(Err(
                raw.corrupt("ledger_meta says the ledger is empty, but it holds records")
            ));
        }
        (Some(position), None) => {
            return Ok(Err(Corrupt {
                position,
                detail: "ledger_meta names this record as the head, but there are no records"
                    .to_owned(),
            }));
        }
    };
    if Some(raw.position()) != head.last {
        return Ok(Err(raw.corrupt(format!(
            "ledger_meta says the head is at position {}, the last record is this one",
            head.last.map_or(0, LedgerPosition::raw)
        ))));
    }
    let record = match raw.decode() {
        Ok(record) => record,
        Err(c) => return Ok(Err(c)),
    };
    let digest = match &record.body {
        StoredBody::Turn(_) | StoredBody::ErasedTurn { .. } => match raw.recompute_turn_digest() {
            Ok(d) => d,
            Err(c) => return Ok(Err(c)),
        },
        StoredBody::Redaction { target, erased } => {
            let mut listed = Vec::with_capacity(erased.len());
            for id in erased {
                let position = i64::try_from(id.raw()).unwrap_or(-1);
                let digest: Option<Vec<u8>> = client
                    .query_opt(
                        "SELECT digest FROM records WHERE seq = $1 AND erased_by = $2",
                        &[&position, &raw.seq],
                    )?
                    .map(|r| r.get(0));
                match digest.and_then(|d| <[u8; 32]>::try_from(d.as_slice()).ok()) {
                    Some(d) => listed.push((*id, EvidenceDigest::from_bytes(d))),
                    None => {
                        return Ok(Err(raw.corrupt(format!(
                            "lists position {} as erased, but that record is not a turn it erased",
                            id.raw()
                        ))));
                    }
                }
            }
            redaction_digest(target, raw.ingest_utc_us, &listed)
        }
    };
    if let Err(c) = raw.check_digest_and_link(&record, &digest, prev.as_deref()) {
        return Ok(Err(c));
    }
    if record.chain != head.chain {
        return Ok(Err(raw.corrupt("its chain hash does not match the recorded chain head")));
    }
    Ok(Ok(()))
}
