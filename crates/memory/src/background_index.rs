//! The background indexer of a server: a thread that brings the cached namespaces' indexes up
//! to the ledger head after appends, so that a compile finds them current (or nearly) instead
//! of indexing every turn appended since the last compile inside its request. Under 2,000
//! appended turns/s that indexing was most of a compile's time, and the longer a compile took,
//! the more turns the next one met.
//!
//! Each round refreshes every cached namespace for the settings its last compile asked for
//! (a namespace never compiled is not indexed ahead). A compile still brings the indexes to the
//! head it reads itself, so what it finds never depends on how far the indexer got; it waits at
//! most for the refresh the indexer is running. The thread ends when the memory is dropped.

use std::{
    sync::{PoisonError, Weak},
    time::Duration,
};

use crate::{
    Memory,
    background_thread::{BackgroundThread, Signal},
    memory::Inner,
};

/// The handle a memory keeps on its indexer.
#[derive(Debug)]
pub(crate) struct BackgroundIndexer(BackgroundThread);

impl BackgroundIndexer {
    /// Starts the thread over the memory `inner` points to.
    pub(crate) fn start(inner: Weak<Inner>) -> std::io::Result<BackgroundIndexer> {
        BackgroundThread::start("evicortex-indexer", false, move |signal| run(&inner, signal))
            .map(BackgroundIndexer)
    }

    /// New turns are durable: index them.
    pub(crate) fn notify(&self) {
        self.0.notify();
    }
}

fn run(inner: &Weak<Inner>, signal: &Signal) {
    while signal.next_round() {
        let Some(inner) = inner.upgrade() else { return };
        Memory { inner }.index_cached_namespaces();
        signal.round_done(false, Duration::ZERO);
    }
}

impl Memory {
    /// One round of the indexer: every cached namespace brought to the ledger head for the
    /// settings of its last compile. A failure is logged; the next compile meets and reports it.
    fn index_cached_namespaces(&self) {
        if let Err(e) = self.apply_erasures_elsewhere() {
            tracing::warn!(error = %e, "background indexing: applying other processes' erasures");
            return;
        }
        for (namespace, slot) in self.inner.indexes.cached() {
            let asked = slot.read().unwrap_or_else(PoisonError::into_inner).asked.clone();
            let Some(config) = asked else { continue };
            let dense = match config.dense {
                evicortex_compiler::DenseConfig::On { .. } => match &self.inner.dense {
                    Some(dense) => Some(dense),
                    None => continue,
                },
                evicortex_compiler::DenseConfig::Off => None,
            };
            let also = if dense.is_some() { self.inner.also_dense.as_slice() } else { &[] };
            if let Err(e) = self.fresh_indexes(&namespace, &slot, &config, dense, also) {
                tracing::warn!(%namespace, error = %e, "background indexing failed");
            }
        }
    }
}
