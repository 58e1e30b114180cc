//! The SQLite schema, connection settings, the metadata table, row reading, and
//! [`SqliteTable`]: the records table as the shared ledger logic sees it.

use std::{collections::HashMap, path::Path};

use evicortex_core::TurnId;
use rusqlite::{Connection, OptionalExtension, params, types::ValueRef};

use crate::{
    EraseTarget, LedgerPosition, StorageError,
    row::{ChainedRow, KIND_REDACTION, KIND_TURN, RawRecord},
    table::{Head, NewRedaction, NewTurn, RecordTable, TurnKey},
};

/// `PRAGMA application_id` of a ledger file: "EVCX".
pub(crate) const APPLICATION_ID: i32 = 0x4556_4358;

pub(crate) const SCHEMA: &str = "
CREATE TABLE ledger_meta (
    key   TEXT PRIMARY KEY NOT NULL,
    value TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE records (
    seq            INTEGER PRIMARY KEY,
    kind           INTEGER NOT NULL,
    namespace      TEXT NOT NULL,
    session        TEXT,
    turn           INTEGER,
    role           TEXT,
    speaker        TEXT,
    text           TEXT,
    event_utc_us   INTEGER,
    event_offset_s INTEGER,
    ingest_utc_us  INTEGER NOT NULL,
    meta           TEXT,
    target_record  INTEGER,
    erased_seqs    BLOB,
    erased_by      INTEGER,
    content_digest BLOB,
    digest         BLOB NOT NULL,
    chain          BLOB NOT NULL,
    salt           BLOB,
    number         INTEGER,
    UNIQUE (namespace, session, turn)
);
CREATE UNIQUE INDEX records_number ON records (namespace, number);
";

/// What a version-1 ledger gains on migration: the column added last, so that a migrated and a
/// new ledger have the same columns in the same order.
pub(crate) const ADD_SALT_COLUMN: &str = "ALTER TABLE records ADD COLUMN salt BLOB";

/// What a version-2 ledger gains on migration: each record's number in its namespace (the id
/// every tenant-facing answer uses), filled in ledger order, then unique per namespace.
pub(crate) const ADD_NUMBER_COLUMN: &str = "ALTER TABLE records ADD COLUMN number INTEGER";
pub(crate) const FILL_NUMBERS: &str = "UPDATE records SET number = (SELECT n FROM \
     (SELECT seq AS s, row_number() OVER (PARTITION BY namespace ORDER BY seq) AS n FROM records) \
     WHERE s = records.seq); \
     CREATE UNIQUE INDEX records_number ON records (namespace, number);";

/// The columns every record query selects, in [`RawRecord::from_row`] order.
pub(crate) const RECORD_COLUMNS: &str = "seq, kind, namespace, session, turn, role, speaker, \
     text, event_utc_us, event_offset_s, ingest_utc_us, meta, target_record, erased_seqs, \
     erased_by, content_digest, digest, chain, salt, number";

/// The index of the first column after [`RECORD_COLUMNS`] (where [`PREV_CHAIN`] goes).
pub(crate) const AFTER_RECORD_COLUMNS: usize = 20;

/// The next record number of `namespace`: numbers count the namespace's own records only, so
/// no tenant learns from its ids how much others write.
pub(crate) fn next_number(conn: &Connection, namespace: &str) -> rusqlite::Result<TurnId> {
    let last = last_number(conn, namespace)?;
    Ok(TurnId::from_raw(last.map_or(1, |n| n + 1)))
}

/// The number of `namespace`'s last record (turn or redaction), if any.
pub(crate) fn last_number(conn: &Connection, namespace: &str) -> rusqlite::Result<Option<u64>> {
    let last: Option<i64> = conn
        .prepare_cached("SELECT max(number) FROM records WHERE namespace = ?1")?
        .query_row([namespace], |r| r.get(0))?;
    Ok(last.map(|n| n as u64))
}

/// Maps a rusqlite error to a [`StorageError`] naming the ledger file.
pub(crate) fn sql_err(path: &Path) -> impl Fn(rusqlite::Error) -> StorageError + '_ {
    move |source| StorageError::Sqlite { path: path.to_owned(), source }
}

/// Per-connection settings: durability, erasure hygiene and lock waiting.
pub(crate) fn configure(conn: &Connection, path: &Path) -> Result<(), StorageError> {
    conn.busy_timeout(std::time::Duration::from_secs(30)).map_err(sql_err(path))?;
    conn.execute_batch(
        "PRAGMA synchronous = FULL;
         PRAGMA secure_delete = ON;
         PRAGMA cell_size_check = ON;
         PRAGMA trusted_schema = OFF;",
    )
    .map_err(sql_err(path))
}

/// Whether clearing a turn keeps its cell in place, given the bytes cleared (text, speaker,
/// meta) and those of its namespace, session and role.
///
/// Why that matters: records are only ever appended at the end of the table and cleared, never
/// deleted, so SQLite never moves a record's cell to another page (an append past a full leaf
/// starts a new leaf with the new cell alone, `balance_quick`) unless an update makes a cell
/// outgrow its page. A cell that shrinks is rewritten within its page, and `secure_delete`
/// zeroes the bytes it leaves and any overflow page it frees. Clearing removes the cleared
/// bytes and the 32-byte salt and adds the 32-byte content digest and the eraser's position
/// (at most 8 bytes): the cell shrinks when the cleared bytes outweigh that position. A turn
/// whose payload spilled to overflow pages keeps at least 489 bytes in its cell on the
/// ledger's 4 KiB pages (SQLite's minimum local payload), which the cleared row (about 200
/// bytes besides its names) fits while its names stay short.
pub(crate) fn cell_stays_put(cleared_bytes: i64, name_bytes: i64) -> bool {
    cleared_bytes > 8 && name_bytes <= 200
}

/// The head as recorded in the metadata table.
#[derive(Debug, Clone)]
pub(crate) struct MetaHead {
    pub format_version: Option<String>,
    pub head_seq: Option<String>,
    pub chain_head: Option<String>,
}

pub(crate) fn read_meta(conn: &Connection) -> rusqlite::Result<MetaHead> {
    let get = |key: &str| meta_value(conn, key);
    Ok(MetaHead {
        format_version: get("format_version")?,
        head_seq: get("head_seq")?,
        chain_head: get("chain_head")?,
    })
}

impl MetaHead {
    pub(crate) fn parse(&self) -> Result<Head, String> {
        Head::parse(self.head_seq.as_deref(), self.chain_head.as_deref())
    }
}

pub(crate) fn write_head(conn: &Connection, head: Head) -> rusqlite::Result<()> {
    let seq = head.last.map_or(0, LedgerPosition::raw).to_string();
    let mut set = conn.prepare_cached("UPDATE ledger_meta SET value = ?1 WHERE key = ?2")?;
    set.execute([seq.as_str(), "head_seq"])?;
    set.execute([head.chain.to_hex().as_str(), "chain_head"])?;
    Ok(())
}

/// The `ledger_meta` key set in the transaction of an erasure and removed once its scrub has
/// finished: while present, old bytes of erased records may still be in the files (a crash came
/// between the commit and the end of the scrub), and the next read-write open scrubs.
pub(crate) const SCRUB_PENDING: &str = "scrub_pending";

/// The redaction whose scrub an interrupted erasure left unfinished, if any.
pub(crate) fn scrub_pending(conn: &Connection) -> rusqlite::Result<Option<String>> {
    meta_value(conn, SCRUB_PENDING)
}

fn meta_value(conn: &Connection, key: &str) -> rusqlite::Result<Option<String>> {
    conn.prepare_cached("SELECT value FROM ledger_meta WHERE key = ?1")?
        .query_row([key], |r| r.get(0))
        .optional()
}

pub(crate) fn clear_scrub_pending(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute("DELETE FROM ledger_meta WHERE key = ?1", [SCRUB_PENDING])?;
    Ok(())
}

/// The last record's sequence number and chain hash, straight from the records table.
pub(crate) fn last_record(conn: &Connection) -> rusqlite::Result<Option<(i64, Vec<u8>)>> {
    // Cached: every compile asks for the head (is the namespace's index current?).
    conn.prepare_cached("SELECT seq, chain FROM records ORDER BY seq DESC LIMIT 1")?
        .query_row([], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()
}

/// The chain hash of the record before each selected one (column [`AFTER_RECORD_COLUMNS`] after
/// [`RECORD_COLUMNS`]); NULL for the first record.
pub(crate) const PREV_CHAIN: &str =
    "(SELECT p.chain FROM records AS p WHERE p.seq = records.seq - 1)";

/// Reads the [`PREV_CHAIN`] column at `idx`; a value of the wrong type comes back as an empty
/// blob, which the check reports as corruption.
pub(crate) fn prev_chain_at(
    row: &rusqlite::Row<'_>,
    idx: usize,
) -> rusqlite::Result<Option<Vec<u8>>> {
    Ok(match row.get_ref(idx)? {
        ValueRef::Null => None,
        ValueRef::Blob(bytes) => Some(bytes.to_vec()),
        _ => Some(Vec::new()),
    })
}

/// A record row read loosely: a column of another storage type is listed in the row's
/// `type_errors` (and decodes as corruption naming it), never a failure of the read.
pub fn raw_record(row: &rusqlite::Row<'_>) -> rusqlite::Result<RawRecord> {
    let mut type_errors = Vec::new();
    let mut int = |idx: usize, name: &'static str| -> rusqlite::Result<Option<i64>> {
        Ok(match row.get_ref(idx)? {
            ValueRef::Null => None,
            ValueRef::Integer(v) => Some(v),
            _ => {
                type_errors.push(name);
                None
            }
        })
    };
    let seq = int(0, "seq")?.unwrap_or(0);
    let kind = int(1, "kind")?;
    let turn = int(4, "turn")?;
    let event_utc_us = int(8, "event_utc_us")?;
    let event_offset_s = int(9, "event_offset_s")?;
    let ingest_utc_us = int(10, "ingest_utc_us")?;
    let target_record = int(12, "target_record")?;
    let erased_by = int(14, "erased_by")?;
    let number = int(19, "number")?;
    let mut text = |idx: usize, name: &'static str| -> rusqlite::Result<Option<String>> {
        Ok(match row.get_ref(idx)? {
            ValueRef::Null => None,
            ValueRef::Text(bytes) => match std::str::from_utf8(bytes) {
                Ok(s) => Some(s.to_owned()),
                Err(_) => {
                    type_errors.push(name);
                    None
                }
            },
            _ => {
                type_errors.push(name);
                None
            }
        })
    };
    let namespace = text(2, "namespace")?;
    let session = text(3, "session")?;
    let role = text(5, "role")?;
    let speaker = text(6, "speaker")?;
    let text_col = text(7, "text")?;
    let meta = text(11, "meta")?;
    let mut blob = |idx: usize, name: &'static str| -> rusqlite::Result<Option<Vec<u8>>> {
        Ok(match row.get_ref(idx)? {
            ValueRef::Null => None,
            ValueRef::Blob(bytes) => Some(bytes.to_vec()),
            _ => {
                type_errors.push(name);
                None
            }
        })
    };
    let erased_seqs = blob(13, "erased_seqs")?;
    let content_digest = blob(15, "content_digest")?;
    let digest = blob(16, "digest")?;
    let chain = blob(17, "chain")?;
    let salt = blob(18, "salt")?;
    Ok(RawRecord {
        seq,
        kind,
        namespace,
        session,
        turn,
        role,
        speaker,
        text: text_col,
        event_utc_us,
        event_offset_s,
        ingest_utc_us,
        meta,
        target_record,
        erased_seqs,
        erased_by,
        content_digest,
        digest,
        chain,
        salt,
        number,
        type_errors,
    })
}

/// A row selected with [`RECORD_COLUMNS`] and [`PREV_CHAIN`].
pub(crate) fn chained_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<ChainedRow> {
    Ok(ChainedRow { raw: raw_record(row)?, prev_chain: prev_chain_at(row, AFTER_RECORD_COLUMNS)? })
}

/// The records table inside a transaction on one connection of the ledger file at `path`.
pub(crate) struct SqliteTable<'c> {
    conn: &'c Connection,
    path: &'c Path,
    /// Set when a cleared record's cell may not fit where it was (see [`cell_stays_put`]).
    cells_may_move: bool,
}

impl<'c> SqliteTable<'c> {
    pub(crate) fn new(conn: &'c Connection, path: &'c Path) -> SqliteTable<'c> {
        SqliteTable { conn, path, cells_may_move: false }
    }

    /// Whether a record cleared through this table may have left a copy of its old bytes
    /// elsewhere in the file: then only rewriting the file (`VACUUM`) scrubs them.
    pub(crate) fn cells_may_move(&self) -> bool {
        self.cells_may_move
    }

    fn sql(&self) -> impl Fn(rusqlite::Error) -> StorageError + '_ {
        sql_err(self.path)
    }

    fn chained_rows(
        &self,
        selection: &str,
        params: impl rusqlite::Params,
    ) -> Result<Vec<ChainedRow>, StorageError> {
        let mut stmt = self
            .conn
            .prepare_cached(&format!(
                "SELECT {RECORD_COLUMNS}, {PREV_CHAIN} FROM records WHERE {selection}"
            ))
            .map_err(self.sql())?;
        let rows = stmt.query_map(params, chained_row).map_err(self.sql())?;
        rows.collect::<Result<_, _>>().map_err(self.sql())
    }
}

impl RecordTable for SqliteTable<'_> {
    fn recorded_head(&mut self) -> Result<Result<Head, String>, StorageError> {
        Ok(read_meta(self.conn).map_err(self.sql())?.parse())
    }

    fn write_head(&mut self, head: Head) -> Result<(), StorageError> {
        write_head(self.conn, head).map_err(self.sql())
    }

    fn last_record(&mut self) -> Result<Option<ChainedRow>, StorageError> {
        Ok(self.chained_rows("seq = (SELECT max(seq) FROM records)", [])?.pop())
    }

    fn erased_digest(
        &mut self,
        position: LedgerPosition,
        redaction: LedgerPosition,
    ) -> Result<Option<Vec<u8>>, StorageError> {
        self.conn
            .prepare_cached("SELECT digest FROM records WHERE seq = ?1 AND erased_by = ?2")
            .and_then(|mut stmt| {
                stmt.query_row([position.raw() as i64, redaction.raw() as i64], |r| r.get(0))
            })
            .optional()
            .map_err(self.sql())
    }

    fn stored_turns(
        &mut self,
        keys: &[TurnKey<'_>],
    ) -> Result<HashMap<(String, String, u32), ChainedRow>, StorageError> {
        let mut stored = HashMap::new();
        for &(namespace, session, turn) in keys {
            let selection =
                format!("namespace = ?1 AND session = ?2 AND turn = ?3 AND kind = {KIND_TURN}");
            if let Some(row) =
                self.chained_rows(&selection, params![namespace, session, turn])?.pop()
            {
                stored.insert((namespace.to_owned(), session.to_owned(), turn), row);
            }
        }
        Ok(stored)
    }

    fn next_number(&mut self, namespace: &str) -> Result<TurnId, StorageError> {
        next_number(self.conn, namespace).map_err(self.sql())
    }

    fn insert_turns(
        &mut self,
        rows: &[NewTurn<'_>],
        ingest_utc_micros: i64,
    ) -> Result<(), StorageError> {
        let mut insert = self
            .conn
            .prepare_cached(
                "INSERT INTO records (seq, kind, namespace, session, turn, role, speaker, text, \
                 event_utc_us, event_offset_s, ingest_utc_us, meta, digest, chain, salt, number) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
            )
            .map_err(self.sql())?;
        for row in rows {
            let turn = row.turn;
            insert
                .execute(params![
                    row.position.raw() as i64,
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
                    row.meta,
                    row.digest.as_bytes().as_slice(),
                    row.chain.as_bytes().as_slice(),
                    row.salt.as_slice(),
                    row.number.raw() as i64,
                ])
                .map_err(self.sql())?;
        }
        Ok(())
    }

    fn savepoint(&mut self) -> Result<(), StorageError> {
        self.conn.execute_batch("SAVEPOINT batch").map_err(self.sql())
    }

    fn release_savepoint(&mut self) -> Result<(), StorageError> {
        self.conn.execute_batch("RELEASE batch").map_err(self.sql())
    }

    fn rollback_to_savepoint(&mut self) -> Result<(), StorageError> {
        self.conn.execute_batch("ROLLBACK TO batch; RELEASE batch").map_err(self.sql())
    }

    fn erase_candidates(&mut self, target: &EraseTarget) -> Result<Vec<ChainedRow>, StorageError> {
        let ns = target.namespace().as_str();
        match target {
            EraseTarget::Namespace(_) => self.chained_rows(
                &format!("kind = {KIND_TURN} AND namespace = ?1 ORDER BY seq"),
                params![ns],
            ),
            EraseTarget::Session(_, session) => self.chained_rows(
                &format!("kind = {KIND_TURN} AND namespace = ?1 AND session = ?2 ORDER BY seq"),
                params![ns, session.as_str()],
            ),
            EraseTarget::Record(_, number) => self
                .chained_rows("namespace = ?1 AND number = ?2", params![ns, number.raw() as i64]),
        }
    }

    fn insert_redaction(&mut self, row: &NewRedaction<'_>) -> Result<(), StorageError> {
        self.conn
            .prepare_cached(&format!(
                "INSERT INTO records (seq, kind, namespace, session, ingest_utc_us, \
                 target_record, erased_seqs, digest, chain, number) \
                 VALUES (?1, {KIND_REDACTION}, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"
            ))
            .and_then(|mut insert| {
                insert.execute(params![
                    row.position.raw() as i64,
                    row.namespace,
                    row.session,
                    row.ingest_utc_micros,
                    row.target_record.map(|p| p.raw() as i64),
                    row.erased_seqs,
                    row.digest.as_bytes().as_slice(),
                    row.chain.as_bytes().as_slice(),
                    row.number.raw() as i64,
                ])
            })
            .map_err(self.sql())?;
        Ok(())
    }

    fn clear_erased(
        &mut self,
        redaction: LedgerPosition,
        erased: &[(&RawRecord, [u8; 32])],
    ) -> Result<(), StorageError> {
        let mut clear = self
            .conn
            .prepare_cached(
                "UPDATE records SET text = NULL, speaker = NULL, meta = NULL, salt = NULL, \
                 erased_by = ?1, content_digest = ?2 WHERE seq = ?3",
            )
            .map_err(self.sql())?;
        let page_size: i64 =
            self.conn.query_row("PRAGMA page_size", [], |r| r.get(0)).map_err(self.sql())?;
        self.cells_may_move |= page_size < 4096;
        let bytes = |fields: [&Option<String>; 3]| {
            fields.iter().map(|f| f.as_deref().map_or(0, str::len) as i64).sum::<i64>()
        };
        for (raw, content) in erased {
            let cleared = bytes([&raw.text, &raw.speaker, &raw.meta]);
            let names = bytes([&raw.namespace, &raw.session, &raw.role]);
            self.cells_may_move |= !cell_stays_put(cleared, names);
            let position = raw.position().raw() as i64;
            clear
                .execute(params![redaction.raw() as i64, content.as_slice(), position])
                .map_err(self.sql())?;
        }
        Ok(())
    }

    fn mark_scrub_pending(&mut self, redaction: LedgerPosition) -> Result<(), StorageError> {
        self.conn
            .execute(
                "INSERT OR REPLACE INTO ledger_meta (key, value) VALUES (?1, ?2)",
                [SCRUB_PENDING, &redaction.raw().to_string()],
            )
            .map_err(self.sql())?;
        Ok(())
    }
}
