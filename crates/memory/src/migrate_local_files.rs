//! The local files a migration to PostgreSQL carries from the embedded store's directory into the
//! database: the embedding cache's rows, whose vectors would otherwise be computed again (hours
//! at a million turns), the overlength policy the store was embedded with, and the store's
//! encoder list (`encoders.json`). All are valid for the copy because the copy holds the same
//! records, salts and texts. What the database holds already is kept.

use std::path::{Path, PathBuf};

use crate::{
    EMBEDDINGS_FILE, STORE_ENCODERS_FILE,
    embedding_cache::{EmbeddingCache, live_keep},
};

/// What a migration did with one of the embedded store's local files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CarriedFile {
    /// Copied into the database (rows it held already kept).
    Copied,
    /// The database already held one, which was kept.
    Kept,
    /// The embedded store has none.
    Absent,
}

/// Why a local file could not be carried over.
#[derive(Debug, thiserror::Error)]
#[error("copying {from} to {to}: {detail}")]
pub struct CarryError {
    /// The embedded store's file.
    pub from: PathBuf,
    /// Where it was to go.
    pub to: PathBuf,
    /// What failed.
    pub detail: String,
}

/// Copies the rows of the embedding cache of the store in `from` (vectors of texts a live turn
/// holds, refusals, identities) into the database `to`'s cache, whose live turns `ledger` reads
/// (the copy of the store's), keeping the rows it holds already.
pub(crate) fn carry_embedding_cache(
    from: &Path,
    to: &str,
    ledger: &dyn evicortex_ledger::EvidenceLedger,
) -> Result<CarriedFile, CarryError> {
    if !from.join(EMBEDDINGS_FILE).exists() {
        return Ok(CarriedFile::Absent);
    }
    let fail = |e: &dyn std::fmt::Display| CarryError {
        from: from.join(EMBEDDINGS_FILE),
        to: PathBuf::from(format!(
            "{} (embedding_vectors)",
            evicortex_postgres::redact_password(to)
        )),
        detail: format!("{e:#}"),
    };
    let file = EmbeddingCache::open_to_read(from).map_err(|e| fail(&e))?;
    let db = evicortex_postgres::PgShared::connect(to).map_err(|e| fail(&e))?;
    let cache = EmbeddingCache::in_database(db);
    cache.import_file(&file, &mut || live_keep(ledger)).map_err(|e| fail(&e))?;
    Ok(CarriedFile::Copied)
}

/// Carries the store's encoder list, checked as it is read, into the database `to` (its
/// `store_settings`, which every server of the database reads) unless it holds one, and the
/// overlength policy the store was last embedded with likewise.
pub(crate) fn carry_store_encoders(from: &Path, to: &str) -> Result<CarriedFile, CarryError> {
    let source = from.join(STORE_ENCODERS_FILE);
    if !source.exists() {
        return Ok(CarriedFile::Absent);
    }
    let shown = evicortex_postgres::redact_password(to);
    let fail = |detail: String| CarryError {
        from: source.clone(),
        to: PathBuf::from(format!(
            "{shown} (store_settings.{})",
            crate::store_encoders::ENCODERS_SETTING
        )),
        detail,
    };
    let names = crate::store_encoder_names(from).map_err(|e| fail(format!("{e:#}")))?;
    let db = evicortex_postgres::PgShared::connect(to).map_err(|e| fail(format!("{e:#}")))?;
    let text = crate::store_encoders::list_json(&names);
    let set = db
        .set_setting_if_absent(crate::store_encoders::ENCODERS_SETTING, &text)
        .map_err(|e| fail(format!("{e:#}")))?;
    // The policy the carried vectors were embedded with, for servers without the local copy.
    if let Some(policy) =
        crate::embedding_cache::last_overlength(from).map_err(|e| fail(format!("{e:#}")))?
    {
        db.set_setting_if_absent(crate::shared_data::LAST_OVERLENGTH_SETTING, &policy.to_string())
            .map_err(|e| fail(format!("{e:#}")))?;
    }
    Ok(if set { CarriedFile::Copied } else { CarriedFile::Kept })
}
