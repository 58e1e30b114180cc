//! The background indexer of a server: a thread that brings the cached namespaces' indexes up
//! to the ledger head after appends, so that a compile finds them current (or nearly) instead
//! of indexing every turn appended since the last compile inside its request. Under 2,000
//! appended turns/s that indexing was most of a compile's time, and the longer a compile took,
//! the more turns the next one met.
//!
//! Each round refreshes the cached namespaces appended to since the last, for the settings
//! their last compile asked for (a namespace never compiled is not indexed ahead). A compile
//! still brings the indexes to the head it reads itself, so what it finds never depends on how
//! far the indexer got; it waits at most for the refresh the indexer is running. The thread
//! ends when the memory is dropped.

use std::{
    collections::HashSet,
    sync::{Arc, Mutex, PoisonError, Weak},
    time::Duration,
};

use evicortex_core::Namespace;

use crate::{
    Memory,
    background_thread::{BackgroundThread, Signal},
    memory::Inner,
};

/// The handle a memory keeps on its indexer.
#[derive(Debug)]
pub(crate) struct BackgroundIndexer {
    thread: BackgroundThread,
    /// The namespaces appended to since the last round began.
    touched: Arc<Mutex<HashSet<Namespace>>>,
}

impl BackgroundIndexer {
    /// Starts the thread over the memory `inner` points to.
    pub(crate) fn start(inner: Weak<Inner>) -> std::io::Result<BackgroundIndexer> {
        let touched = Arc::new(Mutex::new(HashSet::new()));
        let thread_touched = Arc::clone(&touched);
        let thread = BackgroundThread::start("evicortex-indexer", false, move |signal| {
            run(&inner, &thread_touched, signal)
        })?;
        Ok(BackgroundIndexer { thread, touched })
    }

    /// New turns of `namespaces` are durable: index them (each round first applies the
    /// erasures left pending, so an erasure wakes the thread with none).
    pub(crate) fn notify<'n>(&self, namespaces: impl IntoIterator<Item = &'n Namespace>) {
        lock(&self.touched).extend(namespaces.into_iter().cloned());
        self.thread.notify();
    }
}

fn lock(touched: &Mutex<HashSet<Namespace>>) -> std::sync::MutexGuard<'_, HashSet<Namespace>> {
    touched.lock().unwrap_or_else(PoisonError::into_inner)
}

fn run(inner: &Weak<Inner>, touched: &Mutex<HashSet<Namespace>>, signal: &Signal) {
    while signal.next_round() {
        let namespaces = std::mem::take(&mut *lock(touched));
        let Some(inner) = inner.upgrade() else { return };
        Memory { inner }.index_cached(&namespaces);
        signal.round_done(false, Duration::ZERO);
    }
}

impl Memory {
    /// One round of the indexer: each of `namespaces` that is cached brought to the ledger head
    /// for the settings of its last compile. A failure is logged; the next compile meets and
    /// reports it.
    fn index_cached(&self, namespaces: &HashSet<Namespace>) {
        // Left by erasures that found a namespace's indexes in use (see `Memory::erase`).
        self.inner.indexes.apply_pending_erasures(true);
        if let Err(e) = self.apply_erasures_elsewhere() {
            tracing::warn!(error = %e, "background indexing: applying other processes' erasures");
            return;
        }
        let cached = self.inner.indexes.cached();
        for (namespace, slot) in cached.iter().filter(|(ns, _)| namespaces.contains(ns)) {
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
            if let Err(e) = self.fresh_indexes(namespace, slot, &config, dense, also) {
                tracing::warn!(%namespace, error = %e, "background indexing failed");
            }
        }
    }
}
