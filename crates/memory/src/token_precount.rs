//! The background precount of reader tokens: after the first compile of a big namespace in a
//! reader tokenizer, a thread counts every turn text of the namespace in that tokenizer, so that
//! later compiles find the counts cached. Packing measures every fused candidate (the long-turn
//! rule divides by its length), and counting the ones it has not met before was the largest
//! stage of a compile at 100k turns. For a tokenizer additive at line starts it also counts the
//! lines packing renders for each turn (`Corpus::precount_text_tokens`): counting the packed
//! block's lines the first time they were met was then half of the pack stage at 10k.
//!
//! The counts are the ones packing would compute (the same tokenizer, deterministic), so a
//! compile's result does not depend on how far the precount got. The thread runs at the lowest
//! priority, reads the namespace's indexes a chunk at a time under the shared lock (a refresh
//! waits at most one chunk), and ends when the namespace leaves the cache, when the memory is
//! dropped, or when it has counted everything. Turns appended later are counted by the compiles
//! that meet them, as before.

use std::{
    sync::{Arc, Condvar, Mutex, PoisonError, RwLock, Weak},
    time::{Duration, Instant},
};

use evicortex_compiler::ReaderTokenizer;

use crate::index_cache::NamespaceIndexes;

/// Namespaces with fewer turns are not precounted: a cold compile there counts little.
pub(crate) const PRECOUNT_MIN_TURNS: usize = 2_000;

/// Positions read per hold of the shared lock.
const CHUNK: usize = 256;

/// The precounts running in a memory, so that a caller can wait for them.
#[derive(Debug, Default)]
pub(crate) struct Precounts {
    running: Mutex<usize>,
    done: Condvar,
}

impl Precounts {
    /// Starts counting `indexes`' turns in `reader`, unless they are too few, the tokenizer
    /// cannot be shared with a thread, or a precount in that tokenizer was started for them.
    pub(crate) fn offer(
        self: &Arc<Precounts>,
        slot: &Arc<RwLock<NamespaceIndexes>>,
        indexes: &NamespaceIndexes,
        reader: &dyn ReaderTokenizer,
    ) {
        if indexes.corpus.len() < PRECOUNT_MIN_TURNS || !indexes.claim_precount(reader.name()) {
            return;
        }
        let Some(reader) = reader.shared() else { return };
        *self.lock() += 1;
        let precounts = Arc::clone(self);
        let slot = Arc::downgrade(slot);
        let spawned = std::thread::Builder::new()
            .name("evicortex-token-precount".to_owned())
            .spawn(move || {
                let _finished = Finished(&precounts);
                run(&slot, &*reader);
            });
        if let Err(e) = spawned {
            *self.lock() -= 1;
            self.done.notify_all();
            tracing::warn!(error = %e, "could not start the reader-token precount");
        }
    }

    /// Waits until no precount runs, or `timeout` passes; returns whether none runs.
    pub(crate) fn wait_idle(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut running = self.lock();
        while *running > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            running =
                self.done.wait_timeout(running, left).unwrap_or_else(PoisonError::into_inner).0;
        }
        true
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, usize> {
        self.running.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Counts the thread out however it ends.
struct Finished<'a>(&'a Precounts);

impl Drop for Finished<'_> {
    fn drop(&mut self) {
        *self.0.lock() -= 1;
        self.0.done.notify_all();
    }
}

fn run(slot: &Weak<RwLock<NamespaceIndexes>>, reader: &dyn ReaderTokenizer) {
    if let Err(e) = evicortex_embed::thread_priority::lower_current_thread_priority() {
        tracing::debug!(error = %e, "the reader-token precount keeps its priority");
    }
    let started = Instant::now();
    let (mut next, mut counted) = (0, 0);
    loop {
        let Some(slot) = slot.upgrade() else { return };
        let indexes = slot.read().unwrap_or_else(PoisonError::into_inner);
        if next >= indexes.corpus.len() {
            break;
        }
        match indexes.corpus.precount_text_tokens(reader, next..next + CHUNK) {
            Ok(n) => counted += n,
            Err(e) => {
                // A compile meeting the same text reports the error itself.
                tracing::warn!(error = %e, "reader-token precount stopped");
                return;
            }
        }
        next += CHUNK;
    }
    tracing::debug!(
        tokenizer = reader.name(),
        counted,
        seconds = started.elapsed().as_secs_f64(),
        "reader tokens precounted"
    );
}
