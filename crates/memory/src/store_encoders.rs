//! The store's encoder list: which catalogue encoders embed its turns and are fused by compile,
//! the first one leading (abstention support, context vectors). Kept in `DIR/encoders.json`,
//! written atomically; a store without the file uses the pinned default encoder alone.
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
use serde::{Deserialize, Serialize};

use crate::{ErrorClass, MAX_ALSO_ENCODERS};

/// The file inside a store directory naming its encoders.
pub const STORE_ENCODERS_FILE: &str = "encoders.json";

const FORMAT: &str = "evicortex-encoders/1";

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
/// `DIR/encoders.json`, or the pinned default alone when the store has no such file.
pub fn store_encoder_names(dir: &Path) -> Result<Vec<String>, StoreEncodersError> {
    let dir = &files_dir(dir)?;
    let path = dir.join(STORE_ENCODERS_FILE);
    let bytes = match fs_err::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(vec![DEFAULT_MODEL.to_owned()]);
        }
        Err(source) => return Err(StoreEncodersError::Io { path, source }),
    };
    let malformed = |detail: String| StoreEncodersError::Malformed { path: path.clone(), detail };
    let file: EncodersFile =
        serde_json::from_slice(&bytes).map_err(|e| malformed(e.to_string()))?;
    if file.format != FORMAT {
        return Err(malformed(format!("format {:?}, expected {FORMAT:?}", file.format)));
    }
    check_store_encoders(&file.encoders).map_err(|e| malformed(e.to_string()))?;
    Ok(file.encoders)
}

/// Names the store's encoders (checked first), replacing the list atomically: a crash leaves
/// the old list or the new one. Vectors of encoders no longer listed stay in the embedding
/// cache, keyed by their identity, and serve again if the encoder is listed again.
pub fn set_store_encoders(dir: &Path, names: &[String]) -> Result<(), StoreEncodersError> {
    check_store_encoders(names)?;
    let dir = &files_dir(dir)?;
    let path = dir.join(STORE_ENCODERS_FILE);
    let io = |source| StoreEncodersError::Io { path: path.clone(), source };
    evicortex_ledger::create_private_dir(dir).map_err(io)?;
    let file = EncodersFile { format: FORMAT.to_owned(), encoders: names.to_vec() };
    let mut text = serde_json::to_string_pretty(&file).expect("an encoder list serialises");
    text.push('\n');
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
