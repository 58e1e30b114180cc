//! Migrating a version-1 or version-2 ledger to the current format, explicitly and in one
//! transaction.
//!
//! Version 2 lacked record numbers: ids were ledger positions, which told a tenant how much
//! every other tenant wrote. Migrating numbers each namespace's records from 1 in ledger order
//! (a single-namespace ledger keeps its ids).
//!
//! Version 1 kept an erased turn's unsalted content digest, which confirms a guessed text. The
//! migration verifies the version-1 chain in full, then gives every live turn a fresh salt and
//! every record its version-2 digest and chain hash, checks the result with the version-2
//! verifier and commits; then it scrubs the files so the version-1 digests are gone from them.
//! A crash leaves either the version-1 ledger or the migrated one.

use std::{collections::HashMap, path::Path};

use evicortex_core::{EvidenceDigest, TurnId};
use rusqlite::{Connection, OpenFlags, TransactionBehavior, params};

use crate::{
    ChainHash, FORMAT_VERSION, LedgerPosition, MigrateError, OpenError, StorageError,
    private_files,
    record::{ContentSalt, Format, migrated_erased_content, redaction_digest_in},
    row::{RawRecord, StoredBody},
    store::{self, APPLICATION_ID, RECORD_COLUMNS, sql_err},
    table::Head,
    verify::verify_on,
};

/// What [`Ledger::migrate`](crate::Ledger::migrate) did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct MigrationReport {
    /// The format version the ledger had (the current one when there was nothing to do).
    pub from_version: u32,
    /// The format version it has now.
    pub to_version: u32,
    /// Records rewritten (from version 1) or numbered (from version 2); 0 when there was nothing
    /// to do.
    pub records: u64,
    /// Erased turns among them (their kept content digest is re-salted and the salt dropped).
    pub erased_turns: u64,
    /// The version-1 chain head, verified before the rewrite; whoever recorded it elsewhere can
    /// compare. `None` when there was nothing to do.
    pub previous_chain_head: Option<ChainHash>,
    /// The chain head now.
    pub chain_head: ChainHash,
}

/// Rows rewritten per read of the records table.
const BATCH: i64 = 4096;

impl crate::Ledger {
    /// Migrates the ledger at `path` to the current format version, in place. A ledger already
    /// at the current version is left alone. Refuses a file that is not a ledger, a version it
    /// does not know, and a version-1 ledger that does not verify (nothing is changed then).
    pub fn migrate(path: &Path) -> Result<MigrationReport, MigrateError> {
        if !path.exists() {
            return Err(MigrateError::Open(OpenError::NotFound { path: path.to_owned() }));
        }
        let sql = sql_err(path);
        let mut conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(&sql)?;
        store::configure(&conn, path)?;
        let app_id: i32 =
            conn.query_row("PRAGMA application_id", [], |r| r.get(0)).map_err(&sql)?;
        if app_id != APPLICATION_ID {
            return Err(MigrateError::Open(OpenError::Corrupted {
                path: path.to_owned(),
                detail: format!("application_id is {app_id:#x}, not an EviCortex ledger"),
            }));
        }
        let found = store::read_meta(&conn).map_err(&sql)?.format_version.unwrap_or_default();
        if found == FORMAT_VERSION.to_string() {
            let head = store::read_meta(&conn).map_err(&sql)?.parse().map_err(|detail| {
                MigrateError::Open(OpenError::Corrupted { path: path.to_owned(), detail })
            })?;
            return Ok(MigrationReport {
                from_version: FORMAT_VERSION,
                to_version: FORMAT_VERSION,
                records: 0,
                erased_turns: 0,
                previous_chain_head: None,
                chain_head: head.chain,
            });
        }
        if found == "2" {
            return number_records(&mut conn, path);
        }
        if found != "1" {
            return Err(MigrateError::UnsupportedFormat { path: path.to_owned(), found });
        }

        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(&sql)?;
        tx.execute_batch(store::ADD_SALT_COLUMN).map_err(&sql)?;
        tx.execute_batch(store::ADD_NUMBER_COLUMN).map_err(&sql)?;
        let v1 = verify_on(&tx, path, Format::V1, &mut |_, _| {})
            .map_err(|source| MigrateError::Unverified { path: path.to_owned(), source })?;
        let (records, erased_turns, chain_head) = rewrite(&tx, path)?;
        tx.execute_batch(store::FILL_NUMBERS).map_err(&sql)?;
        tx.execute(
            "UPDATE ledger_meta SET value = ?1 WHERE key = 'format_version'",
            [FORMAT_VERSION.to_string()],
        )
        .map_err(&sql)?;
        store::write_head(&tx, Head { last: v1.head, chain: chain_head }).map_err(&sql)?;
        tx.execute(
            "INSERT INTO ledger_meta (key, value) VALUES ('migrated_from_v1_chain_head', ?1)",
            [v1.chain_head.to_hex()],
        )
        .map_err(&sql)?;
        let v2 = verify_on(&tx, path, Format::V2, &mut |_, _| {}).map_err(|source| {
            MigrateError::Internal {
                path: path.to_owned(),
                detail: format!(
                    "the migrated ledger does not verify, nothing was changed: {source}"
                ),
            }
        })?;
        tx.commit().map_err(&sql)?;

        // The version-1 content digests of erased turns must not survive in free pages or the WAL.
        let (busy, _, _): (i64, i64, i64) = conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })
            .map_err(&sql)?;
        conn.execute_batch("VACUUM;").map_err(&sql)?;
        let (busy_after, _, _): (i64, i64, i64) = conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })
            .map_err(&sql)?;
        if busy != 0 || busy_after != 0 {
            return Err(MigrateError::Internal {
                path: path.to_owned(),
                detail: "the migration is committed, but another process holds the ledger open, so \
                         its old bytes could not be scrubbed; run `evicortex migrate` again when it \
                         is closed"
                    .to_owned(),
            });
        }
        private_files::restrict_sqlite_files(path).map_err(|source| {
            MigrateError::Storage(StorageError::Io {
                op: "restricting to its owner",
                path: path.to_owned(),
                source,
            })
        })?;
        Ok(MigrationReport {
            from_version: 1,
            to_version: FORMAT_VERSION,
            records,
            erased_turns,
            previous_chain_head: Some(v1.chain_head),
            chain_head: v2.chain_head,
        })
    }
}

/// Version 2 to 3: every record gets its number in its namespace, in ledger order, in one
/// transaction; the result must verify (a version-2 ledger that does not is left unchanged).
/// Nothing secret changes, so there is nothing to scrub.
fn number_records(conn: &mut Connection, path: &Path) -> Result<MigrationReport, MigrateError> {
    let sql = sql_err(path);
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(&sql)?;
    tx.execute_batch(store::ADD_NUMBER_COLUMN).map_err(&sql)?;
    tx.execute_batch(store::FILL_NUMBERS).map_err(&sql)?;
    let report = verify_on(&tx, path, Format::V2, &mut |_, _| {})
        .map_err(|source| MigrateError::Unverified { path: path.to_owned(), source })?;
    tx.execute(
        "UPDATE ledger_meta SET value = ?1 WHERE key = 'format_version'",
        [FORMAT_VERSION.to_string()],
    )
    .map_err(&sql)?;
    tx.commit().map_err(&sql)?;
    Ok(MigrationReport {
        from_version: 2,
        to_version: FORMAT_VERSION,
        records: report.records,
        erased_turns: report.erased_turns,
        previous_chain_head: Some(report.chain_head),
        chain_head: report.chain_head,
    })
}

/// Rewrites every record with its version-2 salt, content digest, digest and chain hash, in
/// ledger order. Returns (records, erased turns, chain head).
fn rewrite(tx: &Connection, path: &Path) -> Result<(u64, u64, ChainHash), MigrateError> {
    let sql = sql_err(path);
    let mut chain = ChainHash::GENESIS;
    // Erased turns waiting for their redaction: redaction seq -> (seq -> new digest).
    let mut pending: HashMap<LedgerPosition, HashMap<TurnId, EvidenceDigest>> = HashMap::new();
    let (mut records, mut erased_turns, mut after) = (0u64, 0u64, 0i64);
    let mut update = tx
        .prepare(
            "UPDATE records SET salt = ?1, content_digest = ?2, digest = ?3, chain = ?4 \
             WHERE seq = ?5",
        )
        .map_err(&sql)?;
    loop {
        let batch: Vec<RawRecord> = {
            let mut stmt = tx
                .prepare_cached(&format!(
                    "SELECT {RECORD_COLUMNS} FROM records WHERE seq > ?1 ORDER BY seq LIMIT ?2"
                ))
                .map_err(&sql)?;
            stmt.query_map([after, BATCH], store::raw_record)
                .map_err(&sql)?
                .collect::<Result<_, _>>()
                .map_err(&sql)?
        };
        let Some(last) = batch.last() else { break };
        after = last.seq;
        for mut raw in batch {
            let id = raw.seq_id();
            let corrupt = |detail: String| MigrateError::Internal {
                path: path.to_owned(),
                detail: format!("record {id} after verification: {detail}"),
            };
            let record = raw.decode_in(Format::V1).map_err(|c| corrupt(c.detail))?;
            let digest = match record.body {
                StoredBody::Turn(_) => {
                    raw.salt = Some(random_salt(path)?.as_bytes().to_vec());
                    raw.recompute_turn_digest().map_err(|c| corrupt(c.detail))?
                }
                StoredBody::ErasedTurn { erased_by } => {
                    erased_turns += 1;
                    let v1_content = raw
                        .content_digest
                        .as_deref()
                        .and_then(|d| <[u8; 32]>::try_from(d).ok())
                        .ok_or_else(|| {
                            corrupt("column content_digest is not 32 bytes".to_owned())
                        })?;
                    // Salted with a salt nobody keeps.
                    let content = migrated_erased_content(&random_salt(path)?, &v1_content);
                    raw.content_digest = Some(content.to_vec());
                    let digest = raw.recompute_turn_digest().map_err(|c| corrupt(c.detail))?;
                    pending.entry(erased_by).or_default().insert(id, digest);
                    digest
                }
                StoredBody::Redaction { target, erased } => {
                    let mut waiting = pending.remove(&raw.position()).unwrap_or_default();
                    let listed = erased
                        .iter()
                        .map(|id| waiting.remove(id).map(|d| (*id, d)))
                        .collect::<Option<Vec<_>>>()
                        .ok_or_else(|| corrupt("lists a record it did not erase".to_owned()))?;
                    redaction_digest_in(Format::V2, &target, record.ingest_utc_micros, &listed)
                }
            };
            chain = chain.link(&digest);
            update
                .execute(params![
                    raw.salt.as_deref(),
                    raw.content_digest.as_deref(),
                    digest.as_bytes().as_slice(),
                    chain.as_bytes().as_slice(),
                    raw.seq,
                ])
                .map_err(&sql)?;
            records += 1;
        }
    }
    Ok((records, erased_turns, chain))
}

fn random_salt(path: &Path) -> Result<ContentSalt, MigrateError> {
    ContentSalt::random().map_err(|e| {
        MigrateError::Storage(StorageError::Io {
            op: "drawing a random content salt for",
            path: path.to_owned(),
            source: std::io::Error::other(e.to_string()),
        })
    })
}
