//! `evicortex serve`: the HTTP API on a local address.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use evicortex::{Memory, Overlength};
use evicortex_server::{
    AnswerReader, AppState, KeyStore, ServerConfig, serve_http, termination_signal,
};

use crate::{exit::UsageError, stdout::outln};

/// How long a namespace has no new turns before the server writes its lexical index file.
const LEXICAL_FILES_QUIET: Duration = Duration::from_secs(2);

/// Arguments of `evicortex serve`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Every request but GET /healthz needs a key (`evicortex keys create`) \
    in the header `Authorization: Bearer <key>`. The API is described at GET /openapi.json.\n\n\
    Examples:\n  \
    evicortex keys create --namespace alice\n  \
    evicortex serve --listen 127.0.0.1:8787\n  \
    evicortex --store ./evicortex-data serve --lexical-only\n  \
    curl -H \"Authorization: Bearer $KEY\" \\\n      \
    http://127.0.0.1:8787/v1/namespaces/alice/stats")]
pub struct ServeArgs {
    /// Address to listen on. Port 0 picks a free port; the address is printed on stdout.
    #[arg(long, default_value = "127.0.0.1:8787")]
    pub listen: SocketAddr,
    /// Largest request body accepted, in bytes.
    #[arg(long, default_value_t = ServerConfig::default().body_limit_bytes)]
    pub body_limit_bytes: usize,
    /// Most turns one append request may carry.
    #[arg(long, default_value_t = ServerConfig::default().max_turns_per_request)]
    pub max_turns_per_request: usize,
    /// After SIGTERM or Ctrl-C, how long in-flight requests may take to finish, in seconds.
    #[arg(long, default_value_t = 30)]
    pub drain_timeout_secs: u64,
    #[command(flatten)]
    pub queues: QueueArgs,
    #[command(flatten)]
    pub retrieval: RetrievalArgs,
    #[command(flatten)]
    pub reader: ReaderArgs,
}

/// How many costly requests wait (shared by `serve` and `mcp`).
#[derive(Debug, clap::Args)]
pub struct QueueArgs {
    /// Most answer requests (with chat completions; the MCP tool `answer`) waiting for the one
    /// loaded reader while it answers another; beyond them a request gets 429 with Retry-After
    /// at once (MCP: a tool error). Each waiting request holds its parsed body (at most
    /// --body-limit-bytes) and a connection.
    #[arg(long, value_name = "N", default_value_t = ServerConfig::default().max_queued_answers)]
    pub max_queued_answers: usize,
    /// Most compile requests (the MCP tool `recall`) waiting while one runs per core; beyond them
    /// 429 with Retry-After.
    #[arg(long, value_name = "N", default_value_t = ServerConfig::default().max_queued_compiles)]
    pub max_queued_compiles: usize,
    /// Longest a queued answer or compile waits to start, in seconds; then it gets 503 with
    /// Retry-After (it never started, nothing was done).
    #[arg(
        long,
        value_name = "SECS",
        default_value_t = ServerConfig::default().max_queue_wait.as_secs(),
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub max_queue_wait_secs: u64,
}

impl QueueArgs {
    /// `config` with these queue limits.
    pub fn apply(&self, config: ServerConfig) -> ServerConfig {
        ServerConfig {
            max_queued_answers: self.max_queued_answers,
            max_queued_compiles: self.max_queued_compiles,
            max_queue_wait: Duration::from_secs(self.max_queue_wait_secs),
            ..config
        }
    }
}

/// The reader `answer` requests are read by (shared by `serve` and `mcp`).
#[derive(Debug, clap::Args)]
pub struct ReaderArgs {
    /// Answer with this local reader (a pinned GGUF model, `evicortex model list`); `serve` also
    /// offers it to admin keys at /v1/chat/completions (non-streaming). Without --reader or
    /// --reader-endpoint, answer requests get 503.
    #[arg(long, value_name = "NAME", conflicts_with = "reader_endpoint")]
    pub reader: Option<String>,
    /// Answer with the chat-completions endpoint the EVICORTEX_READER_* variables name.
    #[arg(long, requires = "reader_tokenizer")]
    pub reader_endpoint: bool,
    /// With --reader-endpoint: the tokenizer its model uses, which budgets are counted in.
    #[arg(long, value_name = "NAME", requires = "reader_endpoint")]
    pub reader_tokenizer: Option<String>,
}

impl ReaderArgs {
    /// The reader, when one is asked for.
    pub fn open(&self) -> anyhow::Result<Option<AnswerReader>> {
        if self.reader.is_none() && !self.reader_endpoint {
            return Ok(None);
        }
        let reader =
            crate::commands::answer::open_reader(self.reader.as_deref(), self.reader_endpoint)?;
        let tokenizer = match &self.reader_tokenizer {
            Some(name) => Some(
                evicortex::reader_tokenizer(name)
                    .map_err(|e| UsageError(format!("--reader-tokenizer: {e}")))?
                    .into(),
            ),
            None => None,
        };
        eprintln!("reader: {}", reader.identity().label());
        Ok(Some(AnswerReader { reader, tokenizer }))
    }
}

/// How the server compiles (shared by `serve` and `mcp`).
#[derive(Debug, clap::Args)]
pub struct RetrievalArgs {
    /// Serve BM25 retrieval only: no encoder is loaded, nothing is embedded, and compile requests
    /// asking for dense retrieval are refused. Without it the pinned encoder must be installed
    /// (`evicortex model fetch`).
    #[arg(long)]
    pub lexical_only: bool,
    /// Turns longer than the encoder's 256 tokens: refuse (stored, lexical candidates only),
    /// truncate, window (64-token overlap) or window:N. Default: the policy the store was last
    /// embedded with, else refuse.
    #[arg(long, value_name = "POLICY", value_parser = crate::commands::embed::parse_overlength)]
    pub overlength: Option<Overlength>,
    /// Search the vectors of a namespace holding at least N of them through `--ann-index`, used
    /// when a search's filters admit at least N vectors (default: the sign sketch from 30,000
    /// vectors; at 100,000 it compiles in about a third of the exact scan's time and gives back
    /// 99.9% of the exact top 50, bench/README.md). Embedded stores only (a PostgreSQL store
    /// searches with pgvector's own index).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub ann_from: Option<u64>,
    /// What searches a namespace of at least `--ann-from` vectors: the sign sketch of its exact
    /// index (the default; nothing built or persisted), an HNSW graph kept in the store's
    /// vector-index/ directory (built by the first compile that needs it: about a minute per
    /// 100,000 vectors on two cores), or, with `exact`, nothing: every vector is scanned
    #[arg(long, value_enum)]
    pub ann_index: Option<crate::commands::compile::AnnIndex>,
    /// Memory for the namespaces' in-memory indexes, in MiB (default 1024): the least recently
    /// compiled namespaces are dropped beyond it and rebuilt from the store when next asked
    /// for. With dense retrieval a namespace of 100,000 vectors fits the default and one of a
    /// million needs several GiB (vectors, context vectors, BM25); one larger than the whole
    /// budget is kept alone (every other namespace is dropped), and the server warns when that
    /// happens.
    #[arg(long, value_name = "MIB", value_parser = clap::value_parser!(u64).range(1..))]
    pub index_cache_mib: Option<u64>,
    /// The reranker compile requests with `options.rerank` on use (mpnet-cosine, cosine:MODEL
    /// or cross-encoder:DIR@SHA256, as for `evicortex compile`); without it such requests are
    /// refused.
    #[arg(long, value_name = "SPEC")]
    pub reranker: Option<evicortex::RerankerSpec>,
}

impl RetrievalArgs {
    /// Opens the memory the server runs on, holding the store's writer lock: with the pinned
    /// encoder, embedding appended turns in the background (every stored turn becomes a dense
    /// candidate once embedded, the turns stored without a vector first), or lexical-only
    /// without any model.
    pub fn open(&self, store: &Path) -> anyhow::Result<Memory> {
        let mut builder = Memory::builder(store);
        // Held by the memory for as long as the server runs.
        builder.lock_store();
        // Writing a big namespace's lexical file inside a compile cost that compile up to a
        // second under a stream of appends: a server writes it once the namespace is quiet.
        builder.lexical_files_when_quiet(Some(LEXICAL_FILES_QUIET));
        // Appended turns are indexed ahead of compiles, as they are embedded.
        builder.background_indexing();
        // A usage error before anything is read from the store (a database's settings included).
        crate::commands::compile::use_ann(&mut builder, store, self.ann_from, self.ann_index)?;
        let overlength = if self.lexical_only {
            eprintln!("retrieval: lexical only (--lexical-only); dense retrieval is off");
            None
        } else {
            let overlength =
                builder.store_encoders(self.overlength).context("loading the store's encoders")?;
            builder.background_embedding();
            Some(overlength)
        };
        if let Some(spec) = &self.reranker {
            builder.loaded_reranker(crate::commands::compile::load_reranker(spec)?);
        }
        if let Some(mib) = self.index_cache_mib {
            let bytes = usize::try_from(mib.saturating_mul(1 << 20))
                .map_err(|_| UsageError("--index-cache-mib: too large".to_owned()))?;
            builder.index_cache_bytes(bytes);
        }
        let memory =
            builder.open().with_context(|| format!("opening the store {}", store.display()))?;
        if let Some(overlength) = overlength {
            let models: Vec<&str> =
                memory.encoders().iter().map(|e| e.identity().model.as_str()).collect();
            eprintln!(
                "retrieval: hybrid ({}, overlength {overlength}); appended turns are embedded in \
                 the background",
                models.join(" + ")
            );
        }
        Ok(memory)
    }
}

/// Runs the server on the store in `store` until SIGTERM or Ctrl-C, then drains and exits.
pub fn run(store: &Path, args: &ServeArgs) -> anyhow::Result<()> {
    let memory = args.retrieval.open(store)?;
    let keys = KeyStore::open_store(store)
        .with_context(|| format!("opening the key store in {}", store.display()))?;
    if keys.list().context("listing the API keys")?.is_empty() {
        eprintln!(
            "warning: the store {} has no API keys, so every request but GET /healthz gets 401. \
             Create one (it is printed once), then send it as `Authorization: Bearer <key>`:\n  \
             evicortex --store {} keys create --namespace NAME",
            store.display(),
            store.display()
        );
    }
    let config = args.queues.apply(ServerConfig {
        body_limit_bytes: args.body_limit_bytes,
        max_turns_per_request: args.max_turns_per_request,
        ..ServerConfig::default()
    });
    let memory = Arc::new(memory);
    let state = match args.reader.open()? {
        Some(reader) => AppState::new_with_reader(memory, keys, config, reader),
        None => AppState::new(memory, keys, config),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting tokio")?;
    let served = runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(args.listen)
            .await
            .with_context(|| format!("listening on {}", args.listen))?;
        let local = listener.local_addr().context("reading the bound address")?;
        // Scripts and tests read this line to find the port.
        outln!("listening on http://{local}")?;
        eprintln!("evicortex serve: store {}, listening on http://{local}", store.display());
        serve_http(
            listener,
            state,
            termination_signal(),
            Duration::from_secs(args.drain_timeout_secs),
        )
        .await?;
        eprintln!("evicortex serve: drained, exiting");
        anyhow::Ok(())
    });
    // Work the drain gave up on (requests past the drain timeout) may still run on blocking
    // threads. None of it can be acknowledged any more and every write is atomic, so it is
    // not waited for: dropping the runtime would wait for all of it.
    runtime.shutdown_timeout(Duration::from_secs(1));
    served
}
