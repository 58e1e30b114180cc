//! The store's encoder list: which catalogue encoders embed its turns and are fused by compile,
//! the first one leading (abstention support, context vectors). Kept in `DIR/encoders.json`,
//! written atomically, or for a PostgreSQL store in its database (`store_settings`, the same
//! JSON), so that every server of the database embeds and compiles with one list; a store
//! without a list uses the pinned default encoder alone. A PostgreSQL store's derived
//! directory holding an `encoders.json` of an earlier version, with no list in the database,
//! has it moved into the database when it is next read on the primary.
//!
//! Every front end (CLI, HTTP, MCP, Python, the evaluation) opens a store with the encoders this
//! file names, so that what was embedded and what compile reads never depend on who asks.

use std::{
    io::Write,
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
    sync::Arc,
};

use evicortex_embed::{DEFAULT_MODEL, EmbedError, Encoder, Overlength};
use evicortex_postgres::PgShared;
use serde::{Deserialize, Serialize};

use crate::{ErrorClass, MAX_ALSO_ENCODERS};

/// The file inside a store directory naming its encoders.
pub const STORE_ENCODERS_FILE: &str = "encoders.json";

const FORMAT: &str = "evicortex-encoders/1";

/// The key of the list in a PostgreSQL store's `store_settings`.
pub(crate) const ENCODERS_SETTING: &str = "encoders";

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct EncodersFile {
    format: String,
    encoders: Vec<String>,
}

/// Why the store's encoder list could not be read, checked or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreEncodersError {
    /// Reading or writing the file failed (the OS error is the source).
    #[error("{path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not an encoder list of this format.
    #[error("{path}: {detail}")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// The list names no encoder, one twice, too many, or one the catalogue lacks.
    #[error("encoders: {0}")]
    Invalid(String),
    /// The embedding cache, read for the overlength policy the store was last embedded with,
    /// could not be read.
    #[error("reading the store's embedding cache")]
    LastOverlength(#[from] crate::EmbeddingCacheError),
    /// A PostgreSQL store's database failed or refused (a write on a standby).
    #[error("the store's settings in its database")]
    Shared(#[source] Box<evicortex_postgres::SharedDataError>),
    /// Loading a listed encoder failed (why is the source).
    #[error("encoder {name}")]
    Load {
        /// The encoder's catalogue name.
        name: String,
        /// The failure.
        #[source]
        source: EmbedError,
    },
}

impl StoreEncodersError {
    /// What kind of failure this is.
    pub fn class(&self) -> ErrorClass {
        match self {
            StoreEncodersError::Io { .. } => ErrorClass::Io,
            StoreEncodersError::Malformed { .. } => ErrorClass::Integrity,
            StoreEncodersError::Invalid(_) => ErrorClass::BadInput,
            StoreEncodersError::Load { source, .. } => crate::error::embed_class(source),
            StoreEncodersError::LastOverlength(e) => e.class(),
            StoreEncodersError::Shared(e) => crate::shared_data::shared_data_class(e),
        }
    }
}

/// Checks a list of catalogue encoder names: at least one, none twice, at most
/// `MAX_ALSO_ENCODERS + 1`, each in the catalogue.
pub fn check_store_encoders(names: &[String]) -> Result<(), StoreEncodersError> {
    if names.is_empty() {
        return Err(StoreEncodersError::Invalid("the list names no encoder".into()));
    }
    if names.len() > MAX_ALSO_ENCODERS + 1 {
        return Err(StoreEncodersError::Invalid(format!(
            "{} encoders named; a compile fuses at most {}",
            names.len(),
            MAX_ALSO_ENCODERS + 1
        )));
    }
    for (i, name) in names.iter().enumerate() {
        if names[..i].contains(name) {
            return Err(StoreEncodersError::Invalid(format!("{name} is named twice")));
        }
        crate::check_catalogue_encoder(name)
            .map_err(|e| StoreEncodersError::Invalid(format!("{name}: {e}")))?;
    }
    Ok(())
}

/// The catalogue names of the store's encoders, the leading one first: the list in
/// `DIR/encoders.json` (a PostgreSQL store: in its database), or the pinned default alone when
/// the store has none.
pub fn store_encoder_names(dir: &Path) -> Result<Vec<String>, StoreEncodersError> {
    if let Some(db) = shared(dir)? {
        return names_in_database(&db, &files_dir(dir)?);
    }
    names_in_file(&files_dir(dir)?)
}

/// The list in `dir/encoders.json`, or the default alone without the file.
fn names_in_file(dir: &Path) -> Result<Vec<String>, StoreEncodersError> {
    let path = dir.join(STORE_ENCODERS_FILE);
    let bytes = match fs_err::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(vec![DEFAULT_MODEL.to_owned()]);
        }
        Err(source) => return Err(StoreEncodersError::Io { path, source }),
    };
    parse_list(&bytes, &path)
}

/// The list in the database's `store_settings`; without one, the derived directory's file of an
/// earlier version (moved into the database on the primary), else the default.
fn names_in_database(db: &PgShared, derived: &Path) -> Result<Vec<String>, StoreEncodersError> {
    let shared_err = |e| StoreEncodersError::Shared(Box::new(e));
    let file = derived.join(STORE_ENCODERS_FILE);
    if let Some(text) = db.setting(ENCODERS_SETTING).map_err(shared_err)? {
        let path = PathBuf::from(format!("{} (store_settings.{ENCODERS_SETTING})", db.url()));
        let names = parse_list(text.as_bytes(), &path)?;
        if file.exists() && !db.is_replica() {
            // An earlier version's file, which the database's list overrides: not left to
            // mislead whoever reads the directory.
            fs_err::remove_file(&file)
                .map_err(|source| StoreEncodersError::Io { path: file, source })?;
        }
        return Ok(names);
    }
    let names = names_in_file(derived)?;
    if file.exists() && !db.is_replica() {
        let text = list_json(&names);
        db.set_setting_if_absent(ENCODERS_SETTING, &text).map_err(shared_err)?;
        fs_err::remove_file(&file)
            .map_err(|source| StoreEncodersError::Io { path: file, source })?;
        // What the database holds now, should another process have moved its own list first.
        return names_in_database(db, derived);
    }
    Ok(names)
}

fn parse_list(bytes: &[u8], path: &Path) -> Result<Vec<String>, StoreEncodersError> {
    let malformed =
        |detail: String| StoreEncodersError::Malformed { path: path.to_owned(), detail };
    let file: EncodersFile = serde_json::from_slice(bytes).map_err(|e| malformed(e.to_string()))?;
    if file.format != FORMAT {
        return Err(malformed(format!("format {:?}, expected {FORMAT:?}", file.format)));
    }
    check_store_encoders(&file.encoders).map_err(|e| malformed(e.to_string()))?;
    Ok(file.encoders)
}

/// The list as stored: its JSON text, newline-terminated.
pub(crate) fn list_json(names: &[String]) -> String {
    let file = EncodersFile { format: FORMAT.to_owned(), encoders: names.to_vec() };
    let mut text = serde_json::to_string_pretty(&file).expect("an encoder list serialises");
    text.push('\n');
    text
}

/// The database `store` shares with the other processes, for a PostgreSQL store.
fn shared(store: &Path) -> Result<Option<PgShared>, StoreEncodersError> {
    crate::shared_data::shared_database(store).map_err(|e| StoreEncodersError::Io {
        path: store.to_owned(),
        source: std::io::Error::other(format!("{e:#}")),
    })
}

/// Names the store's encoders (checked first), replacing the list atomically: a crash leaves
/// the old list or the new one. Vectors of encoders no longer listed stay in the embedding
/// cache, keyed by their identity, and serve again if the encoder is listed again.
pub fn set_store_encoders(dir: &Path, names: &[String]) -> Result<(), StoreEncodersError> {
    check_store_encoders(names)?;
    if let Some(db) = shared(dir)? {
        let text = list_json(names);
        db.set_setting(ENCODERS_SETTING, &text)
            .map_err(|e| StoreEncodersError::Shared(Box::new(e)))?;
        // An earlier version's file would only mislead whoever reads the directory.
        let file = files_dir(dir)?.join(STORE_ENCODERS_FILE);
        return match fs_err::remove_file(&file) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(StoreEncodersError::Io { path: file, source: e })
            }
            _ => Ok(()),
        };
    }
    let dir = &files_dir(dir)?;
    let path = dir.join(STORE_ENCODERS_FILE);
    let io = |source| StoreEncodersError::Io { path: path.clone(), source };
    evicortex_ledger::create_private_dir(dir).map_err(io)?;
    let text = list_json(names);
    let tmp = dir.join(format!("{STORE_ENCODERS_FILE}.tmp"));
    let mut out = fs_err::File::create(&tmp).map_err(io)?;
    // Like every file of the store: the owner's alone.
    out.set_permissions(std::fs::Permissions::from_mode(0o600)).map_err(io)?;
    out.write_all(text.as_bytes()).map_err(io)?;
    out.sync_all().map_err(io)?;
    drop(out);
    fs_err::rename(&tmp, &path).map_err(io)?;
    fs_err::File::open(dir).and_then(|d| d.sync_all()).map_err(io)?;
    Ok(())
}

/// Where `store`'s list lives: a PostgreSQL store keeps it with its derived files.
fn files_dir(store: &Path) -> Result<PathBuf, StoreEncodersError> {
    crate::store_files_dir(store).map_err(|e| StoreEncodersError::Io {
        path: store.to_owned(),
        source: std::io::Error::other(e.to_string()),
    })
}

/// Loads the store's encoders ([`store_encoder_names`]) with `overlength`, every file checked
/// against its committed digest, for [`crate::MemoryBuilder::encoders`].
pub fn load_store_encoders(
    dir: &Path,
    overlength: Overlength,
) -> Result<Vec<Arc<dyn Encoder>>, StoreEncodersError> {
    store_encoder_names(dir)?
        .into_iter()
        .map(|name| {
            let loaded = if name == DEFAULT_MODEL {
                crate::load_pinned_encoder(overlength)
            } else {
                crate::load_catalogue_encoder(&name, overlength)
            };
            loaded.map_err(|source| StoreEncodersError::Load { name, source })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn a_store_without_a_list_uses_the_default_encoder_and_a_written_list_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(store_encoder_names(dir.path()).unwrap(), [DEFAULT_MODEL]);
        let list = names(&[DEFAULT_MODEL, "all-mpnet-base-v2"]);
        set_store_encoders(dir.path(), &list).unwrap();
        assert_eq!(store_encoder_names(dir.path()).unwrap(), list);
        assert!(!dir.path().join(format!("{STORE_ENCODERS_FILE}.tmp")).exists());
    }

    #[test]
    fn bad_lists_are_refused_and_leave_the_stored_one() {
        let dir = tempfile::tempdir().unwrap();
        set_store_encoders(dir.path(), &names(&[DEFAULT_MODEL])).unwrap();
        for bad in [
            names(&[]),
            names(&[DEFAULT_MODEL, DEFAULT_MODEL]),
            names(&["no-such-model"]),
            names(&[DEFAULT_MODEL, "all-mpnet-base-v2", "a", "b", "c"]),
        ] {
            let err = set_store_encoders(dir.path(), &bad).unwrap_err();
            assert_eq!(err.class(), ErrorClass::BadInput, "{err}");
        }
        assert_eq!(store_encoder_names(dir.path()).unwrap(), [DEFAULT_MODEL]);
    }

    #[test]
    fn a_damaged_list_fails_closed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(STORE_ENCODERS_FILE);
        for text in [
            "{",
            r#"{"format": "evicortex-encoders/9", "encoders": ["all-minilm-l6-v2"]}"#,
            r#"{"format": "evicortex-encoders/1", "encoders": ["nope"]}"#,
            r#"{"format": "evicortex-encoders/1", "encoders": [], "x": 1}"#,
        ] {
            fs_err::write(&path, text).unwrap();
            let err = store_encoder_names(dir.path()).unwrap_err();
            assert_eq!(err.class(), ErrorClass::Integrity, "{text}: {err}");
            assert!(err.to_string().contains(STORE_ENCODERS_FILE), "{err}");
        }
    }
}
