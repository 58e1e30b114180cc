//! The PostgreSQL store's record decoding, without a database: the rows of a real ledger (turns
//! in two namespaces, an erasure, its redaction; the PostgreSQL store holds the same records
//! with the same digests) as `record_row::raw_record` reads them, with the column types
//! PostgreSQL enforces (`kind` a SMALLINT, `event_offset_s` an INTEGER, texts UTF-8 without NUL,
//! the NOT NULL columns present), edited by the fuzzed input as someone with write access to the
//! database could; then what the store runs over them: verify's `ChainCheck` over every record
//! and the recorded head, and the read path's `checked_evidence` of each live turn with the
//! chain hash of the record before it. Properties: no panic; a changed row or head never
//! verifies; when verify passes, every live turn reads back checked.

use std::sync::OnceLock;

use evicortex_ledger::storage::{ChainCheck, ChainedRow, Head, RawRecord, stored_head};

use crate::edits::{edits, int};
use crate::ledger_records::template;

/// The records, the recorded head (`head_seq`, `chain_head`), read once from the template.
fn template_rows() -> &'static (Vec<RawRecord>, [String; 2]) {
    static ROWS: OnceLock<(Vec<RawRecord>, [String; 2])> = OnceLock::new();
    ROWS.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.sqlite");
        fs_err::write(&path, template()).unwrap();
        let conn = rusqlite::Connection::open(&path).unwrap();
        let columns = evicortex_ledger::storage::RECORD_COLUMN_NAMES.join(", ");
        let mut statement =
            conn.prepare(&format!("SELECT {columns} FROM records ORDER BY seq")).unwrap();
        let records = statement
            .query_map([], evicortex_ledger::storage::raw_record)
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let meta = |key: &str| -> String {
            conn.query_row("SELECT value FROM ledger_meta WHERE key = ?1", [key], |r| r.get(0))
                .unwrap()
        };
        (records, [meta("head_seq"), meta("chain_head")])
    })
}

/// A value read from the input: how to change a column.
enum Change {
    Null,
    Bytes(Vec<u8>),
    /// Add a small signed amount to an integer; drop the last byte of a text or bytes.
    Nudge(i8),
    /// The same column of another row.
    CopyFrom(usize),
}

/// PostgreSQL text: UTF-8 without NUL.
fn text(raw: &[u8]) -> String {
    String::from_utf8_lossy(raw).replace('\0', "")
}

fn change_int(value: &mut Option<i64>, change: &Change, other: Option<i64>, required: bool) {
    let new = match change {
        Change::Null => None,
        Change::Bytes(raw) => Some(int(raw)),
        Change::Nudge(d) => value.map(|v| v.wrapping_add(i64::from(*d))),
        Change::CopyFrom(_) => other,
    };
    if new.is_some() || !required {
        *value = new;
    }
}

fn change_text(
    value: &mut Option<String>,
    change: &Change,
    other: Option<&String>,
    required: bool,
) {
    let new = match change {
        Change::Null => None,
        Change::Bytes(raw) => Some(text(raw)),
        Change::Nudge(_) => value.clone().map(|mut v| {
            v.pop();
            v
        }),
        Change::CopyFrom(_) => other.cloned(),
    };
    if new.is_some() || !required {
        *value = new;
    }
}

fn change_bytes(
    value: &mut Option<Vec<u8>>,
    change: &Change,
    other: Option<&Vec<u8>>,
    required: bool,
) {
    let new = match change {
        Change::Null => None,
        Change::Bytes(raw) => Some(raw.clone()),
        Change::Nudge(_) => value.as_ref().map(|v| v[..v.len().saturating_sub(1)].to_vec()),
        Change::CopyFrom(_) => other.cloned(),
    };
    if new.is_some() || !required {
        *value = new;
    }
}

/// Column `column` of `rows[row]` changed; `column` 20 and 21 are the recorded head's
/// `head_seq` and `chain_head`, 22 removes the row.
fn apply(
    rows: &mut Vec<RawRecord>,
    head: &mut [String; 2],
    row: usize,
    column: u8,
    change: &Change,
) {
    if rows.is_empty() {
        return;
    }
    let row = row % rows.len();
    let other = match change {
        Change::CopyFrom(i) => rows[i % rows.len()].clone(),
        _ => RawRecord::default(),
    };
    let r = &mut rows[row];
    match column % 23 {
        0 => {
            let mut seq = Some(r.seq);
            change_int(&mut seq, change, Some(other.seq), true);
            r.seq = seq.unwrap_or(r.seq);
        }
        1 => {
            // SMALLINT.
            change_int(&mut r.kind, change, other.kind, true);
            r.kind = r.kind.map(|k| i64::from(k as i16));
        }
        2 => change_text(&mut r.namespace, change, other.namespace.as_ref(), true),
        3 => change_text(&mut r.session, change, other.session.as_ref(), false),
        4 => change_int(&mut r.turn, change, other.turn, false),
        5 => change_text(&mut r.role, change, other.role.as_ref(), false),
        6 => change_text(&mut r.speaker, change, other.speaker.as_ref(), false),
        7 => change_text(&mut r.text, change, other.text.as_ref(), false),
        8 => change_int(&mut r.event_utc_us, change, other.event_utc_us, false),
        9 => {
            // INTEGER.
            change_int(&mut r.event_offset_s, change, other.event_offset_s, false);
            r.event_offset_s = r.event_offset_s.map(|o| i64::from(o as i32));
        }
        10 => change_int(&mut r.ingest_utc_us, change, other.ingest_utc_us, true),
        11 => change_text(&mut r.meta, change, other.meta.as_ref(), false),
        12 => change_int(&mut r.target_record, change, other.target_record, false),
        13 => change_bytes(&mut r.erased_seqs, change, other.erased_seqs.as_ref(), false),
        14 => change_int(&mut r.erased_by, change, other.erased_by, false),
        15 => change_bytes(&mut r.content_digest, change, other.content_digest.as_ref(), false),
        16 => change_bytes(&mut r.digest, change, other.digest.as_ref(), true),
        17 => change_bytes(&mut r.chain, change, other.chain.as_ref(), true),
        18 => change_bytes(&mut r.salt, change, other.salt.as_ref(), false),
        19 => change_int(&mut r.number, change, other.number, true),
        20 | 21 => {
            let slot = &mut head[usize::from(column % 23 - 20)];
            let mut value = Some(slot.clone());
            change_text(&mut value, change, None, true);
            *slot = value.unwrap_or_default();
        }
        _ => {
            rows.remove(row);
        }
    }
}

/// Applies the edits read from `data`: per edit a row, a column, a kind of change and its bytes.
fn edit(data: &[u8]) -> (Vec<RawRecord>, [String; 2]) {
    let (template, head) = template_rows();
    let (mut rows, mut head) = (template.clone(), head.clone());
    for ([row, column, kind, len], raw) in edits(data, 6, 72) {
        let change = match kind % 4 {
            0 => Change::Null,
            1 => Change::Bytes(raw),
            2 => Change::Nudge(len as i8),
            _ => Change::CopyFrom(usize::from(len)),
        };
        apply(&mut rows, &mut head, usize::from(row), column, &change);
    }
    (rows, head)
}

/// One input (what libFuzzer calls the target with): panics on a violated property.
pub fn run(data: &[u8]) {
    let (rows, head) = edit(data);
    let (template, template_head) = template_rows();
    let changed = head != *template_head
        || rows.len() != template.len()
        || rows.iter().zip(template).any(|(a, b)| format!("{a:?}") != format!("{b:?}"));
    // Verify, as `evicortex-postgres`'s verify.rs runs it.
    let mut check = ChainCheck::default();
    let mut verified = Ok(());
    for raw in &rows {
        let _ = raw.decode();
        if let Err(e) = check.next(raw) {
            verified = Err(e.to_string());
            break;
        }
    }
    let verified = verified.and_then(|()| {
        let recorded = Head::parse(Some(&head[0]), Some(&head[1]))?;
        check.finish(&recorded).map_err(|e| e.to_string())
    });
    if changed {
        assert!(verified.is_err(), "an edited PostgreSQL row verifies: {verified:?}");
    }
    // The head as `stats` reads it: the last record's seq and chain.
    let last = rows.iter().max_by_key(|r| r.seq).and_then(|r| Some((r.seq, r.chain.clone()?)));
    let _ = stored_head(last);
    // Reads, as read.rs selects them: live turns, each with the chain of the record before.
    for raw in rows.iter().filter(|r| r.is_live_turn()) {
        let prev_chain = rows.iter().find(|p| Some(p.seq) == raw.seq.checked_sub(1));
        let chained =
            ChainedRow { raw: raw.clone(), prev_chain: prev_chain.and_then(|p| p.chain.clone()) };
        let read = chained.checked_evidence();
        if verified.is_ok() {
            read.unwrap_or_else(|e| panic!("verify passed but reading #{} failed: {e:?}", raw.seq));
        }
    }
}
