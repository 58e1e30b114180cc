//! `evicortex-bench writers`: many threads each appending one turn per durable write, through
//! `Memory::append` (group commit) against plain rusqlite (one fsync'd transaction per write on
//! a shared connection, what a server without group commit does), in the same run.

use std::{
    path::PathBuf,
    sync::{Arc, Barrier, Mutex, PoisonError},
    time::{Duration, Instant},
};

use anyhow::{Context, ensure};
use evicortex::{EventTime, Memory, Namespace, Role, SessionId, Turn, TurnIndex};

use super::ledger::{ANCHOR_SCHEMA, anchor_connection, chrono_now_micros};
use crate::outln;

/// Arguments of `evicortex-bench writers`.
#[derive(Debug, clap::Args)]
pub struct WritersBenchArgs {
    /// Concurrent writer threads.
    #[arg(long, default_value_t = 200)]
    pub writers: usize,
    /// Seconds each system is driven for.
    #[arg(long, default_value_t = 5.0)]
    pub seconds: f64,
    /// Directory for the temporary stores (default: the system temporary directory).
    #[arg(long, value_name = "DIR")]
    pub work_dir: Option<PathBuf>,
}

/// What one system did: turns acknowledged and each write's latency.
struct Measured {
    turns: usize,
    elapsed: Duration,
    latencies_us: Vec<u64>,
}

impl Measured {
    fn per_second(&self) -> f64 {
        self.turns as f64 / self.elapsed.as_secs_f64()
    }

    fn percentile_ms(&self, p: f64) -> f64 {
        let at = ((self.latencies_us.len() as f64 - 1.0) * p).round() as usize;
        self.latencies_us.get(at).map_or(0.0, |&us| us as f64 / 1000.0)
    }
}

/// Runs the benchmark and prints the table.
pub fn run(args: &WritersBenchArgs) -> anyhow::Result<()> {
    ensure!(args.writers > 0, "--writers must be at least 1");
    ensure!(args.seconds > 0.0, "--seconds must be positive");
    let work = match &args.work_dir {
        Some(dir) => tempfile::tempdir_in(dir),
        None => tempfile::tempdir(),
    }
    .context("creating the benchmark directory")?;
    let duration = Duration::from_secs_f64(args.seconds);

    let anchor_path = work.path().join("anchor.sqlite");
    let conn = anchor_connection(&anchor_path)?;
    conn.execute_batch(ANCHOR_SCHEMA)?;
    let conn = Arc::new(Mutex::new(conn));
    let anchor = drive(args.writers, duration, |turn| {
        let mut conn = conn.lock().unwrap_or_else(PoisonError::into_inner);
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        tx.execute(
            "INSERT INTO turns (namespace, session, turn, role, speaker, text, event_utc_us, \
             event_offset_s, ingest_utc_us, meta) VALUES (?1, ?2, ?3, ?4, NULL, ?5, ?6, ?7, ?8, '{}')",
            rusqlite::params![
                turn.namespace.as_str(),
                turn.session.as_str(),
                turn.turn.raw(),
                turn.role.as_str(),
                turn.text,
                turn.time.utc_micros(),
                turn.time.offset_seconds(),
                chrono_now_micros(),
            ],
        )?;
        tx.commit()?;
        Ok(())
    })?;
    let stored: i64 = conn.lock().unwrap_or_else(PoisonError::into_inner).query_row(
        "SELECT count(*) FROM turns",
        [],
        |r| r.get(0),
    )?;
    ensure!(stored as usize == anchor.turns, "anchor stored {stored} of {} turns", anchor.turns);

    let memory = Memory::open(work.path().join("store"))?;
    let ours = drive(args.writers, duration, |turn| {
        let receipt = memory.append(std::slice::from_ref(turn))?;
        ensure!(receipt.appended() == 1, "the turn was not new");
        Ok(())
    })?;
    let stored = memory.stats()?.ledger.turns;
    ensure!(stored as usize == ours.turns, "evicortex stored {stored} of {} turns", ours.turns);
    let groups = memory.group_commit_stats();

    outln!(
        "evicortex-bench writers: {} threads, each appending one turn per durable write for {:.1} s; \
         WAL + synchronous=FULL for both",
        args.writers,
        args.seconds
    )?;
    outln!(
        "anchor: plain rusqlite, one INSERT transaction per write on a shared connection; \
         evicortex: Memory::append (group commit: {} writes in {} transactions)",
        groups.batches,
        groups.transactions
    )?;
    outln!()?;
    outln!(
        "| {:<20} | {:>7} | {:>8} | {:>10} | {:>8} | {:>8} | {:>8} |",
        "system",
        "writers",
        "turns",
        "turns/s",
        "p50 ms",
        "p99 ms",
        "ratio"
    )?;
    outln!("|{:-<22}|{:->9}|{:->10}|{:->12}|{:->10}|{:->10}|{:->10}|", "", "", "", "", "", "", "")?;
    for (name, m) in [("plain rusqlite", &anchor), ("evicortex append", &ours)] {
        outln!(
            "| {:<20} | {:>7} | {:>8} | {:>10.0} | {:>8.2} | {:>8.2} | {:>8.2} |",
            name,
            args.writers,
            m.turns,
            m.per_second(),
            m.percentile_ms(0.5),
            m.percentile_ms(0.99),
            m.per_second() / anchor.per_second()
        )?;
    }
    outln!()?;
    outln!(
        "ratio = turns/s against plain rusqlite in this run; every acknowledged turn was counted back"
    )?;
    Ok(())
}

/// Drives `write` from `writers` threads for `duration`, each writing a turn of its own session
/// after the other; fails on the first failed write.
fn drive(
    writers: usize,
    duration: Duration,
    write: impl Fn(&Turn) -> anyhow::Result<()> + Sync,
) -> anyhow::Result<Measured> {
    let start = Barrier::new(writers + 1);
    let (results, elapsed) = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..writers)
            .map(|w| {
                let (start, write) = (&start, &write);
                scope.spawn(move || -> anyhow::Result<Vec<u64>> {
                    start.wait();
                    let deadline = Instant::now() + duration;
                    let mut latencies = Vec::new();
                    for i in 0.. {
                        let now = Instant::now();
                        if now >= deadline {
                            break;
                        }
                        write(&turn(w, i))?;
                        latencies.push(now.elapsed().as_micros() as u64);
                    }
                    Ok(latencies)
                })
            })
            .collect();
        start.wait();
        let began = Instant::now();
        let results: Vec<_> = handles.into_iter().map(|h| h.join()).collect();
        (results, began.elapsed())
    });
    let mut latencies_us = Vec::new();
    for result in results {
        latencies_us.extend(result.map_err(|_| anyhow::anyhow!("a writer thread panicked"))??);
    }
    latencies_us.sort_unstable();
    Ok(Measured { turns: latencies_us.len(), elapsed, latencies_us })
}

/// Turn `index` of writer `writer`'s session.
fn turn(writer: usize, index: u32) -> Turn {
    Turn {
        namespace: Namespace::new("load").expect("valid"),
        session: SessionId::new(&format!("writer-{writer}")).expect("valid"),
        turn: TurnIndex::new(index),
        role: if index.is_multiple_of(2) { Role::User } else { Role::Assistant },
        speaker: None,
        text: format!("Writer {writer}, turn {index}: we talked about planning a trip to Kyoto."),
        time: EventTime::from_parts(1_714_640_400_000_000 + i64::from(index) * 1_000_000, 0)
            .expect("valid"),
        meta: serde_json::Map::new(),
    }
}
