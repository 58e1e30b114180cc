//! `evicortex erase` killed at random moments, its scrub of the files included. Each run appends
//! a session whose texts carry a marker found nowhere else (one text long enough for SQLite's
//! overflow pages), erases it with the CLI and SIGKILLs it. Then the store is opened read-write,
//! as a restarted server would, and while it is open the raw bytes of every file under the store
//! directory are searched: the session is either whole and unacknowledged, or erased with its
//! marker in no file; an acknowledged erasure always leaves no trace. `verify` passes after it.

use std::{
    io::Read,
    path::{Path, PathBuf},
    process::Stdio,
};

use evicortex::{IngestOptions, Memory, Namespace, Turn, parse_jsonl};
use rand::{Rng, rngs::StdRng};
use serde_json::json;

use super::{Row, Window, kill_after};
use crate::cli::{command, ok};

pub const NAMESPACE: &str = "erase";
/// Turns of the erased session.
const SECRET_TURNS: usize = 4;
/// Other turns in the store, so the scrub (`VACUUM` of the ledger) takes a while.
const FILLER_TURNS: usize = 2_000;

pub fn erase(mut rng: StdRng, wanted: usize) -> Row {
    let dir = tempfile::tempdir().unwrap();
    let store = filled_store(dir.path());
    let mut row = Row::new();
    let mut window = Window::new(150.0, 5.0, 10_000.0);
    let mut run = 0;
    while row.kills < wanted {
        row.check_progress(run, wanted);
        let (session, marker) = secret_session(&mut rng, run);
        Memory::open(&store).unwrap().append(&turns(&secret(&session, &marker))).unwrap();

        let mut child =
            command(&store, &["erase", "--namespace", NAMESPACE, "--session", &session])
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
        let (running, status) = kill_after(&mut child, window.sample(&mut rng));
        let mut stderr = String::new();
        child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
        assert!(running || status.success(), "run {run}: erase failed: {status}\n{stderr}");
        let acknowledged = !running;

        let place = check_erasure(&store, &session, &marker, acknowledged, run);
        count_erase_kill(&mut row, &mut window, place);
        run += 1;
    }
    row
}

/// Counts a kill where `check_erasure` placed it (`None`: the erasure completed first) and
/// widens the delay window while kills land before the commit.
pub(super) fn count_erase_kill(row: &mut Row, window: &mut Window, place: Option<&'static str>) {
    match place {
        Some(place) => {
            row.kill(place);
            window.scale(if place == BEFORE_COMMIT { 1.25 } else { 1.0 });
        }
        None => {
            row.completed += 1;
            window.scale(0.8);
        }
    }
}

/// A store whose namespace `erase` holds `FILLER_TURNS` other turns, so that the scrub (`VACUUM`
/// of the ledger) takes a while.
pub fn filled_store(dir: &Path) -> PathBuf {
    let store = dir.join("store");
    let filler: Vec<serde_json::Value> = (0..FILLER_TURNS)
        .map(|i| {
            json!({"namespace": NAMESPACE, "session": format!("filler{}", i / 50), "turn": i % 50,
                "role": "user", "text": format!("filler turn {i}: {}", "lorem ipsum ".repeat(80)),
                "time": "2024-01-01T00:00:00Z"})
        })
        .collect();
    Memory::open(&store).unwrap().append(&turns(&filler)).unwrap();
    store
}

/// The name of run `run`'s erased session and the marker its texts hold.
pub fn secret_session(rng: &mut StdRng, run: usize) -> (String, String) {
    (format!("secret{run}"), format!("ERASED-MARKER-{run:05}-{:016x}", rng.random::<u64>()))
}

/// Where a kill landed when the session is still whole.
pub const BEFORE_COMMIT: &str = "before the redaction's commit";

/// After a kill during the erasure of `session` (whose texts hold `marker`) from the namespace
/// `erase`: reopens the store as a restarted writer would (an interrupted erasure is finished by
/// then) and checks that the session is either whole and unacknowledged, or erased with its
/// marker in no file of the store; then `verify` passes. Returns where the kill landed, or
/// `None` for an acknowledged erasure.
pub fn check_erasure(
    store: &Path,
    session: &str,
    marker: &str,
    acknowledged: bool,
    run: usize,
) -> Option<&'static str> {
    let memory = Memory::open(store).unwrap();
    let live = memory
        .evidence(&Namespace::new(NAMESPACE).unwrap())
        .unwrap()
        .into_iter()
        .filter(|e| e.turn.session.as_str() == session)
        .count();
    let traces = files_holding(store, marker.as_bytes());
    let place = match (acknowledged, live) {
        (_, 0) => {
            assert!(
                traces.is_empty(),
                "run {run}: the erased marker {marker} is still in {traces:?} (erasure {})",
                if acknowledged { "acknowledged" } else { "killed after its commit" }
            );
            if acknowledged { None } else { Some("after the redaction's commit (scrub, purge)") }
        }
        (false, SECRET_TURNS) => Some(BEFORE_COMMIT),
        (true, n) => panic!("run {run}: erasure acknowledged but {n} turns of it are live"),
        (false, n) => panic!("run {run}: {n} of {SECRET_TURNS} turns erased: partial erasure"),
    };
    drop(memory);
    ok(store, &["verify"]);
    place
}

/// The erased session: short turns and one long enough to spill into overflow pages, each
/// holding the marker.
pub fn secret(session: &str, marker: &str) -> Vec<serde_json::Value> {
    (0..SECRET_TURNS)
        .map(|t| {
            let text = if t == SECRET_TURNS - 1 {
                format!("{marker} {} {marker} {} {marker}", "x".repeat(3_000), "y".repeat(3_000))
            } else {
                format!("turn {t} says {marker}")
            };
            json!({"namespace": NAMESPACE, "session": session, "turn": t, "role": "user",
                "text": text, "time": "2024-02-01T00:00:00Z"})
        })
        .collect()
}

pub fn turns(lines: &[serde_json::Value]) -> Vec<Turn> {
    let jsonl: String = lines.iter().map(|l| format!("{l}\n")).collect();
    parse_jsonl("generated", jsonl.as_bytes(), &IngestOptions::default()).unwrap()
}

/// The files under `dir` (at any depth) whose bytes contain `needle` (ASCII).
pub fn files_holding(dir: &Path, needle: &[u8]) -> Vec<PathBuf> {
    let needle = std::str::from_utf8(needle).expect("an ASCII marker");
    let mut found = Vec::new();
    let mut pending = vec![dir.to_owned()];
    while let Some(folder) = pending.pop() {
        for entry in fs_err::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else {
                // Lossy decoding keeps every ASCII byte in place, so an ASCII needle is found
                // exactly where it is (and std's searcher is fast in a debug build).
                let bytes = fs_err::read(&path).unwrap();
                if String::from_utf8_lossy(&bytes).contains(needle) {
                    found.push(path);
                }
            }
        }
    }
    found
}
