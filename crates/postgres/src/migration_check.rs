//! After a migration: both ledgers verified, their reports compared field by field.

use evicortex_ledger::{EvidenceLedger, Ledger, VerifyReport};

use crate::PgLedger;

/// Both verify reports of a migration, found equal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrationCheck {
    /// What the embedded ledger's verify reports.
    pub embedded: VerifyReport,
    /// What the PostgreSQL ledger's verify reports: the same.
    pub postgres: VerifyReport,
}

/// Why [`verify_migration`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MigrationCheckError {
    /// The embedded ledger does not verify.
    #[error("the embedded ledger does not verify: {0}")]
    Embedded(#[source] evicortex_ledger::VerifyError),
    /// The PostgreSQL ledger does not verify.
    #[error("the PostgreSQL ledger does not verify: {0}")]
    Postgres(#[source] crate::VerifyError),
    /// Both verify, with different reports: the first field that differs.
    #[error("the ledgers differ in {field}: embedded {embedded}, PostgreSQL {postgres}")]
    Differs {
        /// The first report field that differs, in report order.
        field: &'static str,
        /// The embedded ledger's value.
        embedded: String,
        /// The PostgreSQL ledger's value.
        postgres: String,
    },
}

/// Runs [`Ledger::verify`] and [`PgLedger::verify`] and compares their reports: record counts
/// by kind, head position and chain head. Fails with the first difference.
pub fn verify_migration(
    embedded: &Ledger,
    postgres: &PgLedger,
) -> Result<MigrationCheck, MigrationCheckError> {
    let e = embedded.verify().map_err(MigrationCheckError::Embedded)?;
    let p = postgres.verify().map_err(MigrationCheckError::Postgres)?;
    let head = |r: &VerifyReport| r.head.map_or("(empty)".to_owned(), |h| h.to_string());
    let fields: [(&'static str, String, String); 6] = [
        ("records", e.records.to_string(), p.records.to_string()),
        ("turns", e.turns.to_string(), p.turns.to_string()),
        ("erased_turns", e.erased_turns.to_string(), p.erased_turns.to_string()),
        ("redactions", e.redactions.to_string(), p.redactions.to_string()),
        ("head", head(&e), head(&p)),
        ("chain_head", e.chain_head.to_hex(), p.chain_head.to_hex()),
    ];
    if let Some((field, embedded, postgres)) = fields.into_iter().find(|(_, e, p)| e != p) {
        return Err(MigrationCheckError::Differs { field, embedded, postgres });
    }
    Ok(MigrationCheck { embedded: e, postgres: p })
}
