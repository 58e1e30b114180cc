//! What every request handler shares: the memory, the key store and the limits.

use std::sync::Arc;

use evicortex::Memory;
use tokio::sync::Semaphore;

use crate::{ApiError, KeyStore, answer_request::AnswerReader, compile_request::Readers};

/// Limits of the HTTP server. None of them changes results; they only bound what one request may
/// ask for.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Largest request body accepted, in bytes; larger bodies get 413.
    pub body_limit_bytes: usize,
    /// Most turns one append request may carry; more get 422 on `turns`.
    pub max_turns_per_request: usize,
}

impl Default for ServerConfig {
    fn default() -> ServerConfig {
        ServerConfig { body_limit_bytes: 4 * 1024 * 1024, max_turns_per_request: 10_000 }
    }
}

/// Shared state of the HTTP server. Cloning is cheap.
#[derive(Debug, Clone)]
pub struct AppState {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    memory: Arc<Memory>,
    readers: Arc<Readers>,
    keys: KeyStore,
    config: ServerConfig,
    reader: Option<AnswerReader>,
    /// One permit per core for CPU-bound requests (compile, answer), handed out first come,
    /// first served.
    compute_slots: Arc<Semaphore>,
}

impl Inner {
    fn new(
        memory: Arc<Memory>,
        keys: KeyStore,
        config: ServerConfig,
        reader: Option<AnswerReader>,
    ) -> Inner {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        let readers = Arc::new(Readers::default());
        Inner {
            memory,
            readers,
            keys,
            config,
            reader,
            compute_slots: Arc::new(Semaphore::new(cores)),
        }
    }
}

impl AppState {
    /// State over an opened memory (with its encoder, for hybrid retrieval, or without: BM25
    /// only) and its key store.
    pub fn new(memory: Arc<Memory>, keys: KeyStore, config: ServerConfig) -> AppState {
        AppState { inner: Arc::new(Inner::new(memory, keys, config, None)) }
    }

    /// State that also answers questions with `reader` (`POST .../answer`) and serves it to
    /// admin keys at `/v1/chat/completions`.
    pub fn new_with_reader(
        memory: Arc<Memory>,
        keys: KeyStore,
        config: ServerConfig,
        reader: AnswerReader,
    ) -> AppState {
        AppState { inner: Arc::new(Inner::new(memory, keys, config, Some(reader))) }
    }

    /// The reader answers are read by, when the server has one.
    pub fn reader(&self) -> Option<&AnswerReader> {
        self.inner.reader.as_ref()
    }

    /// The memory.
    pub fn memory(&self) -> &Arc<Memory> {
        &self.inner.memory
    }

    /// The key store.
    pub fn keys(&self) -> &KeyStore {
        &self.inner.keys
    }

    /// The limits.
    pub fn config(&self) -> &ServerConfig {
        &self.inner.config
    }

    /// Runs a blocking store call on the blocking thread pool, so that a slow fsync or a compile
    /// never stalls the async workers. The facade does its own locking (concurrent readers,
    /// serialised writers).
    pub async fn blocking<T, F>(&self, call: F) -> Result<T, ApiError>
    where
        F: FnOnce(&Memory, &Readers) -> Result<T, ApiError> + Send + 'static,
        T: Send + 'static,
    {
        let memory = Arc::clone(&self.inner.memory);
        let readers = Arc::clone(&self.inner.readers);
        tokio::task::spawn_blocking(move || call(&memory, &readers))
            .await
            .map_err(|e| ApiError::Storage { message: format!("store task failed: {e}") })?
    }

    /// [`AppState::blocking`] for CPU-bound calls (compile, answer): at most one per core runs at
    /// a time, the others wait their turn in arrival order. Two hundred compiles sharing two
    /// cores all finished together, seconds late; in turn, they finish at the same rate, the
    /// first ones at once.
    pub async fn computing<T, F>(&self, call: F) -> Result<T, ApiError>
    where
        F: FnOnce(&Memory, &Readers) -> Result<T, ApiError> + Send + 'static,
        T: Send + 'static,
    {
        let slot = Arc::clone(&self.inner.compute_slots)
            .acquire_owned()
            .await
            .map_err(|e| ApiError::Storage { message: format!("compute slots: {e}") })?;
        // The slot is held by the call itself, so that a client hanging up mid-compile does
        // not free it before the work ends.
        self.blocking(move |memory, readers| {
            let _slot = slot;
            call(memory, readers)
        })
        .await
    }
}
