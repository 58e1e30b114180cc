//! Bounded queues for the costly requests (answers and compiles): a fixed number run at once, at
//! most a configured number wait, and the rest are refused at once with a retry estimate.
//!
//! Without a bound a burst of answers queued for many minutes behind the one loaded reader and
//! clients timed out, each still holding its body and a connection. A full queue is a 429 with
//! `Retry-After`; a request that waited longer than the queue's time limit without starting is a
//! 503 with `Retry-After`. Both are [`ApiError`]s, so HTTP and MCP say the same thing.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::{ApiError, ServerConfig};

/// Service time assumed for an answer before one has been measured (a local 1.5B reader takes
/// tens of seconds on two cores; the small ones and remote endpoints take less).
const FIRST_ANSWER_ESTIMATE: Duration = Duration::from_secs(10);
/// Service time assumed for a compile before one has been measured.
const FIRST_COMPILE_ESTIMATE: Duration = Duration::from_secs(1);

/// One kind of costly request: who may run, who may wait, and how long they take.
#[derive(Debug)]
struct Queue {
    /// `"answer"` or `"compile"`, for messages.
    kind: &'static str,
    /// The flag that sets `max_waiting`, for messages.
    flag: &'static str,
    /// Permits for running plus waiting requests; none free means the queue is full.
    admitted: Arc<Semaphore>,
    /// Permits for running requests.
    running: Arc<Semaphore>,
    concurrency: usize,
    max_waiting: usize,
    max_wait: Duration,
    /// Moving average of the time a request held its running permit, in milliseconds.
    mean_service_ms: AtomicU64,
}

impl Queue {
    fn new(
        kind: &'static str,
        flag: &'static str,
        running: Arc<Semaphore>,
        concurrency: usize,
        max_waiting: usize,
        max_wait: Duration,
        first_estimate: Duration,
    ) -> Queue {
        Queue {
            kind,
            flag,
            admitted: Arc::new(Semaphore::new(concurrency + max_waiting)),
            running,
            concurrency,
            max_waiting,
            max_wait,
            mean_service_ms: AtomicU64::new(duration_ms(first_estimate)),
        }
    }

    /// Seconds until a request refused now would likely be taken: the waiting ones and the
    /// running ones ahead of it served `concurrency` at a time at the measured mean (at least 1).
    fn retry_after_s(&self) -> u64 {
        let mean = self.mean_service_ms.load(Ordering::Relaxed);
        let ahead = (self.max_waiting + self.concurrency) as u64;
        let ms = mean.saturating_mul(ahead) / self.concurrency.max(1) as u64;
        ms.div_ceil(1000).max(1)
    }

    fn record_service(&self, took: Duration) {
        let sample = duration_ms(took);
        // An exponential moving average (weight 1/4 for the newest), so that a change of reader
        // speed shows within a few requests. A lost race between two updates loses one sample.
        let old = self.mean_service_ms.load(Ordering::Relaxed);
        self.mean_service_ms.store((old * 3 + sample) / 4, Ordering::Relaxed);
    }

    fn full(&self) -> ApiError {
        let retry_after_s = self.retry_after_s();
        ApiError::QueueFull {
            message: format!(
                "too many {kind} requests: {running} running and {waiting} waiting, the most \
                 this server queues ({flag} {waiting}); retry in {retry_after_s} s",
                kind = self.kind,
                running = self.concurrency,
                waiting = self.max_waiting,
                flag = self.flag,
            ),
            retry_after_s,
        }
    }

    fn waited_too_long(&self) -> ApiError {
        let retry_after_s = self.retry_after_s();
        ApiError::QueueTimeout {
            message: format!(
                "the {kind} request waited {secs} s in the queue without starting (the \
                 server's limit, --max-queue-wait-secs); retry in {retry_after_s} s",
                kind = self.kind,
                secs = self.max_wait.as_secs(),
            ),
            retry_after_s,
        }
    }

    /// Admits a request or refuses it at once when the queue is full; then waits for a running
    /// permit until `deadline`.
    async fn enter(self: &Arc<Queue>, deadline: Instant) -> Result<Permit, ApiError> {
        let admitted = Arc::clone(&self.admitted).try_acquire_owned().map_err(|_| self.full())?;
        let running = acquire_until(&self.running, deadline).await.ok_or_else(|| {
            tracing::warn!(kind = self.kind, "a queued request waited past the time limit");
            self.waited_too_long()
        })?;
        Ok(Permit {
            _running: running,
            _admitted: admitted,
            queue: Arc::clone(self),
            started: Instant::now(),
        })
    }
}

/// Waits for a permit of `semaphore` until `deadline`; `None` when the time is up.
async fn acquire_until(
    semaphore: &Arc<Semaphore>,
    deadline: Instant,
) -> Option<OwnedSemaphorePermit> {
    let acquire = Arc::clone(semaphore).acquire_owned();
    // The semaphores are never closed, so an acquire error cannot happen; treat it as no permit.
    tokio::time::timeout_at(deadline.into(), acquire).await.ok()?.ok()
}

fn duration_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// A running request's place in its queue; dropping it lets the next one run and records how
/// long it ran.
#[derive(Debug)]
struct Permit {
    _running: OwnedSemaphorePermit,
    _admitted: OwnedSemaphorePermit,
    queue: Arc<Queue>,
    started: Instant,
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.queue.record_service(self.started.elapsed());
    }
}

/// What a running costly request holds until its work ends: move it into the blocking call, so
/// that a client hanging up mid-work does not free the place before the work stops.
#[derive(Debug)]
pub struct Ticket {
    _queue: Permit,
    _compute: Option<OwnedSemaphorePermit>,
}

/// The queues of one server (HTTP or MCP): answers run one at a time on the one loaded reader,
/// compiles one per core; each admits at most its configured number of waiting requests.
#[derive(Debug, Clone)]
pub struct RequestQueues {
    answers: Arc<Queue>,
    compiles: Arc<Queue>,
    /// One permit per core for CPU-bound work; a compile's running permit, and taken by an
    /// answer too (its compile and, for a local reader, its decoding are CPU-bound).
    compute_slots: Arc<Semaphore>,
    max_wait: Duration,
}

impl RequestQueues {
    /// Queues sized by `config`, with one compute slot per core.
    pub fn new(config: &ServerConfig) -> RequestQueues {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        RequestQueues::with_cores(config, cores)
    }

    fn with_cores(config: &ServerConfig, cores: usize) -> RequestQueues {
        let compute_slots = Arc::new(Semaphore::new(cores));
        let max_wait = config.max_queue_wait;
        let answers = Queue::new(
            "answer",
            "--max-queued-answers",
            Arc::new(Semaphore::new(1)),
            1,
            config.max_queued_answers,
            max_wait,
            FIRST_ANSWER_ESTIMATE,
        );
        let compiles = Queue::new(
            "compile",
            "--max-queued-compiles",
            Arc::clone(&compute_slots),
            cores,
            config.max_queued_compiles,
            max_wait,
            FIRST_COMPILE_ESTIMATE,
        );
        RequestQueues {
            answers: Arc::new(answers),
            compiles: Arc::new(compiles),
            compute_slots,
            max_wait,
        }
    }

    /// A place to run one compile: refused at once (429) when the compile queue is full, or
    /// after waiting the time limit (503).
    pub async fn compile(&self) -> Result<Ticket, ApiError> {
        let deadline = Instant::now() + self.max_wait;
        let queue = self.compiles.enter(deadline).await?;
        Ok(Ticket { _queue: queue, _compute: None })
    }

    /// A place to run one answer (or chat completion): the reader, then a compute slot, within
    /// one time limit; refused at once (429) when the answer queue is full.
    pub async fn answer(&self) -> Result<Ticket, ApiError> {
        let deadline = Instant::now() + self.max_wait;
        let queue = self.answers.enter(deadline).await?;
        let compute = acquire_until(&self.compute_slots, deadline)
            .await
            .ok_or_else(|| self.answers.waited_too_long())?;
        Ok(Ticket { _queue: queue, _compute: Some(compute) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(answers: usize, compiles: usize, wait_ms: u64) -> ServerConfig {
        ServerConfig {
            max_queued_answers: answers,
            max_queued_compiles: compiles,
            max_queue_wait: Duration::from_millis(wait_ms),
            ..ServerConfig::default()
        }
    }

    #[tokio::test]
    async fn beyond_the_running_and_the_waiting_a_request_is_refused_at_once() {
        let queues = RequestQueues::with_cores(&config(2, 1, 60_000), 2);
        let running = queues.answer().await.expect("the reader is free");
        // Two wait for the reader; the third is refused without waiting.
        let waiting: Vec<_> = (0..2)
            .map(|_| {
                let queues = queues.clone();
                tokio::spawn(async move { queues.answer().await.map(drop) })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(50)).await;
        let started = Instant::now();
        let refused = queues.answer().await.expect_err("the answer queue is full");
        assert!(started.elapsed() < Duration::from_millis(50));
        assert_eq!(refused.status(), 429);
        assert_eq!(refused.retry_after_s(), Some(30), "{refused}");
        assert!(refused.to_string().contains("--max-queued-answers 2"), "{refused}");
        drop(running);
        for task in waiting {
            task.await.expect("task").expect("served once the reader is free");
        }
        // Compiles: two cores run, one waits, the fourth is refused.
        let held: Vec<_> = vec![queues.compile().await.unwrap(), queues.compile().await.unwrap()];
        let queues2 = queues.clone();
        let waiter = tokio::spawn(async move { queues2.compile().await.map(drop) });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(queues.compile().await.expect_err("full").status(), 429);
        drop(held);
        waiter.await.unwrap().unwrap();
        queues.compile().await.expect("free again");
    }

    #[tokio::test]
    async fn a_request_that_waits_past_the_limit_is_refused_with_503() {
        let queues = RequestQueues::with_cores(&config(4, 4, 100), 1);
        let running = queues.answer().await.unwrap();
        let started = Instant::now();
        let refused = queues.answer().await.expect_err("waited too long");
        assert!(started.elapsed() >= Duration::from_millis(100));
        assert_eq!(refused.status(), 503);
        assert!(refused.retry_after_s().is_some());
        // The single compute slot is held by the running answer: a compile times out too.
        assert_eq!(queues.compile().await.expect_err("no slot").status(), 503);
        drop(running);
        queues.compile().await.expect("the slot is free");
    }

    #[test]
    fn the_retry_estimate_follows_the_measured_service_time() {
        let queue = Queue::new(
            "answer",
            "--max-queued-answers",
            Arc::new(Semaphore::new(1)),
            1,
            3,
            Duration::from_secs(60),
            Duration::from_secs(10),
        );
        assert_eq!(queue.retry_after_s(), 40);
        for _ in 0..40 {
            queue.record_service(Duration::from_millis(500));
        }
        assert_eq!(queue.retry_after_s(), 2);
    }
}
