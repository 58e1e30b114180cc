//! The local files a migration to PostgreSQL carries from the embedded store's directory into the
//! database's derived directory: the embedding cache, whose vectors would otherwise be computed
//! again (hours at a million turns) and which records the overlength policy the store was
//! embedded with, and the store's encoder list (`encoders.json`). Both are valid for the copy
//! because the copy holds the same records, salts and texts. A file the derived directory
//! already holds is kept, never replaced under a process that may have it open.

use std::{
    io,
    path::{Path, PathBuf},
};

use rusqlite::{Connection, OpenFlags};

use crate::{EMBEDDINGS_FILE, STORE_ENCODERS_FILE};

/// What a migration did with one of the embedded store's local files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CarriedFile {
    /// Copied into the derived directory.
    Copied,
    /// The derived directory already held one, which was kept.
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

/// Copies the embedding cache of the store in `from` into `derived` as one consistent snapshot
/// (`VACUUM INTO`, which also takes what the write-ahead log holds), owner-only and synced, then
/// links it into place unless a cache is already there.
pub(crate) fn carry_embedding_cache(
    from: &Path,
    derived: &Path,
) -> Result<CarriedFile, CarryError> {
    carry(from, derived, EMBEDDINGS_FILE, |source, target| {
        let tmp = derived.join(CARRY_TEMPORARY);
        let lock = create_locked(&tmp).map_err(|e| e.to_string())?;
        let placed = snapshot(source, &tmp)
            .and_then(|()| link_into_place(&tmp, target).map_err(|e| e.to_string()));
        let cleanup = remove_if_present(&tmp).map_err(|e| e.to_string());
        drop(lock);
        let placed = placed?;
        cleanup?;
        Ok(placed)
    })
}

/// The temporary copy of the embedding cache in the derived directory, named as the index
/// files' temporary files are: its writer holds an exclusive `flock` on it until it is removed,
/// and every process that claims the directory removes one whose lock nobody holds (left by a
/// migration killed while carrying the cache), as the index folders' open-time sweep does.
pub(crate) const CARRY_TEMPORARY: &str = ".embeddings.sqlite-migrating.tmp";

/// Creates the empty file `path` (`VACUUM INTO` writes into an empty file) and locks it; an
/// existing one is another migration's, still carrying (an abandoned one was removed when the
/// directory was claimed).
fn create_locked(path: &Path) -> io::Result<fs_err::File> {
    let file = fs_err::OpenOptions::new().write(true).create_new(true).open(path)?;
    file.file().lock()?;
    Ok(file)
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

/// The file `name` of `from` carried into `derived` by `copy(source, target)`, unless `from`
/// has none or `derived` already holds one.
fn carry(
    from: &Path,
    derived: &Path,
    name: &str,
    copy: impl FnOnce(&Path, &Path) -> Result<CarriedFile, String>,
) -> Result<CarriedFile, CarryError> {
    let (source, target) = (from.join(name), derived.join(name));
    if !source.exists() {
        return Ok(CarriedFile::Absent);
    }
    if target.exists() {
        return Ok(CarriedFile::Kept);
    }
    copy(&source, &target).map_err(|detail| CarryError { from: source, to: target, detail })
}

/// Writes a snapshot of the SQLite database `source` to the new file `tmp`, owner-only.
fn snapshot(source: &Path, tmp: &Path) -> Result<(), String> {
    let conn = Connection::open_with_flags(source, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .map_err(|e| e.to_string())?;
    conn.execute("VACUUM INTO ?1", [tmp.to_string_lossy().as_ref()]).map_err(|e| e.to_string())?;
    evicortex_ledger::restrict_sqlite_files(tmp).map_err(|e| e.to_string())
}

/// Syncs `tmp` and links it at `target` (no link is made over an existing file), then syncs the
/// directory: a crash leaves no cache or a whole one.
fn link_into_place(tmp: &Path, target: &Path) -> io::Result<CarriedFile> {
    fs_err::File::open(tmp)?.sync_all()?;
    match fs_err::hard_link(tmp, target) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Ok(CarriedFile::Kept),
        Err(e) => return Err(e),
    }
    if let Some(dir) = target.parent() {
        fs_err::File::open(dir)?.sync_all()?;
    }
    Ok(CarriedFile::Copied)
}

fn remove_if_present(path: &Path) -> io::Result<()> {
    match fs_err::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}
