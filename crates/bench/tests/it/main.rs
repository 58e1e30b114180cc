//! The benchmark binary run as a user runs it, on small sizes: each table prints and the run
//! exits 0. Timings are not checked (they are what the benchmarks measure, not what they assert).

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
};

/// The repository root, where the benchmarks are run from (they find `bench/` and the data there).
fn repository_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_evicortex-bench"))
        .args(args)
        .current_dir(repository_root())
        .output()
        .expect("run evicortex-bench")
}

#[track_caller]
fn succeeds(args: &[&str]) -> String {
    let out = bench(args);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{args:?}\nstdout:\n{stdout}\nstderr:\n{stderr}");
    stdout
}

/// Every benchmark's help has examples no wider than 80 columns, and each of its own examples
/// parses: run with `--help` appended, every option it names is one the benchmark takes.
#[test]
fn every_benchmark_has_help_with_examples_that_parse() {
    for cmd in [&[][..], &["ledger"], &["embed"], &["ann"], &["writers"], &["serve-load"]] {
        let help = succeeds(&[cmd, &["--help"]].concat());
        let examples: Vec<&str> = help
            .split_once("Examples:\n")
            .unwrap_or_else(|| panic!("{cmd:?} --help lacks examples:\n{help}"))
            .1
            .lines()
            .take_while(|l| !l.trim().is_empty())
            .collect();
        assert!(!examples.is_empty(), "{cmd:?}");
        for example in examples {
            assert!(example.len() <= 80, "{cmd:?}: example over 80 columns: {example:?}");
            let Some(args) = example.trim().strip_prefix("evicortex-bench ") else { continue };
            let args: Vec<&str> = args.split_whitespace().chain(["--help"]).collect();
            assert!(bench(&args).status.success(), "{cmd:?}: {example:?} does not parse");
        }
    }
}

#[test]
fn the_ledger_benchmark_prints_its_table() {
    let work = tempfile::tempdir().unwrap();
    let work = work.path().to_str().unwrap();
    let args =
        ["ledger", "--turns", "300", "--single-turns", "20", "--large-turns", "0", "--work-dir"];
    let out = succeeds(&[&args[..], &[work]].concat());
    for row in ["append, batches of 1 ", "append, batches of 100 ", "verify", "read every turn"] {
        assert!(out.contains(row), "no {row:?} row:\n{out}");
    }
}

#[test]
fn the_writers_benchmark_prints_its_table() {
    let work = tempfile::tempdir().unwrap();
    let work = work.path().to_str().unwrap();
    let out = succeeds(&["writers", "--writers", "4", "--seconds", "0.3", "--work-dir", work]);
    assert!(out.contains("evicortex-bench writers: 4 threads"), "{out}");
}

/// The encoder benchmark on a small sample of real LongMemEval turns, without the PyTorch anchor
/// (its venv is the cross-encoder tests' and may be absent): needs the pinned encoder and the
/// evaluation data, as the other tests that use them.
#[test]
fn the_encoder_benchmark_prints_its_table() {
    let out = succeeds(&["embed", "--sample", "16", "--batch-sizes", "4", "--no-anchor"]);
    for order in ["|     4 | sorted   |", "|     4 | unsorted |"] {
        assert!(out.contains(order), "no {order:?} row:\n{out}");
    }
}

/// `serve-load` against a real `evicortex serve` (the binary the same build made, beside this
/// one) for a few seconds: appends, compiles and erasures over two namespaces, then the
/// read-back and verify pass and the tables print.
#[test]
fn the_serve_load_benchmark_drives_a_real_server_and_reads_every_append_back() {
    let closed_loop = ["--mix", "append=4,compile=1,erase=1", "--batch", "2"];
    let (stdout, summary) = serve_load(&closed_loop);
    for row in ["| append |", "| compile |", "| erase |", "read-back: all ", "verify: ok, "] {
        assert!(stdout.contains(row), "no {row:?}:\n{stdout}");
    }
    let appended = summary["ops"]["append"]["turns"].as_u64().unwrap();
    let erased = summary["erased_absent"].as_u64().unwrap();
    assert!(appended > 0 && erased > 0, "{summary}");
    // Every acknowledged turn, the 2 x 20 seeds included, less the erased ones, was read back.
    assert_eq!(summary["stored"].as_u64().unwrap(), appended + 40 - erased, "{summary}");
    assert_eq!(summary["errors"], 0);
}

/// The same with every operation open-loop at its own rate: each is sent about as often as
/// asked (a request is due every 1/rate seconds for 3 s).
#[test]
fn open_loop_rates_send_each_operation_on_its_schedule() {
    let open_loop = [
        ["--append-rate", "40"],
        ["--append-connections", "2"],
        ["--erase-rate", "10"],
        ["--erase-connections", "2"],
        ["--compile-rate", "20"],
    ];
    let (stdout, summary) = serve_load(open_loop.as_flattened());
    assert!(stdout.contains("compiles open-loop at 20 a second"), "{stdout}");
    for (op, rate) in [("append", 40), ("erase", 10), ("compile", 20)] {
        let sent = summary["ops"][op]["requests"].as_u64().unwrap();
        assert!((rate * 3 - 2..=rate * 3).contains(&sent), "{op}: {sent} requests\n{summary}");
    }
    assert_eq!(summary["errors"], 0);
}

/// Runs `serve-load` with `args` for 3 s over 8 connections and 2 namespaces (20 seed turns
/// each) against a fresh `evicortex serve --lexical-only`: its standard output and summary.
fn serve_load(args: &[&str]) -> (String, serde_json::Value) {
    let evicortex = Path::new(env!("CARGO_BIN_EXE_evicortex-bench")).with_file_name("evicortex");
    assert!(
        evicortex.exists(),
        "{} is missing: build it with `cargo build -p evicortex-cli` (scripts/test builds the \
         workspace)",
        evicortex.display()
    );
    let store = tempfile::tempdir().unwrap();
    let key = Command::new(&evicortex)
        .arg("--store")
        .arg(store.path())
        .args(["keys", "create", "--admin"])
        .output()
        .expect("run evicortex keys create");
    assert!(key.status.success(), "{}", String::from_utf8_lossy(&key.stderr));
    let key = String::from_utf8(key.stdout).unwrap().lines().last().unwrap().trim().to_owned();
    let mut server = Command::new(&evicortex)
        .arg("--store")
        .arg(store.path())
        .args(["serve", "--listen", "127.0.0.1:0", "--lexical-only"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("start evicortex serve");
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(server.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let base = line.trim().strip_prefix("listening on ").unwrap_or_else(|| panic!("{line:?}"));
    let pid = server.id().to_string();
    let summary = store.path().join("summary.json");
    let mut all = vec!["serve-load", "--server", base, "--key", &key, "--connections", "8"];
    all.extend(["--namespaces", "2", "--seed-turns", "20", "--seconds", "3", "--interval", "1"]);
    all.extend(["--pid", &pid, "--summary", summary.to_str().unwrap()]);
    all.extend(args);
    let out = bench(&all);
    server.kill().unwrap();
    server.wait().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let summary = serde_json::from_slice(&fs_err::read(&summary).unwrap()).unwrap();
    (stdout, summary)
}
