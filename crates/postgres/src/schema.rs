//! The PostgreSQL schema: created once per database, then only checked, never altered.
//!
//! `records` mirrors the embedded ledger's table column for column (`docs/ledger-format.md`),
//! with PostgreSQL types: the digests are over the canonical encoding, never over a row format,
//! so the same record has the same digest in both stores. `meta` is `json`, which keeps the
//! canonical text byte for byte (`jsonb` would re-serialise it and break the digest).

use postgres::GenericClient;

use crate::{ConnectError, DatabaseError};

/// The version of this schema, stored as `ledger_meta.schema_version`. A database holding
/// another version is refused, never migrated silently.
pub const SCHEMA_VERSION: u32 = 1;

/// `ledger_meta.record_format`: the embedded ledger's format version whose records, digests,
/// chain and per-namespace numbering this schema stores.
const RECORD_FORMAT: u32 = evicortex_ledger::FORMAT_VERSION;

/// The advisory lock that serialises schema creation between connections arriving together
/// ("EVCX"; transaction-scoped, so never left held).
const SCHEMA_LOCK: i64 = 0x4556_4358;

/// `records.kind` of a turn.
pub(crate) const KIND_TURN: i16 = 1;
/// `records.kind` of a redaction.
pub(crate) const KIND_REDACTION: i16 = 2;

const CREATE: &str = "
CREATE TABLE ledger_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE records (
    seq            BIGINT PRIMARY KEY CHECK (seq > 0),
    kind           SMALLINT NOT NULL CHECK (kind IN (1, 2)),
    namespace      TEXT NOT NULL,
    session        TEXT,
    turn           BIGINT CHECK (turn BETWEEN 0 AND 4294967295),
    role           TEXT,
    speaker        TEXT,
    text           TEXT,
    event_utc_us   BIGINT,
    event_offset_s INTEGER,
    ingest_utc_us  BIGINT NOT NULL,
    meta           JSON,
    target_record  BIGINT,
    erased_seqs    BYTEA,
    erased_by      BIGINT,
    content_digest BYTEA,
    digest         BYTEA NOT NULL,
    chain          BYTEA NOT NULL,
    salt           BYTEA,
    number         BIGINT NOT NULL CHECK (number > 0),
    UNIQUE (namespace, session, turn),
    UNIQUE (namespace, number)
);
";

fn db(url: &str, op: &'static str) -> impl FnOnce(postgres::Error) -> DatabaseError {
    let url = url.to_owned();
    move |source| DatabaseError { url, op, source }
}

fn unsupported(url: &str, what: String) -> ConnectError {
    ConnectError::UnsupportedSchema {
        url: url.to_owned(),
        what,
        expected: format!(
            "a ledger of schema version {SCHEMA_VERSION} (record format {RECORD_FORMAT}), or \
             an empty database"
        ),
    }
}

/// Texts are stored and digested byte for byte; another encoding would transcode them.
fn check_encoding(client: &mut postgres::Client, url: &str) -> Result<(), ConnectError> {
    let encoding: String = client
        .query_one("SHOW server_encoding", &[])
        .map_err(db(url, "reading the server encoding"))?
        .get(0);
    if encoding != "UTF8" {
        return Err(unsupported(url, format!("a database encoded in {encoding}, not UTF8")));
    }
    Ok(())
}

/// Which of the two ledger tables exist: (`ledger_meta`, `records`).
fn tables_found(client: &mut impl GenericClient, url: &str) -> Result<(bool, bool), ConnectError> {
    let row = client
        .query_one(
            "SELECT to_regclass('ledger_meta') IS NOT NULL, to_regclass('records') IS NOT NULL",
            &[],
        )
        .map_err(db(url, "looking for the ledger tables"))?;
    Ok((row.get(0), row.get(1)))
}

/// Refuses tables that are not a ledger of this schema version and record format.
fn check_found(
    client: &mut impl GenericClient,
    url: &str,
    found: (bool, bool),
) -> Result<(), ConnectError> {
    match found {
        (true, true) => {
            let version =
                meta_value(client, "schema_version").map_err(db(url, "reading ledger_meta"))?;
            let format =
                meta_value(client, "record_format").map_err(db(url, "reading ledger_meta"))?;
            if version.as_deref() != Some(&SCHEMA_VERSION.to_string())
                || format.as_deref() != Some(&RECORD_FORMAT.to_string())
            {
                return Err(unsupported(
                    url,
                    format!(
                        "a ledger of schema version {} (record format {})",
                        version.as_deref().unwrap_or("(none)"),
                        format.as_deref().unwrap_or("(none)")
                    ),
                ));
            }
            Ok(())
        }
        (true, false) => {
            Err(unsupported(url, "a ledger_meta table without a records table".to_owned()))
        }
        (false, true) => Err(unsupported(url, "a records table that is not a ledger's".to_owned())),
        (false, false) => Err(unsupported(url, "no ledger tables".to_owned())),
    }
}

/// Creates the schema in an empty database, or checks the one found. Refuses (unchanged) a
/// database with a ledger of another version or with tables of ours that are not a ledger.
pub(crate) fn ensure(client: &mut postgres::Client, url: &str) -> Result<(), ConnectError> {
    check_encoding(client, url)?;
    let mut tx = client.transaction().map_err(db(url, "starting the schema transaction"))?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK])
        .map_err(db(url, "locking schema creation"))?;
    match tables_found(&mut tx, url)? {
        (false, false) => {
            tx.batch_execute(CREATE).map_err(db(url, "creating the ledger tables"))?;
            let created = chrono::Utc::now().timestamp_micros().to_string();
            let zeros = evicortex_ledger::ChainHash::GENESIS.to_hex();
            for (key, value) in [
                ("schema_version", SCHEMA_VERSION.to_string()),
                ("record_format", RECORD_FORMAT.to_string()),
                ("head_seq", "0".to_owned()),
                ("chain_head", zeros),
                ("created_utc_us", created),
            ] {
                tx.execute("INSERT INTO ledger_meta (key, value) VALUES ($1, $2)", &[&key, &value])
                    .map_err(db(url, "initialising ledger_meta"))?;
            }
        }
        found => check_found(&mut tx, url, found)?,
    }
    tx.commit().map_err(db(url, "committing the schema"))?;
    Ok(())
}

/// Checks the schema on a hot standby, in a read-only transaction: a database without the
/// ledger tables is [`ConnectError::ReplicaWithoutLedger`], since only the primary can create
/// them.
pub(crate) fn check_on_replica(
    client: &mut postgres::Client,
    url: &str,
) -> Result<(), ConnectError> {
    check_encoding(client, url)?;
    let mut tx =
        crate::client_pool::read_snapshot(client).map_err(db(url, "starting the schema check"))?;
    match tables_found(&mut tx, url)? {
        (false, false) => return Err(ConnectError::ReplicaWithoutLedger { url: url.to_owned() }),
        found => check_found(&mut tx, url, found)?,
    }
    tx.commit().map_err(db(url, "ending the schema check"))?;
    Ok(())
}

/// The value of `key` in `ledger_meta`, if present.
pub(crate) fn meta_value(
    client: &mut impl GenericClient,
    key: &str,
) -> Result<Option<String>, postgres::Error> {
    Ok(client
        .query_opt("SELECT value FROM ledger_meta WHERE key = $1", &[&key])?
        .map(|row| row.get(0)))
}
