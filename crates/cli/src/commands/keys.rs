//! `evicortex keys`: create, list and revoke API keys of the HTTP server.

use std::{io::Write, path::Path};

use anyhow::Context;
use evicortex::Namespace;
use evicortex_server::{KeyScope, KeyStore};

use crate::stdout::outln;

/// Arguments of `evicortex keys`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Keys authorise HTTP requests: send one as `Authorization: Bearer <key>`.\n\n\
    Examples:\n  \
    evicortex keys create --namespace alice\n  \
    evicortex keys create --admin\n  \
    evicortex keys list\n  \
    evicortex keys revoke KEY_ID"
)]
pub struct KeysArgs {
    #[command(subcommand)]
    pub command: KeysCommand,
}

/// What to do with keys.
#[derive(Debug, clap::Subcommand)]
pub enum KeysCommand {
    /// Create a key and print it on the last line (it is shown only once; only its hash is kept).
    #[command(after_help = "Examples:\n  \
        evicortex keys create --namespace alice\n  \
        evicortex --store ./evicortex-data keys create --admin")]
    Create {
        /// The namespace the key may read and write.
        #[arg(long, required_unless_present = "admin", value_parser = parse_namespace)]
        namespace: Option<Namespace>,
        /// An admin key: every namespace, plus `GET /v1/verify`.
        #[arg(long, conflicts_with = "namespace")]
        admin: bool,
    },
    /// List keys by id, scope and creation time (never the secrets).
    #[command(after_help = "Examples:\n  evicortex keys list")]
    List,
    /// Revoke the key with this id (as printed by `create` and `list`).
    #[command(after_help = "Examples:\n  evicortex keys revoke KEY_ID")]
    Revoke {
        /// The key id.
        key_id: String,
    },
}

/// Runs `evicortex keys` on the store in `store`.
pub fn run(store: &Path, args: &KeysArgs) -> anyhow::Result<()> {
    let keys = KeyStore::open_store(store)
        .with_context(|| format!("opening the key store in {}", store.display()))?;
    match &args.command {
        KeysCommand::Create { namespace, admin } => {
            // clap refuses both flags together and requires one of them.
            let scope = match (namespace, admin) {
                (Some(ns), false) => KeyScope::Namespace(ns.clone()),
                _ => KeyScope::Admin,
            };
            let key = keys.create(&scope)?;
            let scope_text = match &scope {
                KeyScope::Admin => "admin (every namespace)".to_owned(),
                KeyScope::Namespace(ns) => format!("namespace {ns}"),
            };
            eprintln!("created key {} for {scope_text}; it is shown only once:", key.key_id);
            // A key nobody saw must not stay valid.
            let mut out = std::io::stdout().lock();
            if let Err(e) = writeln!(out, "{}", key.secret).and_then(|()| out.flush()) {
                keys.revoke(&key.key_id)?;
                return Err(e).context(format!(
                    "printing the new key failed, so key {} was revoked",
                    key.key_id
                ));
            }
        }
        KeysCommand::List => {
            outln!("{:<14} {:<10} {:<28} namespace", "key id", "scope", "created")?;
            for key in keys.list()? {
                let scope = if key.admin { "admin" } else { "namespace" };
                let namespace = key.namespace.as_deref().unwrap_or("-");
                outln!("{:<14} {:<10} {:<28} {namespace}", key.key_id, scope, key.created_at)?;
            }
        }
        KeysCommand::Revoke { key_id } => {
            keys.revoke(key_id)?;
            eprintln!("revoked key {key_id}");
        }
    }
    Ok(())
}

fn parse_namespace(raw: &str) -> Result<Namespace, String> {
    Namespace::new(raw).map_err(|e| e.to_string())
}
