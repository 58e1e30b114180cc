//! The store of one audit size: a prefix of the audit namespace's turns, its embedding cache
//! seeded from the audit store's so that nothing is embedded again.

use std::{
    path::{Path, PathBuf},
    sync::Arc,
};

use anyhow::Context;
use evicortex::{CatchUpLimits, Encoder, Memory};

/// Vectors (windows) the audit store's cache holds for each turn's document under the encoder.
pub(super) fn cached_windows(
    audit_store: &Path,
    encoder: &Arc<dyn Encoder>,
    turns: &[evicortex::Evidence],
) -> anyhow::Result<Vec<usize>> {
    let (conn, path) = open_embeddings(audit_store)?;
    let identity = encoder.identity().digest();
    let mut count =
        conn.prepare("SELECT count(*) FROM vectors WHERE identity = ?1 AND text_digest = ?2")?;
    turns
        .iter()
        .map(|e| {
            let digest = evicortex::TextDigest::of(&evicortex_compiler::turn_document(&e.turn));
            let n: i64 = count
                .query_row(rusqlite::params![identity.as_bytes(), digest.as_bytes()], |r| r.get(0))
                .with_context(|| format!("reading {}", path.display()))?;
            Ok(n as usize)
        })
        .collect()
}

/// A store's embedding cache, read-only, with its path for messages.
pub(super) fn open_embeddings(store: &Path) -> anyhow::Result<(rusqlite::Connection, PathBuf)> {
    let path = store.join(evicortex::EMBEDDINGS_FILE);
    let conn =
        rusqlite::Connection::open_with_flags(&path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .with_context(|| format!("opening {}", path.display()))?;
    Ok((conn, path))
}

/// The directory of the store of `size` vectors: beside the audit store, named after it.
pub(super) fn size_store(audit_store: &Path, size: usize) -> PathBuf {
    let name = audit_store.file_name().map_or("ann-audit".into(), |n| n.to_string_lossy());
    audit_store.with_file_name(format!("{name}-{size}"))
}

/// Fills the store of one size with `turns` (idempotent), its embedding cache seeded from the
/// audit store's. Nothing may need embedding.
pub(super) fn audit_size(
    audit_store: &Path,
    dir: &Path,
    turns: &[evicortex::Evidence],
    encoder: &Arc<dyn Encoder>,
) -> anyhow::Result<()> {
    let cache = dir.join(evicortex::EMBEDDINGS_FILE);
    if !cache.exists() {
        evicortex::front_end::create_private_dir(dir)
            .with_context(|| format!("creating {}", dir.display()))?;
        fs_err::copy(audit_store.join(evicortex::EMBEDDINGS_FILE), &cache)?;
    }
    let memory = Memory::builder(dir).encoder(Arc::clone(encoder)).ann(None).open()?;
    let owned: Vec<evicortex::Turn> = turns.iter().map(|e| e.turn.clone()).collect();
    for batch in owned.chunks(20_000) {
        memory.append(batch)?;
    }
    let report = memory.catch_up(None, CatchUpLimits::default(), &mut |_| {})?;
    anyhow::ensure!(
        report.embedded_texts == 0,
        "{} texts had no vector in the audit store's cache: embed the audit store first",
        report.embedded_texts
    );
    Ok(())
}
