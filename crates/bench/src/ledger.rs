//! `evicortex-bench ledger`: the ledger against plain rusqlite inserts of the same rows.
//!
//! The anchor is the same SQLite build, the same pragmas (WAL, `synchronous=FULL`), a table
//! with the same columns and the same `UNIQUE(namespace, session, turn)`, one transaction per
//! batch; it lacks what the ledger adds: the canonical encoding and BLAKE3 digest, the chain,
//! the idempotence check and the head update. The anchor of verify and of reading every turn
//! (what compile and export do, each turn checked against its digest and chain link) is a full
//! scan reading every column of the anchor table without hashing.

use std::{path::PathBuf, time::Instant};

use anyhow::{Context, ensure};
use evicortex::Memory;
use evicortex::{EraseTarget, EventTime, Namespace, Role, SessionId, Turn, TurnIndex};
use rand::{Rng, SeedableRng, rngs::StdRng};

use crate::{outln, progress};

/// Arguments of `evicortex-bench ledger`.
#[derive(Debug, clap::Args)]
pub struct LedgerBenchArgs {
    /// Turns appended in batches of 100 and of 10,000, and verified.
    #[arg(long, default_value_t = 100_000)]
    pub turns: usize,
    /// Turns appended one per durable commit (fewer: each is an fsync).
    #[arg(long, default_value_t = 5_000)]
    pub single_turns: usize,
    /// Turns of the large ledger whose verify time is measured (0 skips it).
    #[arg(long, default_value_t = 1_000_000)]
    pub large_turns: usize,
    /// Directory for the temporary stores (default: the system temporary directory).
    #[arg(long, value_name = "DIR")]
    pub work_dir: Option<PathBuf>,
    /// Seed of the generated conversation.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
}

struct Row {
    operation: String,
    turns: usize,
    ours: f64,
    anchor: f64,
    unit: &'static str,
}

/// Runs the benchmark and prints the table.
pub fn run(args: &LedgerBenchArgs) -> anyhow::Result<()> {
    let work = match &args.work_dir {
        Some(dir) => tempfile::tempdir_in(dir),
        None => tempfile::tempdir(),
    }
    .context("creating the benchmark directory")?;
    let max = args.turns.max(args.single_turns).max(args.large_turns);
    let spinner = progress::spinner("generating turns");
    let turns = generate(max, args.seed);
    spinner.finish_and_clear();
    let payload: usize = turns[..args.turns].iter().map(payload_bytes).sum();
    let mut rows = Vec::new();

    for (batch, n) in [(1, args.single_turns), (100, args.turns), (10_000, args.turns)] {
        let slice = &turns[..n];
        let name = format!("b{batch}");
        let ours = time_ledger_append(&work.path().join(format!("ledger-{name}")), slice, batch)?;
        let anchor =
            time_anchor_append(&work.path().join(format!("anchor-{name}.sqlite")), slice, batch)?;
        rows.push(Row {
            operation: format!("append, batches of {batch}"),
            turns: n,
            ours: n as f64 / ours,
            anchor: n as f64 / anchor,
            unit: "turns/s",
        });
    }

    // Bytes on disk and verify at `turns`: the stores written in batches of 10,000.
    let ledger_dir = work.path().join("ledger-b10000");
    let anchor_path = work.path().join("anchor-b10000.sqlite");
    rows.push(bytes_per_turn(&ledger_dir, &anchor_path, args.turns)?);
    let (ours, anchor) = time_verify(&ledger_dir, &anchor_path, args.turns)?;
    rows.push(Row { operation: "verify".to_owned(), turns: args.turns, ours, anchor, unit: "s" });
    let (ours, anchor) = time_read(&ledger_dir, &anchor_path, args.turns)?;
    rows.push(Row {
        operation: "read every turn".to_owned(),
        turns: args.turns,
        ours,
        anchor,
        unit: "s",
    });

    let (ours, anchor) = time_read_newest(&ledger_dir, &anchor_path, &turns[..args.turns])?;
    rows.push(Row {
        operation: "read a namespace's newest".to_owned(),
        turns: args.turns,
        ours,
        anchor,
        unit: "ms",
    });

    // Erasures last: they change the store. A turn of 2 bytes may outgrow its cell once
    // cleared, so its scrub rewrites the file, as every erasure's did before.
    let erasures = [("erase one turn", None), ("erase a turn of 2 bytes", Some("ok"))];
    for (round, (label, text)) in erasures.into_iter().enumerate() {
        let (ours, anchor) = time_erase(&ledger_dir, &anchor_path, &turns[0], text, round)?;
        rows.push(Row { operation: label.to_owned(), turns: args.turns, ours, anchor, unit: "ms" });
    }

    if args.large_turns > 0 {
        let slice = &turns[..args.large_turns];
        let dir = work.path().join("ledger-large");
        let path = work.path().join("anchor-large.sqlite");
        let ours = time_ledger_append(&dir, slice, 10_000)?;
        let anchor = time_anchor_append(&path, slice, 10_000)?;
        rows.push(Row {
            operation: "append, batches of 10000".to_owned(),
            turns: args.large_turns,
            ours: args.large_turns as f64 / ours,
            anchor: args.large_turns as f64 / anchor,
            unit: "turns/s",
        });
        let (ours, anchor) = time_verify(&dir, &path, args.large_turns)?;
        rows.push(Row {
            operation: "verify".to_owned(),
            turns: args.large_turns,
            ours,
            anchor,
            unit: "s",
        });
        rows.push(bytes_per_turn(&dir, &path, args.large_turns)?);
    }

    outln!(
        "evicortex-bench ledger: seed {}, payload {:.0} bytes per turn (text, ids, meta), \
         WAL + synchronous=FULL for both",
        args.seed,
        payload as f64 / args.turns as f64
    )?;
    outln!(
        "anchor: plain rusqlite INSERTs of the same rows into a table with the same columns and UNIQUE index"
    )?;
    outln!()?;
    outln!(
        "| {:<26} | {:>9} | {:>14} | {:>14} | {:>8} | {:<7} |",
        "operation",
        "turns",
        "evicortex",
        "anchor",
        "ratio",
        "unit"
    )?;
    outln!("|{:-<28}|{:->11}|{:->16}|{:->16}|{:->10}|{:-<9}|", "", "", "", "", "", "")?;
    for row in &rows {
        outln!(
            "| {:<26} | {:>9} | {:>14.2} | {:>14.2} | {:>8.2} | {:<7} |",
            row.operation,
            row.turns,
            row.ours,
            row.anchor,
            row.ours / row.anchor,
            row.unit
        )?;
    }
    outln!()?;
    outln!(
        "ratio = evicortex / anchor (turns/s: below 1 is slower; s and bytes: above 1 is more)"
    )?;
    Ok(())
}

/// A deterministic conversation: 20 turns per session, 50 sessions per namespace, texts of
/// 40 to 720 bytes drawn from a small vocabulary.
fn generate(n: usize, seed: u64) -> Vec<Turn> {
    const WORDS: &[&str] = &[
        "the", "I", "moved", "to", "Lisbon", "in", "May", "and", "my", "sister", "visited", "we",
        "talked", "about", "a", "new", "job", "at", "hospital", "garden", "tomatoes", "weekend",
        "recipe", "marathon", "training", "plan", "café", "übung", "東京", "meeting", "budget",
        "flight", "was", "delayed", "because", "of", "fog", "remember", "that", "dog", "named",
        "Biscuit", "likes", "long", "walks", "near", "river", "yes", "no", "maybe", "tomorrow",
    ];
    let mut rng = StdRng::seed_from_u64(seed);
    let base =
        EventTime::parse_rfc3339("2023-01-01T09:00:00+01:00").expect("fixed time").utc_micros();
    (0..n)
        .map(|i| {
            let target = rng.random_range(40..720);
            let mut text = String::with_capacity(target + 16);
            while text.len() < target {
                if !text.is_empty() {
                    text.push(' ');
                }
                text.push_str(WORDS[rng.random_range(0..WORDS.len())]);
            }
            Turn {
                namespace: Namespace::new(&format!("user-{}", i / 1000)).expect("valid"),
                session: SessionId::new(&format!("session-{}", i / 20)).expect("valid"),
                turn: TurnIndex::new((i % 20) as u32),
                role: if i % 2 == 0 { Role::User } else { Role::Assistant },
                speaker: None,
                text,
                time: EventTime::from_parts(base + i as i64 * 60_000_000, 3600).expect("valid"),
                meta: serde_json::Map::new(),
            }
        })
        .collect()
}

fn payload_bytes(t: &Turn) -> usize {
    t.namespace.as_str().len() + t.session.as_str().len() + t.text.len() + 4 + 8 + 4
}

fn time_ledger_append(dir: &std::path::Path, turns: &[Turn], batch: usize) -> anyhow::Result<f64> {
    let memory = Memory::open(dir)?;
    let bar = progress::bar(turns.len() as u64, &format!("ledger b{batch}"));
    let start = Instant::now();
    let mut appended = 0;
    for chunk in turns.chunks(batch) {
        appended += memory.append(chunk)?.appended();
        bar.inc(chunk.len() as u64);
    }
    let elapsed = start.elapsed().as_secs_f64();
    bar.finish_and_clear();
    ensure!(appended == turns.len(), "appended {appended} of {} turns", turns.len());
    Ok(elapsed)
}

pub(super) const ANCHOR_SCHEMA: &str = "
CREATE TABLE turns (
    seq INTEGER PRIMARY KEY, namespace TEXT NOT NULL, session TEXT NOT NULL, turn INTEGER NOT NULL,
    role TEXT NOT NULL, speaker TEXT, text TEXT NOT NULL, event_utc_us INTEGER NOT NULL,
    event_offset_s INTEGER NOT NULL, ingest_utc_us INTEGER NOT NULL, meta TEXT NOT NULL,
    UNIQUE (namespace, session, turn)
);";

pub(super) fn anchor_connection(path: &std::path::Path) -> anyhow::Result<rusqlite::Connection> {
    let conn = rusqlite::Connection::open(path)?;
    let mode: String = conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0))?;
    ensure!(mode.eq_ignore_ascii_case("wal"), "anchor journal mode is {mode}");
    conn.execute_batch("PRAGMA synchronous = FULL;")?;
    Ok(conn)
}

fn time_anchor_append(path: &std::path::Path, turns: &[Turn], batch: usize) -> anyhow::Result<f64> {
    let mut conn = anchor_connection(path)?;
    conn.execute_batch(ANCHOR_SCHEMA)?;
    let bar = progress::bar(turns.len() as u64, &format!("anchor b{batch}"));
    let start = Instant::now();
    let mut seq: i64 = 0;
    for chunk in turns.chunks(batch) {
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        {
            let now = chrono_now_micros();
            let mut insert = tx.prepare_cached(
                "INSERT INTO turns VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
            )?;
            for t in chunk {
                seq += 1;
                insert.execute(rusqlite::params![
                    seq,
                    t.namespace.as_str(),
                    t.session.as_str(),
                    t.turn.raw(),
                    t.role.as_str(),
                    t.speaker.as_deref(),
                    t.text,
                    t.time.utc_micros(),
                    t.time.offset_seconds(),
                    now,
                    "{}",
                ])?;
            }
        }
        tx.commit()?;
        bar.inc(chunk.len() as u64);
    }
    let elapsed = start.elapsed().as_secs_f64();
    bar.finish_and_clear();
    ensure!(seq as usize == turns.len(), "anchor inserted {seq} of {}", turns.len());
    Ok(elapsed)
}

pub(super) fn chrono_now_micros() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64)
}

/// The row of bytes on disk per turn of the ledger in `ledger_dir` and of the anchor, both
/// holding `turns` turns.
fn bytes_per_turn(
    ledger_dir: &std::path::Path,
    anchor: &std::path::Path,
    turns: usize,
) -> anyhow::Result<Row> {
    Ok(Row {
        operation: "bytes on disk per turn".to_owned(),
        turns,
        ours: dir_bytes(ledger_dir)? as f64 / turns as f64,
        anchor: file_bytes(anchor)? as f64 / turns as f64,
        unit: "bytes",
    })
}

/// Verify of the ledger against a full scan of the anchor reading every column.
fn time_verify(
    ledger_dir: &std::path::Path,
    anchor: &std::path::Path,
    n: usize,
) -> anyhow::Result<(f64, f64)> {
    time_beside_anchor_scan(ledger_dir, anchor, n, "verifying", |memory| {
        let report = memory.verify()?;
        ensure!(report.turns as usize == n, "verify saw {} turns, expected {n}", report.turns);
        Ok(())
    })
}

/// Seconds of `run` over the ledger in `ledger_dir` (opened read-only; `doing` names it on the
/// spinner), and of a full scan of the anchor's `n` rows.
fn time_beside_anchor_scan(
    ledger_dir: &std::path::Path,
    anchor: &std::path::Path,
    n: usize,
    doing: &str,
    run: impl FnOnce(&Memory) -> anyhow::Result<()>,
) -> anyhow::Result<(f64, f64)> {
    let memory = Memory::open_read_only(ledger_dir)?;
    let spinner = progress::spinner(&format!("{doing} {n}"));
    let start = Instant::now();
    run(&memory)?;
    let ours = start.elapsed().as_secs_f64();
    spinner.finish_and_clear();
    let (_, anchor_time) = scan_anchor(anchor, n)?;
    Ok((ours, anchor_time))
}

/// Median milliseconds of [`ERASURES`] erasures of one turn each through the facade (appended
/// just before, a copy of `like` in a session of its own with a text no other turn holds, or
/// `text` when given), and of the anchor's: clearing one row's text in a durable transaction,
/// then checkpointing and truncating the WAL (what any erasure that leaves no copy in the files
/// must do at least). `round` picks other anchor rows each call.
fn time_erase(
    ledger_dir: &std::path::Path,
    anchor: &std::path::Path,
    like: &Turn,
    text: Option<&str>,
    round: usize,
) -> anyhow::Result<(f64, f64)> {
    let memory = Memory::open(ledger_dir)?;
    let spinner = progress::spinner("erasing");
    let mut ours = Vec::new();
    for k in 0..ERASURES {
        let mut turn = like.clone();
        turn.session = SessionId::new(&format!("erase-bench-{round}-{k}"))?;
        turn.text = match text {
            Some(text) => text.to_owned(),
            // A text of its own, as most turns have.
            None => format!("{} (erase bench {round} {k})", like.text),
        };
        let receipt = memory.append(std::slice::from_ref(&turn))?;
        let id = receipt.outcomes[0].id;
        let start = Instant::now();
        let erased = memory.erase(&EraseTarget::Record(turn.namespace.clone(), id))?;
        ours.push(start.elapsed().as_secs_f64() * 1e3);
        ensure!(erased.erased.len() == 1, "erasing record {id} erased {:?}", erased.erased);
    }
    drop(memory);
    let conn = anchor_connection(anchor)?;
    let mut theirs = Vec::new();
    for k in 0..ERASURES {
        let start = Instant::now();
        let tx =
            rusqlite::Transaction::new_unchecked(&conn, rusqlite::TransactionBehavior::Immediate)?;
        let row = (round * ERASURES + k) as i64 * 7 + 1;
        tx.execute("UPDATE turns SET text = '' WHERE seq = ?1", [row])?;
        tx.commit()?;
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
        theirs.push(start.elapsed().as_secs_f64() * 1e3);
    }
    spinner.finish_and_clear();
    Ok((median(&mut ours), median(&mut theirs)))
}

const ERASURES: usize = 7;

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// A full scan of the anchor reading every column: (rows, seconds).
fn scan_anchor(anchor: &std::path::Path, n: usize) -> anyhow::Result<(usize, f64)> {
    let conn = anchor_connection(anchor)?;
    let start = Instant::now();
    let mut stmt = conn.prepare("SELECT * FROM turns ORDER BY seq")?;
    let mut rows = stmt.query([])?;
    let (mut seen, mut bytes) = (0usize, 0usize);
    while let Some(row) = rows.next()? {
        for i in 0..11 {
            bytes += match row.get_ref(i)? {
                rusqlite::types::ValueRef::Text(t) => t.len(),
                _ => 8,
            };
        }
        seen += 1;
    }
    let elapsed = start.elapsed().as_secs_f64();
    ensure!(seen == n && bytes > 0, "anchor scan saw {seen} rows, expected {n}");
    Ok((seen, elapsed))
}

/// What compile and export do: every live turn decoded and checked against its digest and
/// chain link; against the same full scan of the anchor.
fn time_read(
    ledger_dir: &std::path::Path,
    anchor: &std::path::Path,
    n: usize,
) -> anyhow::Result<(f64, f64)> {
    time_beside_anchor_scan(ledger_dir, anchor, n, "reading", |memory| {
        let mut bytes = 0usize;
        let seen = memory.for_each_evidence(None, None, |e| {
            bytes += e.turn.text.len();
            Ok::<(), evicortex::ReadError>(())
        })?;
        ensure!(seen as usize == n && bytes > 0, "read {seen} turns, expected {n}");
        Ok(())
    })
}

/// What a compile's refresh reads after an append: the turns of one namespace after the one it
/// last saw, here its newest turn, for each namespace of the store in turn; milliseconds per
/// read. The anchor reads the same row by its namespace and sequence number.
fn time_read_newest(
    ledger_dir: &std::path::Path,
    anchor: &std::path::Path,
    turns: &[Turn],
) -> anyhow::Result<(f64, f64)> {
    let mut newest: std::collections::BTreeMap<&Namespace, (u64, i64)> = Default::default();
    for (seq, t) in turns.iter().enumerate() {
        let entry = newest.entry(&t.namespace).or_insert((0, 0));
        *entry = (entry.0 + 1, seq as i64 + 1);
    }
    let memory = Memory::open_read_only(ledger_dir)?;
    let start = Instant::now();
    for (namespace, (count, _)) in &newest {
        let after = evicortex::TurnId::from_raw(count - 1);
        let read = memory.evidence_after(namespace, Some(after))?;
        ensure!(
            read.len() == 1,
            "read {} turns of {namespace} after its second newest",
            read.len()
        );
    }
    let ours = start.elapsed().as_secs_f64() * 1000.0 / newest.len() as f64;
    let conn = anchor_connection(anchor)?;
    let mut stmt = conn.prepare("SELECT * FROM turns WHERE namespace = ?1 AND seq > ?2")?;
    let start = Instant::now();
    for (namespace, (_, last_seq)) in &newest {
        let rows: Vec<String> = stmt
            .query_map(rusqlite::params![namespace.as_str(), last_seq - 1], |r| r.get(6))?
            .collect::<Result<_, _>>()?;
        ensure!(rows.len() == 1, "the anchor read {} rows of {namespace}", rows.len());
    }
    let anchor_ms = start.elapsed().as_secs_f64() * 1000.0 / newest.len() as f64;
    Ok((ours, anchor_ms))
}

fn file_bytes(path: &std::path::Path) -> anyhow::Result<u64> {
    let mut total = 0;
    for suffix in ["", "-wal", "-shm"] {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        if let Ok(m) = fs_err::metadata(PathBuf::from(p)) {
            total += m.len();
        }
    }
    Ok(total)
}

fn dir_bytes(dir: &std::path::Path) -> anyhow::Result<u64> {
    file_bytes(&dir.join(evicortex::LEDGER_FILE))
}
