//! An erasure applied to a namespace's cached indexes in place: the erased turns leave the
//! corpus, the turn and window indexes, the vector indexes and the context vectors, and the
//! windows that held them are computed again, so the indexes search exactly as a rebuild from
//! the ledger would. A rebuild analyses every turn of the namespace again (seconds at 100,000
//! turns); this costs a pass over the postings and vectors, plus the few changed windows.

use std::{borrow::Cow, collections::HashSet};

use evicortex_core::{Namespace, TurnId};
use evicortex_vector::VectorIndexRead;

use super::{NamespaceIndexes, turn_vector};
use crate::CompileError;

/// An erasure committed through this memory, waiting to be applied to a cached namespace.
#[derive(Debug, Clone)]
pub(crate) struct PendingErasure {
    /// The erased turns of the namespace.
    pub(crate) turns: Vec<TurnId>,
    /// The namespace's redaction record of the erasure (`None`: nothing was newly erased).
    pub(crate) redaction: Option<TurnId>,
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
