//! The background embedder: a thread that catches the embedding cache up after appends, so that
//! an append is acknowledged as soon as it is durable and embedding never sits on its critical
//! path. Appends that arrive while a round runs are embedded together in the next round.
//!
//! The thread runs the rounds it is given (`Memory::background_round` over a weak handle): it
//! ends when the memory is gone (finishing the chunk it is embedding; what is left stays pending
//! for the next catch-up).

use std::time::Duration;

use evicortex_ledger::LedgerPosition;

use crate::{
    CatchUpError,
    background_thread::{BackgroundThread, Signal},
    dense::Dense,
};

/// Texts embedded and committed together by the background embedder: small, so that an erasure
/// or shutdown waits for little.
pub(crate) const BACKGROUND_CHUNK_TEXTS: usize = 64;

/// Pause after a failed round before trying again.
const RETRY_AFTER: Duration = Duration::from_secs(5);

/// One round of catch-up over the turns after the given ledger position, returning the head read
/// before it started; `None` once the memory is gone.
pub(crate) type Round = Box<
    dyn FnMut(Option<LedgerPosition>) -> Option<Result<Option<LedgerPosition>, CatchUpError>>
        + Send,
>;

/// The handle a memory keeps on its background embedder.
#[derive(Debug)]
pub(crate) struct BackgroundEmbedder(BackgroundThread);

impl BackgroundEmbedder {
    /// Starts the thread running `round` for the encoders `dense`; its first round embeds
    /// everything pending in the store.
    /// The embedder and the encoder's worker threads run at the lowest priority, so that
    /// embedding a backlog never slows the appends and compiles of the same process: the CPU
    /// is theirs first (a backlog then drains in the gaps, and at full speed when idle).
    pub(crate) fn start<'d>(
        dense: impl IntoIterator<Item = &'d Dense>,
        round: Round,
    ) -> std::io::Result<BackgroundEmbedder> {
        for dense in dense {
            dense.encoder.lower_worker_priority()?;
        }
        BackgroundThread::start("evicortex-embedder", true, move |signal| run(round, signal))
            .map(BackgroundEmbedder)
    }

    /// New turns are durable: embed them.
    pub(crate) fn notify(&self) {
        self.0.notify();
    }

    /// Waits until no round is running and nothing is pending (every turn appended before the
    /// call has been offered to the encoder), or `timeout` passes. Returns whether it settled.
    pub(crate) fn wait_idle(&self, timeout: Duration) -> bool {
        self.0.wait_idle(timeout)
    }
}

fn run(mut round: Round, signal: &Signal) {
    if let Err(err) = evicortex_embed::thread_priority::lower_current_thread_priority() {
        tracing::warn!(error = %err, "the background embedder keeps its normal priority");
    }
    // Every turn up to this record has been offered to the encoder.
    let mut done_up_to: Option<LedgerPosition> = None;
    let mut first_round = true;
    while signal.next_round() {
        let after = if first_round { None } else { done_up_to };
        let Some(outcome) = round(after) else { return };
        let failed = match outcome {
            Ok(head) => {
                done_up_to = head.or(done_up_to);
                first_round = false;
                false
            }
            Err(err) => {
                tracing::warn!(error = %err, "background embedding failed; retrying");
                true
            }
        };
        signal.round_done(failed, RETRY_AFTER);
    }
}
