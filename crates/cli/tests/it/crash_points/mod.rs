//! SIGKILL at random moments beyond ingest: `serve` under append load, `serve` between SIGTERM
//! and its exit, `erase` (its scrub of the files included), an erasure in flight over HTTP and
//! over MCP, `embed` catch-up, the HNSW index file being written, a `compile` that writes the
//! lexical and graph index files, and `migrate` to PostgreSQL. After every kill the store is
//! reopened and checked: `verify` passes, no acknowledged turn or batch is missing, no batch is
//! partial, an erased text is in no file, the derived stores (embedding cache, index files) are
//! consistent with a clean run, and a killed migration leaves its source untouched.
//!
//! A slow test: it runs with `EVICORTEX_SLOW_TESTS=1`. `EVICORTEX_CRASH_KILLS` sets the total
//! number of kills (default 1,000, shared among the scenarios in fixed proportions),
//! `EVICORTEX_CRASH_SCENARIOS` a comma-separated subset of the scenario names, and
//! `EVICORTEX_CRASH_POINTS_SEED` replays the random delays and data of an earlier run.

mod ann;
mod compile_derived;
mod embed;
mod erase;
mod erase_doors;
mod migrate_postgres;
mod serve;

use std::{
    collections::BTreeMap,
    process::{Child, ExitStatus},
    time::{Duration, Instant},
};

use rand::{Rng, SeedableRng, rngs::StdRng};

/// Sleeps `delay`, then SIGKILLs `child` and reaps it: whether it was still running when killed,
/// and how it ended.
fn kill_after(child: &mut Child, delay: Duration) -> (bool, ExitStatus) {
    std::thread::sleep(delay);
    let running = child.try_wait().unwrap().is_none();
    child.kill().unwrap();
    (running, child.wait().unwrap())
}

/// The scenarios, their names and their share of the kills (in thousandths).
const SCENARIOS: &[(&str, u32)] = &[
    ("serve-append", 250),
    ("serve-shutdown", 200),
    ("erase", 200),
    ("http-erase", 100),
    ("mcp-erase", 100),
    // Each of these loads the encoder in the killed process: a kill costs seconds.
    ("embed", 40),
    ("ann-index", 40),
    // A kill here costs about 30 s: the killed compile, the next one, at times a clean copy's.
    ("compile-derived", 25),
    // A new database, a copy of 3,000 turns and a second migrate for each kill.
    ("migrate-postgres", 45),
];

#[test]
fn sigkill_at_random_points_beyond_ingest_keeps_every_guarantee() {
    // The ANN scenario runs its killed child as this test binary (see `ann`).
    if ann::is_child() {
        ann::child_main();
    }
    if !crate::cli::slow_tests_enabled("crash points") {
        return;
    }
    let seed: u64 = env_number("EVICORTEX_CRASH_POINTS_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
            as u64
    });
    let total = env_number("EVICORTEX_CRASH_KILLS").unwrap_or(1_000) as u32;
    let only: Option<Vec<String>> = std::env::var("EVICORTEX_CRASH_SCENARIOS")
        .ok()
        .map(|s| s.split(',').map(|n| n.trim().to_owned()).collect());
    if let Some(names) = &only {
        for name in names {
            assert!(
                SCENARIOS.iter().any(|(n, _)| n == name),
                "EVICORTEX_CRASH_SCENARIOS: unknown scenario {name:?}"
            );
        }
    }
    eprintln!(
        "crash points: seed {seed} (set EVICORTEX_CRASH_POINTS_SEED to replay), {total} kills"
    );
    let started = Instant::now();
    let mut rows = Vec::new();
    for (i, &(name, share)) in SCENARIOS.iter().enumerate() {
        if only.as_ref().is_some_and(|names| !names.iter().any(|n| n == name)) {
            continue;
        }
        let kills = (total * share).div_ceil(1_000).max(1) as usize;
        let rng = StdRng::seed_from_u64(seed.wrapping_add(i as u64));
        let mut row = match name {
            "serve-append" => serve::append_load(rng, kills),
            "serve-shutdown" => serve::shutdown(rng, kills),
            "erase" => erase::erase(rng, kills),
            "embed" => embed::catch_up(rng, kills),
            "ann-index" => ann::index_persistence(rng, kills),
            "http-erase" => erase_doors::http(rng, kills),
            "mcp-erase" => erase_doors::mcp(rng, kills),
            "compile-derived" => compile_derived::derived_files(rng, kills),
            "migrate-postgres" => migrate_postgres::to_postgres(rng, kills),
            other => unreachable!("scenario {other}"),
        };
        row.seconds = row.started.map_or(0.0, |s| s.elapsed().as_secs_f64());
        eprintln!("{}", row.line(name));
        rows.push((name, row));
    }
    eprintln!(
        "\ncrash points: seed {seed}, {} kills in {:.0} s\n\n\
         | scenario | kills | where the kills landed | runs that completed first | seconds |\n\
         |---|---|---|---|---|",
        rows.iter().map(|(_, r)| r.kills).sum::<usize>(),
        started.elapsed().as_secs_f64()
    );
    for (name, row) in &rows {
        eprintln!("{}", row.line(name));
    }
}

fn env_number(name: &str) -> Option<u64> {
    let value = std::env::var(name).ok()?;
    Some(value.parse().unwrap_or_else(|e| panic!("{name}={value:?}: {e}")))
}

/// What one scenario did: kills, where they landed, runs that finished before their kill.
#[derive(Default)]
pub struct Row {
    pub kills: usize,
    pub landed: BTreeMap<&'static str, usize>,
    pub completed: usize,
    pub started: Option<Instant>,
    pub seconds: f64,
}

impl Row {
    pub fn new() -> Row {
        Row { started: Some(Instant::now()), ..Row::default() }
    }

    /// A SIGKILL that hit the process while it ran, landing at `place`.
    pub fn kill(&mut self, place: &'static str) {
        self.kills += 1;
        *self.landed.entry(place).or_default() += 1;
    }

    /// Guards against a window that never lets a kill land.
    #[track_caller]
    pub fn check_progress(&self, runs: usize, wanted: usize) {
        assert!(runs < wanted * 4 + 20, "only {} kills landed in {runs} runs", self.kills);
    }

    fn line(&self, name: &str) -> String {
        let landed: Vec<String> = self.landed.iter().map(|(p, n)| format!("{p}: {n}")).collect();
        format!(
            "| {name} | {} | {} | {} | {:.0} |",
            self.kills,
            landed.join("; "),
            self.completed,
            self.seconds
        )
    }
}

/// The range of random delays before a kill, adapted to how long the killed work takes on this
/// machine: widened when kills land too early to test anything, narrowed when runs finish first.
pub struct Window {
    ms: f64,
    min: f64,
    max: f64,
}

impl Window {
    pub fn new(ms: f64, min: f64, max: f64) -> Window {
        Window { ms, min, max }
    }

    pub fn sample(&self, rng: &mut StdRng) -> Duration {
        Duration::from_secs_f64(rng.random_range(0.0..self.ms) / 1_000.0)
    }

    /// Multiplies the window by `factor`, within its bounds.
    pub fn scale(&mut self, factor: f64) {
        self.ms = (self.ms * factor).clamp(self.min, self.max);
    }
}
