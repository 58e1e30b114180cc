//! Which turn documents an erasure removes. Derived stores keyed by a turn's document
//! (`turn_document`: the speaker's name and the text, what the embedding cache holds vectors of)
//! must forget the documents of erased turns. The ledger reports erased texts only, and after
//! the erasure the speaker's name is gone from the ledger, so the documents are read before the
//! erasure, under the writer lock.

use std::{collections::HashMap, ops::ControlFlow};

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

/// The documents of the turns `receipt` erased, sorted, given the documents read before the
/// erasure (`before`). `None` when a turn it erased was not read before (appended between the
/// read and the erasure): its document is unknown. A live turn may hold the same document: its
/// vector is then computed again when next needed (telling would cost a read of every live
/// turn per erasure).
pub(crate) fn erased_documents(
    receipt: &EraseReceipt,
    before: &HashMap<TurnId, TextDigest>,
) -> Option<Vec<TextDigest>> {
    let mut documents = Vec::new();
    for erased in &receipt.erased {
        documents.push(*before.get(&erased.id)?);
    }
    documents.sort();
    documents.dedup();
    Some(documents)
}
