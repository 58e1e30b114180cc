//! `evicortex mcp`: the MCP tool server of one namespace on stdin/stdout.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use evicortex::Namespace;
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
    let memory = args.retrieval.open(store)?;
    let server = McpServer::new(Arc::new(memory), namespace, ServerConfig::default());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting tokio")?;
    runtime.block_on(serve_mcp_stdio(server)).context("mcp server")
}
