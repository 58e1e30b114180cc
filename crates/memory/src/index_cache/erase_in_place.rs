//! An erasure applied to a namespace's cached indexes in place: the erased turns leave the
//! corpus, the turn and window indexes, the vector indexes and the context vectors, and the
//! windows that held them are computed again, so the indexes search exactly as a rebuild from
//! the ledger would. A rebuild analyses every turn of the namespace again (seconds at 100,000
//! turns); this costs a pass over the postings and vectors, plus the few changed windows.

use std::{
    borrow::Cow,
    collections::HashSet,
    sync::{Arc, PoisonError, RwLock, TryLockError},
    time::Instant,
};

use evicortex_core::{Namespace, TurnId};
use evicortex_vector::VectorIndexRead;

use super::{IndexCache, NamespaceIndexes, turn_vector};
use crate::CompileError;

/// An erasure committed through this memory, waiting to be applied to a cached namespace.
#[derive(Debug, Clone)]
pub(crate) struct PendingErasure {
    /// The erased turns of the namespace.
    pub(crate) turns: Vec<TurnId>,
    /// The namespace's redaction record of the erasure (`None`: nothing was newly erased).
    pub(crate) redaction: Option<TurnId>,
}

impl IndexCache {
    /// Applies to every cached namespace the erasures its purge left pending. Called by the
    /// erasing thread once it has released the writer lock of derived data, which a refresh
    /// holding a namespace's exclusive lock may wait for (a refresh applies them first too).
    /// With `wait` false a namespace whose indexes are in use (compiles reading them) is left
    /// pending rather than waited for; returns whether any was.
    pub(crate) fn apply_pending_erasures(&self, wait: bool) -> bool {
        let waiting: Vec<(Namespace, Arc<RwLock<NamespaceIndexes>>)> = {
            let entries = self.lock();
            let waiting = entries.map.iter().filter(|(_, e)| !e.pending.is_empty());
            waiting.map(|(ns, e)| (ns.clone(), Arc::clone(&e.slot))).collect()
        };
        let mut left = false;
        for (namespace, slot) in waiting {
            let bytes = {
                let mut indexes = match slot.try_write() {
                    Ok(indexes) => indexes,
                    Err(TryLockError::Poisoned(e)) => e.into_inner(),
                    Err(TryLockError::WouldBlock) if !wait => {
                        left = true;
                        continue;
                    }
                    Err(TryLockError::WouldBlock) => {
                        slot.write().unwrap_or_else(PoisonError::into_inner)
                    }
                };
                let started = Instant::now();
                self.apply_pending(&namespace, &slot, &mut indexes);
                tracing::debug!(%namespace, ms = started.elapsed().as_secs_f64() * 1e3,
                    "erasure applied to the cached indexes");
                indexes.heap_bytes()
            };
            self.resized(&namespace, &slot, bytes);
        }
        left
    }

    /// Applies `namespace`'s pending erasures to `indexes` (its slot, held exclusively). Should
    /// one fail, the indexes are emptied and the namespace dropped: the next compile builds it
    /// from the ledger.
    pub(super) fn apply_pending(
        &self,
        namespace: &Namespace,
        slot: &Arc<RwLock<NamespaceIndexes>>,
        indexes: &mut NamespaceIndexes,
    ) {
        let pending = {
            let mut entries = self.lock();
            match entries.map.get_mut(namespace) {
                Some(entry) if Arc::ptr_eq(&entry.slot, slot) => std::mem::take(&mut entry.pending),
                _ => return,
            }
        };
        for erasure in &pending {
            if let Err(error) = indexes.erase_in_place(erasure, namespace) {
                tracing::warn!(
                    %namespace, %error,
                    "an erasure could not be applied to the cached indexes: rebuilt instead"
                );
                *indexes = NamespaceIndexes::empty(namespace);
                let mut entries = self.lock();
                if entries.map.get(namespace).is_some_and(|e| Arc::ptr_eq(&e.slot, slot)) {
                    entries.map.remove(namespace);
                }
                return;
            }
        }
    }
}

impl NamespaceIndexes {
    /// Removes `erasure`'s turns from these indexes, as [`NamespaceIndexes::refresh`] would
    /// after a rebuild; indexes never built are left alone (their build reads the ledger after
    /// the erasure). Fails only on an inconsistency between the indexes, which the caller
    /// answers by dropping them.
    pub(crate) fn erase_in_place(
        &mut self,
        erasure: &PendingErasure,
        namespace: &Namespace,
    ) -> Result<(), CompileError> {
        if self.ledger_head.is_none() {
            return Ok(());
        }
        let erased: HashSet<TurnId> =
            erasure.turns.iter().copied().filter(|&id| self.corpus.get(id).is_some()).collect();
        if !erased.is_empty() {
            self.remove_turns(&erased, namespace)?;
        }
        self.erasures_applied = self.erasures_applied.max(erasure.redaction);
        self.fresh_for = None;
        Ok(())
    }

    fn remove_turns(
        &mut self,
        erased: &HashSet<TurnId>,
        namespace: &Namespace,
    ) -> Result<(), CompileError> {
        let lexical_err = |source| CompileError::Lexical { namespace: namespace.clone(), source };
        let after = self.corpus.without(erased);
        let before = std::mem::replace(&mut self.corpus, after);
        let after = &self.corpus;
        for id in erased {
            if let Some(e) = before.get(*id) {
                self.text_bytes = self.text_bytes.saturating_sub(e.turn.text.len());
            }
        }
        self.lexical.remove(|id| erased.contains(&id));
        if let Some(window) = &mut self.window
            && !window.erase(&before, after, erased).map_err(lexical_err)?
        {
            self.window = None;
        }
        for slot in std::iter::once(&mut self.dense).chain(&mut self.also_dense) {
            let Some(dense) = slot else { continue };
            if dense.index.remove_turns(|id| erased.contains(&id)) {
                dense.forget_missing(|id| erased.contains(&id));
                // Removed with the namespace's files by the erasure's purge.
                dense.saved_rows = None;
            } else {
                // A graph: built again, without them, by the next refresh.
                *slot = None;
            }
        }
        if let Some(context) = &mut self.context_vectors {
            let erased_now = match &self.dense {
                Some(dense) => {
                    let dim = dense.index.dim();
                    let with_vectors = after.len() - dense.missing.len();
                    context.erase(&before, after, erased, with_vectors, |id| {
                        turn_vector(&dense.index, id, dim).map(Cow::Owned)
                    })
                }
                None => false,
            };
            if !erased_now {
                self.context_vectors = None;
            }
        }
        self.vectors_added.retain(|id| !erased.contains(id));
        // Positions moved: what a refresh kept by position no longer applies.
        self.analysed.clear();
        self.set_lexical_saved(0);
        Ok(())
    }
}
