//! `evicortex keys`: create, list and revoke API keys of the HTTP server.

use std::path::Path;

use anyhow::Context;
use evicortex::Namespace;
use evicortex_server::{KeyScope, KeyStore};

/// Arguments of `evicortex keys`.
#[derive(Debug, clap::Args)]
pub struct KeysArgs {
    #[command(subcommand)]
    pub command: KeysCommand,
}

/// What to do with keys.
#[derive(Debug, clap::Subcommand)]
pub enum KeysCommand {
    /// Create a key and print it on the last line (it is shown only once; only its hash is kept).
    Create {
        /// The namespace the key may read and write.
        #[arg(long, required_unless_present = "admin")]
        namespace: Option<String>,
        /// An admin key: every namespace, plus `GET /v1/verify`.
        #[arg(long)]
        admin: bool,
    },
    /// List keys by id, scope and creation time (never the secrets).
    List,
    /// Revoke the key with this id (as printed by `create` and `list`).
    Revoke {
        /// The key id.
        key_id: String,
    },
}

/// Runs `evicortex keys` on the store in `store`.
pub fn run(store: &Path, args: &KeysArgs) -> anyhow::Result<()> {
    let keys = KeyStore::open(store)
        .with_context(|| format!("opening the key store in {}", store.display()))?;
    match &args.command {
        KeysCommand::Create { namespace, admin } => {
            let scope = match (namespace, admin) {
                (_, true) => KeyScope::Admin,
                (Some(ns), false) => {
                    KeyScope::Namespace(Namespace::new(ns).context("--namespace")?)
                }
                (None, false) => anyhow::bail!("give --namespace NS or --admin"),
            };
            let key = keys.create(&scope)?;
            let scope_text = match &scope {
                KeyScope::Admin => "admin (every namespace)".to_owned(),
                KeyScope::Namespace(ns) => format!("namespace {ns}"),
            };
            eprintln!("created key {} for {scope_text}; it is shown only once:", key.key_id);
            println!("{}", key.secret);
        }
        KeysCommand::List => {
            println!("{:<14} {:<10} {:<28} namespace", "key id", "scope", "created");
            for key in keys.list()? {
                let scope = if key.admin { "admin" } else { "namespace" };
                let namespace = key.namespace.as_deref().unwrap_or("-");
                println!("{:<14} {:<10} {:<28} {namespace}", key.key_id, scope, key.created_at);
            }
        }
        KeysCommand::Revoke { key_id } => {
            keys.revoke(key_id)?;
            eprintln!("revoked key {key_id}");
        }
    }
    Ok(())
}
