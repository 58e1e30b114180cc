//! What the background threads (the embedder, the indexer) share: a thread that sleeps until
//! notified, runs a round, and is stopped and joined when its handle is dropped.

use std::{
    sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError},
    thread::JoinHandle,
    time::{Duration, Instant},
};

/// The handle a memory keeps on one of its background threads.
#[derive(Debug)]
pub(crate) struct BackgroundThread {
    signal: Arc<Signal>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

/// How the handle and the thread talk.
#[derive(Debug, Default)]
pub(crate) struct Signal {
    state: Mutex<State>,
    wake: Condvar,
}

#[derive(Debug, Default)]
struct State {
    /// Work not yet looked at.
    pending: bool,
    stop: bool,
    /// Whether a round is running.
    busy: bool,
}

impl BackgroundThread {
    /// Starts the thread `name` running `body`, with a first round pending when `pending`.
    pub(crate) fn start(
        name: &str,
        pending: bool,
        body: impl FnOnce(&Signal) + Send + 'static,
    ) -> std::io::Result<BackgroundThread> {
        let signal = Arc::new(Signal::default());
        signal.lock().pending = pending;
        let thread_signal = Arc::clone(&signal);
        let thread = std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || body(&thread_signal))?;
        Ok(BackgroundThread { signal, thread: Mutex::new(Some(thread)) })
    }

    /// There is new work: run a round.
    pub(crate) fn notify(&self) {
        self.signal.lock().pending = true;
        self.signal.wake.notify_all();
    }

    /// Waits until no round is running and nothing is pending, or `timeout` passes. Returns
    /// whether it settled.
    pub(crate) fn wait_idle(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut state = self.signal.lock();
        while state.pending || state.busy {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || state.stop {
                return false;
            }
            state = self
                .signal
                .wake
                .wait_timeout(state, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        true
    }
}

impl Drop for BackgroundThread {
    fn drop(&mut self) {
        self.signal.lock().stop = true;
        self.signal.wake.notify_all();
        let thread = self.thread.lock().unwrap_or_else(PoisonError::into_inner).take();
        // The last handle may be dropped by the thread itself (it upgrades for a round).
        if let Some(thread) = thread
            && thread.thread().id() != std::thread::current().id()
        {
            let _joined = thread.join();
        }
    }
}

impl Signal {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sleeps until there is work (then marks a round running and returns `true`) or the
    /// handle is dropped (`false`).
    pub(crate) fn next_round(&self) -> bool {
        let mut state = self.lock();
        while !state.pending && !state.stop {
            state = self.wake.wait(state).unwrap_or_else(PoisonError::into_inner);
        }
        if state.stop {
            return false;
        }
        state.pending = false;
        state.busy = true;
        true
    }

    /// The round ended; when it `failed`, its work is pending again after `retry_after` (or
    /// once the handle is dropped).
    pub(crate) fn round_done(&self, failed: bool, retry_after: Duration) {
        {
            let mut state = self.lock();
            state.busy = false;
            if failed {
                state.pending = true;
            }
        }
        self.wake.notify_all();
        if failed {
            let state = self.lock();
            let _woken = self.wake.wait_timeout(state, retry_after);
        }
    }
}
