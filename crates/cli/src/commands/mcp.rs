//! `evicortex mcp`: the MCP tool server of one namespace on stdin/stdout.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use evicortex::Namespace;
use evicortex_server::{McpServer, ServerConfig, serve_mcp_stdio};

/// Arguments of `evicortex mcp`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Serves the tools remember, recall and forget over stdio to an MCP \
    client, which starts this command itself (see the README for a client configuration).\n\n\
    Examples:\n  \
    evicortex mcp --namespace alice\n  \
    evicortex --store ./evicortex-data mcp --namespace alice --lexical-only")]
pub struct McpArgs {
    /// The namespace the tools read and write; no tool can reach another.
    #[arg(long)]
    pub namespace: String,
    #[command(flatten)]
    pub queues: crate::commands::serve::QueueArgs,
    #[command(flatten)]
    pub retrieval: crate::commands::serve::RetrievalArgs,
    #[command(flatten)]
    pub reader: crate::commands::serve::ReaderArgs,
}

/// Serves MCP on stdio until the client disconnects. Stdout carries only protocol messages.
pub fn run(store: &Path, args: &McpArgs) -> anyhow::Result<()> {
    let namespace = Namespace::new(&args.namespace).context("--namespace")?;
    let memory = args.retrieval.open(store)?;
    let limits = args.queues.apply(ServerConfig::default());
    let mut server = McpServer::new(Arc::new(memory), namespace, limits);
    if let Some(reader) = args.reader.open()? {
        server = server.with_reader(reader);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting tokio")?;
    runtime.block_on(serve_mcp_stdio(server)).context("mcp server")
}
