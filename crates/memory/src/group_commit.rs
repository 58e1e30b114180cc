//! Group commit: appends from concurrent callers that wait at the same moment are committed as
//! one durable ledger transaction (one fsync), each caller answered only once its batch is on
//! disk, a refused batch refused alone.
//!
//! No thread of its own: the first caller that finds no commit running becomes the leader,
//! takes every batch queued so far, commits them together and hands each caller its result;
//! batches that arrive meanwhile queue up for the next leader. A lone caller commits alone at
//! once, so nothing waits for a group to fill.

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

use evicortex_core::Turn;
use evicortex_ledger::{AppendReceipt, Ledger};

use crate::AppendError;

/// The queue of batches waiting for a commit, and the results of committed ones.
#[derive(Debug, Default)]
pub(crate) struct GroupCommit {
    state: Mutex<State>,
    done: Condvar,
}

#[derive(Debug, Default)]
struct State {
    /// Batches not yet taken by a leader, with their tickets.
    queue: Vec<(u64, Vec<Turn>)>,
    /// Results not yet collected by their callers, by ticket.
    results: Vec<(u64, Result<AppendReceipt, AppendError>)>,
    next_ticket: u64,
    /// Whether a leader is committing now.
    committing: bool,
    /// Groups committed, and the batches in them (for tests and statistics).
    groups: u64,
    batches: u64,
}

/// How many groups and batches the memory's group commit has committed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GroupCommitStats {
    /// Ledger transactions (each one fsync).
    pub transactions: u64,
    /// Batches committed in them (every call of [`Memory::append`](crate::Memory::append)).
    pub batches: u64,
}

impl GroupCommit {
    /// Appends `turns` as one all-or-nothing batch, possibly in the same transaction as batches
    /// of concurrent callers; returns when the batch is durable (or refused).
    pub(crate) fn append(
        &self,
        ledger: &Ledger,
        turns: &[Turn],
    ) -> Result<AppendReceipt, AppendError> {
        let mut state = self.lock();
        let ticket = state.next_ticket;
        state.next_ticket += 1;
        state.queue.push((ticket, turns.to_vec()));
        loop {
            if let Some(at) = state.results.iter().position(|(t, _)| *t == ticket) {
                return state.results.swap_remove(at).1;
            }
            if state.committing {
                state = self.done.wait(state).unwrap_or_else(PoisonError::into_inner);
                continue;
            }
            state.committing = true;
            let group = std::mem::take(&mut state.queue);
            drop(state);
            let results = commit(ledger, &group);
            state = self.lock();
            state.groups += 1;
            state.batches += group.len() as u64;
            state.results.extend(group.iter().map(|(t, _)| *t).zip(results));
            state.committing = false;
            self.done.notify_all();
        }
    }

    pub(crate) fn stats(&self) -> GroupCommitStats {
        let state = self.lock();
        GroupCommitStats { transactions: state.groups, batches: state.batches }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Commits `group` in one transaction. When that transaction fails as a whole (storage), each
/// batch is retried alone, so that every caller gets the error of its own append.
fn commit(ledger: &Ledger, group: &[(u64, Vec<Turn>)]) -> Vec<Result<AppendReceipt, AppendError>> {
    let batches: Vec<&[Turn]> = group.iter().map(|(_, turns)| turns.as_slice()).collect();
    match ledger.append_group(&batches) {
        Ok(results) => results,
        Err(_) if batches.len() > 1 => batches.iter().map(|turns| ledger.append(turns)).collect(),
        Err(failure) => vec![Err(failure)],
    }
}
