//! Which turn documents an erasure orphans. Derived stores keyed by a turn's document
//! (`turn_document`: the speaker's name and the text, what the embedding cache holds vectors of)
//! must forget the documents of erased turns that no live turn still has. The ledger reports
//! orphaned texts only; a text can outlive its document ("Alice: hi" erased while Bob's "hi"
//! stays), and after the erasure the speaker's name is gone from the ledger, so the documents
//! are read before the erasure, under the writer lock.

use std::{
    collections::{HashMap, HashSet},
    ops::ControlFlow,
};

use evicortex_compiler::turn_document;
use evicortex_core::{TextDigest, TurnId};
use evicortex_ledger::{EvidenceLedger, EvidenceScan};

use crate::{EraseReceipt, EraseTarget, ReadError};

/// The document digests of the live turns `target` matches, by record.
pub(crate) fn target_documents(
    ledger: &dyn EvidenceLedger,
    target: &EraseTarget,
) -> Result<HashMap<TurnId, TextDigest>, ReadError> {
    let mut out = HashMap::new();
    let after = match target {
        // Records are in number order: the scan starts just before the one asked for and
        // ends at it.
        EraseTarget::Record(_, id) => id.raw().checked_sub(1).map(TurnId::from_raw),
        _ => None,
    };
    let scan = EvidenceScan::Namespace(target.namespace(), after);
    ledger.scan_evidence(scan, &mut |_, e| {
        let matches = match target {
            EraseTarget::Namespace(_) => true,
            EraseTarget::Session(_, session) => e.turn.session == *session,
            EraseTarget::Record(_, id) => e.id == *id,
        };
        if matches {
            out.insert(e.id, TextDigest::of(&turn_document(&e.turn)));
        }
        match target {
            EraseTarget::Record(..) => ControlFlow::Break(()),
            _ => ControlFlow::Continue(()),
        }
    })?;
    Ok(out)
}

/// The documents of the turns `receipt` erased that no live turn holds any more, sorted, given
/// the documents read before the erasure (`before`). `None` when a turn it erased was not read
/// before (appended between the read and the erasure): its document is unknown.
///
/// Exact in both directions, so one more scan of the live turns: the ledger's orphaned texts do
/// not decide it, since another turn's document can equal an erased text ("Alice: hi" said with
/// no speaker name, and Alice's "hi").
pub(crate) fn orphaned_documents(
    ledger: &dyn EvidenceLedger,
    receipt: &EraseReceipt,
    before: &HashMap<TurnId, TextDigest>,
) -> Result<Option<Vec<TextDigest>>, ReadError> {
    let mut remaining: HashSet<TextDigest> = HashSet::new();
    for erased in &receipt.erased {
        let Some(&document) = before.get(&erased.id) else { return Ok(None) };
        remaining.insert(document);
    }
    if !remaining.is_empty() {
        ledger.scan_evidence(EvidenceScan::Since(None, None), &mut |_, e| {
            remaining.remove(&TextDigest::of(&turn_document(&e.turn)));
            if remaining.is_empty() { ControlFlow::Break(()) } else { ControlFlow::Continue(()) }
        })?;
    }
    let mut orphaned: Vec<TextDigest> = remaining.into_iter().collect();
    orphaned.sort();
    Ok(Some(orphaned))
}
