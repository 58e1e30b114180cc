//! Group commit: appends from concurrent callers that wait at the same moment are committed as
//! one durable ledger transaction (one fsync), each caller answered only once its batch is on
//! disk, a refused batch refused alone.
//!
//! No thread of its own: the first caller that finds no commit running becomes the leader,
//! takes every batch queued so far, commits them together and hands each caller its result;
//! batches that arrive meanwhile queue up for the next leader. A lone caller commits alone at
//! once, so nothing waits for a group to fill.
//!
//! Each waiting caller sleeps on a slot of its own and is woken exactly once: with its result,
//! or to lead the next group (the finishing leader hands over to the oldest queued caller
//! directly). One shared condition variable woke every waiter after every commit; with hundreds
//! of waiters on two cores those wake-ups, each taking the queue's lock in turn, were the
//! acknowledgements' tail latency.

use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use evicortex_core::Turn;
use evicortex_ledger::AppendReceipt;

use evicortex_ledger::EvidenceLedger;

use crate::AppendError;

/// The queue of batches waiting for a commit.
#[derive(Debug, Default)]
pub(crate) struct GroupCommit {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Batches not yet taken by a leader, oldest first, each with its caller's slot.
    queue: Vec<(Vec<Turn>, Arc<Slot>)>,
    /// Whether a leader is committing now, or has been chosen and is about to.
    committing: bool,
    /// Groups committed, and the batches in them (for tests and statistics).
    groups: u64,
    batches: u64,
}

/// Where one waiting caller learns what to do next.
#[derive(Debug, Default)]
struct Slot {
    word: Mutex<Word>,
    woken: Condvar,
}

#[derive(Debug, Default)]
enum Word {
    #[default]
    Wait,
    /// Commit the queue: this caller leads the next group.
    Lead,
    /// The batch was committed (or refused).
    Done(Result<AppendReceipt, AppendError>),
}

impl GroupCommit {
    /// Appends `turns` as one all-or-nothing batch, possibly in the same transaction as batches
    /// of concurrent callers; returns when the batch is durable (or refused).
    pub(crate) fn append(
        &self,
        ledger: &dyn EvidenceLedger,
        turns: &[Turn],
    ) -> Result<AppendReceipt, AppendError> {
        let slot = Arc::new(Slot::default());
        {
            let mut state = self.lock();
            state.queue.push((turns.to_vec(), Arc::clone(&slot)));
            if state.committing {
                drop(state);
                match slot.wait() {
                    Word::Done(result) => return result,
                    Word::Lead => {}
                    Word::Wait => unreachable!("a slot is only woken with a word"),
                }
            } else {
                state.committing = true;
            }
        }
        self.lead(ledger, &slot)
    }

    /// Commits everything queued (this caller's batch among it), answers every other caller of
    /// the group, hands the lead to the oldest batch queued meanwhile, and returns this caller's
    /// result.
    fn lead(
        &self,
        ledger: &dyn EvidenceLedger,
        own: &Arc<Slot>,
    ) -> Result<AppendReceipt, AppendError> {
        let group = std::mem::take(&mut self.lock().queue);
        let batches: Vec<&[Turn]> = group.iter().map(|(turns, _)| turns.as_slice()).collect();
        let results = commit(ledger, &batches);
        let mut mine = None;
        for ((_, slot), result) in group.iter().zip(results) {
            if Arc::ptr_eq(slot, own) {
                mine = Some(result);
            } else {
                slot.tell(Word::Done(result));
            }
        }
        {
            let mut state = self.lock();
            state.groups += 1;
            state.batches += group.len() as u64;
            match state.queue.first() {
                Some((_, next)) => next.tell(Word::Lead),
                None => state.committing = false,
            }
        }
        mine.expect("the leader's batch is in the group it commits")
    }

    pub(crate) fn stats(&self) -> GroupCommitStats {
        let state = self.lock();
        GroupCommitStats { transactions: state.groups, batches: state.batches }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Slot {
    fn tell(&self, word: Word) {
        *self.word.lock().unwrap_or_else(PoisonError::into_inner) = word;
        self.woken.notify_one();
    }

    fn wait(&self) -> Word {
        let mut word = self.word.lock().unwrap_or_else(PoisonError::into_inner);
        while matches!(*word, Word::Wait) {
            word = self.woken.wait(word).unwrap_or_else(PoisonError::into_inner);
        }
        std::mem::take(&mut *word)
    }
}

/// How many groups and batches the memory's group commit has committed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GroupCommitStats {
    /// Ledger transactions (each one fsync).
    pub transactions: u64,
    /// Batches committed in them (every call of [`Memory::append`](crate::Memory::append)).
    pub batches: u64,
}

/// Commits `batches` in one transaction. When that transaction fails as a whole (storage), each
/// batch is retried alone, so that every caller gets the error of its own append.
fn commit(
    ledger: &dyn EvidenceLedger,
    batches: &[&[Turn]],
) -> Vec<Result<AppendReceipt, AppendError>> {
    match ledger.append_group(batches) {
        Ok(results) => results,
        Err(_) if batches.len() > 1 => batches.iter().map(|turns| ledger.append(turns)).collect(),
        Err(failure) => vec![Err(failure)],
    }
}
