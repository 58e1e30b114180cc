//! `evicortex mcp`: the MCP tool server of one namespace on stdin/stdout.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use evicortex::Memory;
use evicortex_core::Namespace;
use evicortex_server::{McpServer, ServerConfig, serve_mcp_stdio};

/// Arguments of `evicortex mcp`.
#[derive(Debug, clap::Args)]
pub struct McpArgs {
    /// The namespace the tools read and write; no tool can reach another.
    #[arg(long)]
    pub namespace: String,
    #[command(flatten)]
    pub retrieval: crate::commands::serve::RetrievalArgs,
}

/// Serves MCP on stdio until the client disconnects. Stdout carries only protocol messages.
pub fn run(store: &Path, args: &McpArgs) -> anyhow::Result<()> {
    let namespace = Namespace::new(&args.namespace).context("--namespace")?;
    let memory =
        Memory::open(store).with_context(|| format!("opening the store {}", store.display()))?;
    let retrieval = args.retrieval.open(&memory)?;
    let server =
        McpServer::new(Arc::new(memory), Arc::new(retrieval), namespace, ServerConfig::default());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting tokio")?;
    runtime.block_on(serve_mcp_stdio(server)).context("mcp server")
}
