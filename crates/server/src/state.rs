//! What every request handler shares: the memory, the key store and the limits.

use std::sync::Arc;
use std::time::Duration;

use evicortex::Memory;

use crate::request_queue::{RequestQueues, Ticket};
use crate::{ApiError, KeyStore, answer_request::AnswerReader, compile_request::Readers};

/// Limits of the HTTP and MCP servers. None of them changes results; they bound what one request
/// may ask for and how many costly requests wait.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Largest request body accepted, in bytes; larger bodies get 413.
    pub body_limit_bytes: usize,
    /// Most turns one append request may carry; more get 422 on `turns`.
    pub max_turns_per_request: usize,
    /// Most answer (and chat-completion) requests waiting for the one loaded reader; beyond
    /// them a request gets 429 with `Retry-After` at once.
    pub max_queued_answers: usize,
    /// Most compile requests waiting for a compute slot (one per core); beyond them 429.
    pub max_queued_compiles: usize,
    /// Longest a queued answer or compile waits to start; then it gets 503 with `Retry-After`.
    pub max_queue_wait: Duration,
}

impl Default for ServerConfig {
    fn default() -> ServerConfig {
        ServerConfig {
            body_limit_bytes: 4 * 1024 * 1024,
            max_turns_per_request: 10_000,
            max_queued_answers: 4,
            max_queued_compiles: 32,
            max_queue_wait: Duration::from_secs(120),
        }
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
    /// The bounded queues of answers and compiles, and the compute slots (one per core) they
    /// run in, handed out first come, first served.
    queues: RequestQueues,
}

impl Inner {
    fn new(
        memory: Arc<Memory>,
        keys: KeyStore,
        config: ServerConfig,
        reader: Option<AnswerReader>,
    ) -> Inner {
        let readers = Arc::new(Readers::default());
        let queues = RequestQueues::new(&config);
        Inner { memory, readers, keys, config, reader, queues }
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

    /// The answer and compile queues.
    pub fn queues(&self) -> &RequestQueues {
        &self.inner.queues
    }

    /// [`AppState::blocking`] for a compile: at most one per core runs at a time, at most
    /// `max_queued_compiles` wait their turn in arrival order, the rest are refused at once (429).
    /// Two hundred compiles sharing two cores all finished together, seconds late; in turn, they
    /// finish at the same rate, the first ones at once.
    pub async fn compiling<T, F>(&self, call: F) -> Result<T, ApiError>
    where
        F: FnOnce(&Memory, &Readers) -> Result<T, ApiError> + Send + 'static,
        T: Send + 'static,
    {
        let ticket = self.inner.queues.compile().await?;
        self.run_holding(ticket, call).await
    }

    /// [`AppState::blocking`] for an answer: one at a time on the one reader (and a compute
    /// slot), at most `max_queued_answers` waiting, the rest refused at once (429).
    pub async fn answering<T, F>(&self, call: F) -> Result<T, ApiError>
    where
        F: FnOnce(&Memory, &Readers) -> Result<T, ApiError> + Send + 'static,
        T: Send + 'static,
    {
        let ticket = self.inner.queues.answer().await?;
        self.run_holding(ticket, call).await
    }

    async fn run_holding<T, F>(&self, ticket: Ticket, call: F) -> Result<T, ApiError>
    where
        F: FnOnce(&Memory, &Readers) -> Result<T, ApiError> + Send + 'static,
        T: Send + 'static,
    {
        // The ticket is held by the call itself, so that a client hanging up mid-compile does
        // not free its place before the work ends.
        self.blocking(move |memory, readers| {
            let _ticket = ticket;
            call(memory, readers)
        })
        .await
    }
}
