//! What a memory's derived data (the index cache, the vector and lexical index files, the
//! background work) reads of it: a narrow view of the ledger, the index cache and the writer
//! lock, so that those modules never hold the whole [`crate::Memory`]
//! that owns them.

use std::{
    collections::{HashSet, VecDeque},
    sync::{Mutex, MutexGuard, PoisonError},
};

use evicortex_core::{Evidence, Namespace, TextDigest, TurnId};
use evicortex_ledger::{EvidenceLedger, LedgerPosition, ScanEvidence};

use crate::{EraseReceipt, ReadError, index_cache::IndexCache, pg_dense::PgDense};

/// The ledger, index cache, writer lock and pgvector side of one memory.
#[derive(Clone, Copy)]
pub(crate) struct DerivedView<'m> {
    pub(crate) ledger: &'m dyn EvidenceLedger,
    pub(crate) indexes: &'m IndexCache,
    pub(crate) writes: &'m Mutex<WriteState>,
    pub(crate) pg_dense: Option<&'m PgDense>,
}

impl<'m> DerivedView<'m> {
    /// The writer lock of derived data (see [`WriteState`]).
    pub(crate) fn lock_writes(&self) -> MutexGuard<'m, WriteState> {
        self.writes.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The ledger head: the position of the last record of any namespace.
    pub(crate) fn head(&self) -> Result<Option<LedgerPosition>, ReadError> {
        self.ledger.head()
    }

    /// The live turns of `namespace`, in ledger order.
    pub(crate) fn evidence(&self, namespace: &Namespace) -> Result<Vec<Evidence>, ReadError> {
        self.ledger.evidence(namespace)
    }

    /// The live turns of `namespace` numbered after `after` (all when `None`), in ledger order.
    pub(crate) fn evidence_after(
        &self,
        namespace: &Namespace,
        after: Option<TurnId>,
    ) -> Result<Vec<Evidence>, ReadError> {
        let mut out = Vec::new();
        self.ledger.for_each_evidence(namespace, after, |e| {
            out.push(e);
            Ok::<(), ReadError>(())
        })?;
        Ok(out)
    }

    /// The redaction record of the latest erasure of a turn of `namespace`.
    pub(crate) fn last_erasure(&self, namespace: &Namespace) -> Result<Option<TurnId>, ReadError> {
        self.ledger.last_erasure(namespace)
    }
}

/// What the writer lock guards besides mutual exclusion: the erasures made through this memory,
/// so that a writer of derived data that read its texts before an erasure can drop the texts the
/// erasure orphaned.
#[derive(Debug, Default)]
pub(crate) struct WriteState {
    /// Erasures committed through this memory.
    pub(crate) erasures: u64,
    /// The texts each recent erasure orphaned, by erasure number (the oldest dropped first).
    orphans: VecDeque<(u64, Vec<TextDigest>)>,
}

/// Erasures whose orphaned texts are remembered; a writer older than that rescans the ledger.
const ORPHAN_LOG: usize = 256;

impl WriteState {
    /// The texts orphaned by erasures after erasure number `since`, or `None` when the log no
    /// longer reaches back that far.
    pub(crate) fn orphaned_since(&self, since: u64) -> Option<HashSet<TextDigest>> {
        if self.erasures == since {
            return Some(HashSet::new());
        }
        let oldest = self.orphans.front().map_or(self.erasures + 1, |(n, _)| *n);
        if oldest > since + 1 {
            return None;
        }
        Some(
            self.orphans
                .iter()
                .filter(|(n, _)| *n > since)
                .flat_map(|(_, texts)| texts.iter().copied())
                .collect(),
        )
    }

    /// Records an erasure. With `unknown` (some erased turn's document could not be read), the
    /// log forgets every erasure so far: writers that read before it rescan the live ledger.
    pub(crate) fn record(&mut self, receipt: &EraseReceipt, unknown: bool) {
        self.erasures += 1;
        if unknown {
            self.orphans.clear();
            return;
        }
        self.orphans.push_back((self.erasures, receipt.erased_texts.clone()));
        while self.orphans.len() > ORPHAN_LOG {
            self.orphans.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_orphan_log_answers_only_as_far_back_as_it_reaches() {
        let mut state = WriteState::default();
        assert_eq!(state.orphaned_since(0), Some(HashSet::new()));
        let receipt = |text: &str| EraseReceipt {
            redaction: None,
            erased: Vec::new(),
            already_erased: 0,
            erased_texts: vec![TextDigest::of(text)],
        };
        state.record(&receipt("a"), false);
        state.record(&receipt("b"), false);
        assert_eq!(state.orphaned_since(1), Some(HashSet::from([TextDigest::of("b")])));
        assert_eq!(state.orphaned_since(0).map(|s| s.len()), Some(2));
        for _ in 0..ORPHAN_LOG {
            state.record(&receipt("c"), false);
        }
        assert_eq!(state.orphaned_since(0), None);
        assert!(state.orphaned_since(state.erasures - 1).is_some());
        // An erasure whose documents are unknown sends every earlier writer back to the ledger.
        state.record(&receipt("d"), true);
        assert_eq!(state.orphaned_since(state.erasures - 1), None);
        assert_eq!(state.orphaned_since(state.erasures), Some(HashSet::new()));
    }
}
