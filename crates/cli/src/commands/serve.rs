//! `evicortex serve`: the HTTP API on a local address.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use evicortex::{CatchUpLimits, EmbeddingCache, Memory, embed_pending};
use evicortex_embed::{Encoder, EncoderConfig, Overlength, load_pinned_minilm};
use evicortex_server::{
    AppState, KeyStore, Retrieval, ServerConfig, serve_http, termination_signal,
};

use crate::stdout::outln;

/// Arguments of `evicortex serve`.
#[derive(Debug, clap::Args)]
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
    pub retrieval: RetrievalArgs,
}

/// How the server compiles (shared by `serve` and `mcp`).
#[derive(Debug, clap::Args)]
pub struct RetrievalArgs {
    /// Serve BM25 retrieval only: no encoder is loaded, nothing is embedded, and compile requests
    /// asking for dense retrieval are refused. Without it the pinned encoder must be installed
    /// (`evicortex model fetch`).
    #[arg(long)]
    pub lexical_only: bool,
    /// Turns longer than the encoder's 256 tokens: refuse (the append is refused), truncate,
    /// window (64-token overlap) or window:N.
    #[arg(long, default_value = "refuse")]
    pub overlength: Overlength,
}

impl RetrievalArgs {
    /// The retrieval side over `memory`: loads the pinned encoder unless `--lexical-only`, and
    /// first embeds stored turns that have no vector yet (e.g. ingested with `--no-embed`), so
    /// that every stored turn is a dense candidate.
    pub fn open(&self, memory: &Memory) -> anyhow::Result<Retrieval> {
        if self.lexical_only {
            eprintln!("retrieval: lexical only (--lexical-only); dense retrieval is off");
            return Ok(Retrieval::lexical_only());
        }
        let config = EncoderConfig::all_minilm_l6_v2().with_overlength(self.overlength);
        let encoder = Arc::new(load_pinned_minilm(config).context("loading the pinned encoder")?);
        let retrieval =
            Retrieval::hybrid(memory, encoder.clone()).context("opening the embedding cache")?;
        let cache = EmbeddingCache::open(memory.dir()).context("opening the embedding cache")?;
        let report =
            embed_pending(memory, &cache, encoder.as_ref(), CatchUpLimits::default(), &mut |_| {})
                .context("embedding stored turns that have no vector yet")?;
        eprintln!(
            "retrieval: hybrid ({}); embedded {} pending texts at start, {} already cached, {} refused as overlength",
            encoder.identity().model,
            report.embedded_texts,
            report.already_cached,
            report.refused.len()
        );
        Ok(retrieval)
    }
}

/// Runs the server on the store in `store` until SIGTERM or Ctrl-C, then drains and exits.
pub fn run(store: &Path, args: &ServeArgs) -> anyhow::Result<()> {
    let memory =
        Memory::open(store).with_context(|| format!("opening the store {}", store.display()))?;
    let keys = KeyStore::open(store)
        .with_context(|| format!("opening the key store in {}", store.display()))?;
    let config = ServerConfig {
        body_limit_bytes: args.body_limit_bytes,
        max_turns_per_request: args.max_turns_per_request,
    };
    let retrieval = args.retrieval.open(&memory)?;
    let state = AppState::new(Arc::new(memory), Arc::new(retrieval), keys, config);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting tokio")?;
    runtime.block_on(async {
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
    })
}
