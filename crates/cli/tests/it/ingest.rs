use crate::cli::{ok, run, run_in, sample};

const GOOD: &str = r#"{"namespace":"a","session":"s","turn":0,"role":"user","text":"hello","time":"2024-01-01T10:00:00+02:00"}"#;

#[test]
fn ingests_the_sample_and_reingest_is_a_no_op() {
    let dir = tempfile::tempdir().unwrap();
    let sample = sample();
    let sample = sample.to_str().unwrap();
    // Only the first line is the ingest's own; later lines report derived work (embedding).
    let out = ok(dir.path(), &["ingest", sample]);
    assert_eq!(
        out.lines().next(),
        Some("ingested 23 turns from 1 file(s): 23 new, 0 already present; head position 23")
    );
    let out = ok(dir.path(), &["ingest", sample]);
    assert_eq!(
        out.lines().next(),
        Some("ingested 23 turns from 1 file(s): 0 new, 23 already present; head position 23")
    );
    let stats: serde_json::Value =
        serde_json::from_str(&ok(dir.path(), &["stats", "--json"])).unwrap();
    assert_eq!(
        (stats["turns"].as_u64(), stats["namespaces"].as_u64(), stats["sessions"].as_u64()),
        (Some(23), Some(2), Some(4))
    );
}

/// One bad-input case: name, file content, extra CLI arguments, expected exit code, expected message.
type BadInputCase<'a> = (&'a str, Vec<u8>, &'a [&'a str], i32, &'a str);

/// Each bad input: the file content, the expected exit code and the message (file, line, field).
#[test]
fn bad_input_is_refused_whole_naming_file_line_and_field() {
    let cases: &[BadInputCase] = &[
        (
            "malformed json",
            format!("{GOOD}\n{{\"namespace\":").into_bytes(),
            &[],
            2,
            "bad.jsonl:2: malformed JSON",
        ),
        (
            "missing field",
            format!("{GOOD}\n{}", GOOD.replace(r#""session":"s","#, "")).into_bytes(),
            &[],
            2,
            "bad.jsonl:2: field `session`: is missing",
        ),
        (
            "mistyped field",
            GOOD.replace(r#""turn":0"#, r#""turn":"zero""#).into_bytes(),
            &[],
            2,
            "bad.jsonl:1: field `turn`: must be an integer, found a string",
        ),
        (
            "unknown role",
            GOOD.replace("user", "moderator").into_bytes(),
            &[],
            2,
            "bad.jsonl:1: field `role`: unknown role \"moderator\"",
        ),
        (
            "time without offset",
            GOOD.replace("+02:00", "").into_bytes(),
            &[],
            2,
            "bad.jsonl:1: field `time`: \"2024-01-01T10:00:00\" is not an RFC 3339 time with an explicit offset",
        ),
        (
            "invalid utf-8",
            [GOOD.as_bytes(), b"\n", &GOOD.as_bytes()[..70], b"\xc3\x28", &GOOD.as_bytes()[70..]]
                .concat(),
            &[],
            2,
            "bad.jsonl:2: invalid UTF-8 at byte 70 of the line",
        ),
        (
            "text over the limit",
            GOOD.into(),
            &["--max-text-bytes", "4"],
            2,
            "bad.jsonl:1: field `text`: is 5 bytes, over the limit of 4 bytes",
        ),
        (
            "conflict with stored turn",
            GOOD.replace("hello", "hello, rewritten").into_bytes(),
            &[],
            2,
            "conflict: namespace a session \"s\" turn 0 is already stored as record #1 with a different text",
        ),
        (
            "namespace option disagrees",
            GOOD.into(),
            &["--namespace", "b"],
            2,
            "good.jsonl:1: field `namespace`: is \"a\" but the namespace option says \"b\"",
        ),
    ];
    for (what, content, extra, code, message) in cases {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("store");
        let seed = dir.path().join("seed.jsonl");
        fs_err::write(&seed, format!("{GOOD}\n")).unwrap();
        ok(&store, &["ingest", seed.to_str().unwrap()]);
        let before = ok(&store, &["export"]);
        let stats_before = ok(&store, &["stats", "--json"]);

        // A good file first: the bad one must take it down with it.
        let good = dir.path().join("good.jsonl");
        fs_err::write(&good, GOOD.replace(r#""turn":0"#, r#""turn":7"#).replace("hello", "hey"))
            .unwrap();
        let bad = dir.path().join("bad.jsonl");
        fs_err::write(&bad, content).unwrap();
        let mut args = vec!["ingest", "good.jsonl", "bad.jsonl"];
        args.extend_from_slice(extra);
        let r = run_in(dir.path(), &store, &args);
        assert_eq!(r.code, *code, "{what}: exit code; stderr: {}", r.stderr);
        assert!(r.stderr.contains(message), "{what}: expected {message:?} in {:?}", r.stderr);
        assert_eq!(ok(&store, &["export"]), before, "{what}: the store changed");
        assert_eq!(ok(&store, &["stats", "--json"]), stats_before, "{what}: stats changed");
    }
}

#[test]
fn io_failures_and_usage_errors_have_their_own_exit_codes() {
    let dir = tempfile::tempdir().unwrap();
    let r = run(dir.path(), &["ingest", "does-not-exist.jsonl"]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(r.stderr.contains("does-not-exist.jsonl"), "{}", r.stderr);
    let r = run(dir.path(), &["ingest"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    let r = run(dir.path(), &["ingest", "--namespace", "has space", "x.jsonl"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("--namespace: namespace contains ' '"), "{}", r.stderr);
    let r = run(&dir.path().join("missing-store"), &["stats"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("no ledger at"), "{}", r.stderr);
}

/// An error is printed with each cause once: a cause whose text the message already includes
/// (here the operating system's reason, in the lock's own message) is not repeated after it.
#[test]
fn an_error_says_each_cause_once() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    fs_err::write(&file, "not a directory").unwrap();
    let input = dir.path().join("turns.jsonl");
    fs_err::write(&input, format!("{GOOD}\n")).unwrap();
    let r = run(&file.join("store"), &["ingest", input.to_str().unwrap()]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    let error = r.stderr.lines().find(|l| l.starts_with("error: ")).expect("an error line");
    assert_eq!(error.matches("Not a directory").count(), 1, "{error}");
}

#[test]
fn store_defaults_to_evicortex_home() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.jsonl");
    fs_err::write(&input, GOOD).unwrap();
    let status = std::process::Command::new(crate::cli::BIN)
        .env("EVICORTEX_HOME", dir.path().join("home"))
        .args(["ingest", input.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(status.success());
    assert!(dir.path().join("home/ledger.sqlite").exists());
}

/// Every command's help has examples, and each example pastes line by line: no line wider than
/// 80 columns (so no terminal wraps one in the middle of a command), and a command that goes on
/// to the next line ends its line with a backslash.
#[test]
fn every_command_has_help_with_examples_that_paste() {
    let dir = tempfile::tempdir().unwrap();
    let commands: &[&[&str]] = &[
        &["ingest"],
        &["verify"],
        &["migrate"],
        &["erase"],
        &["stats"],
        &["export"],
        &["model"],
        &["embed"],
        &["compile"],
        &["serve"],
        &["mcp"],
        &["keys"],
        &["keys", "create"],
        &["keys", "list"],
        &["keys", "revoke"],
    ];
    for cmd in commands {
        let mut args = cmd.to_vec();
        args.push("--help");
        let out = ok(dir.path(), &args);
        let (_, examples) = out
            .split_once("Examples:\n")
            .unwrap_or_else(|| panic!("{cmd:?} --help lacks examples:\n{out}"));
        let mut continued = false;
        for line in examples.lines().take_while(|l| !l.trim().is_empty()) {
            assert!(line.len() <= 80, "{cmd:?}: example line over 80 columns: {line:?}");
            let starts = line.trim_start().starts_with("curl ") || line.contains("evicortex ");
            assert!(starts || continued, "{cmd:?}: {line:?} does not start a command");
            continued = line.ends_with('\\');
        }
        assert!(!continued, "{cmd:?}: the last example ends with a backslash");
    }
}

/// B1: with --commit-every, a conflict anywhere in the input (with an earlier line, or with a
/// stored turn) is found before the first commit; the error names the file and line.
#[test]
fn commit_every_refuses_a_late_conflict_before_the_first_commit() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let line = |turn: u32, text: &str| {
        GOOD.replace(r#""turn":0"#, &format!(r#""turn":{turn}"#)).replace("hello", text)
    };
    let seed = dir.path().join("seed.jsonl");
    fs_err::write(&seed, line(100, "stored before")).unwrap();
    ok(&store, &["ingest", "--no-embed", seed.to_str().unwrap()]);
    let before = ok(&store, &["export"]);

    let mut within: Vec<String> = (0..6).map(|i| line(i, &format!("turn {i}"))).collect();
    within.push(line(0, "turn 0, rewritten"));
    let mut against: Vec<String> = (0..6).map(|i| line(i, &format!("turn {i}"))).collect();
    against.push(line(100, "stored before, rewritten"));
    for (name, lines, message) in [
        (
            "within.jsonl",
            within,
            "within.jsonl:7 (first given at within.jsonl:1): conflict: namespace a session \"s\" \
             turn 0 is given earlier in the same batch (at position 0) with a different text",
        ),
        (
            "against.jsonl",
            against,
            "against.jsonl:7: conflict: namespace a session \"s\" turn 100 is already stored as \
             record #1 with a different text",
        ),
    ] {
        fs_err::write(dir.path().join(name), lines.join("\n")).unwrap();
        let r = run_in(dir.path(), &store, &["ingest", "--no-embed", "--commit-every", "2", name]);
        assert_eq!(r.code, 2, "{name}: {}", r.stderr);
        assert!(r.stderr.contains(message), "{name}: expected {message:?} in {:?}", r.stderr);
        assert!(r.stdout.is_empty(), "{name}: a batch was acknowledged: {}", r.stdout);
        assert_eq!(ok(&store, &["export"]), before, "{name}: the store changed");
    }
}

/// B2: a reader that goes away (`| head -0`) neither panics the CLI nor stops an ingest between
/// two batches: every turn is stored and the exit code is 0.
#[test]
fn a_closed_stdout_neither_panics_nor_abandons_an_ingest() {
    let dir = tempfile::tempdir().unwrap();
    let sample = sample();
    for args in [
        &["ingest", "--no-embed", "--commit-every", "5", sample.to_str().unwrap()][..],
        &["export"],
        &["stats"],
    ] {
        let mut child = crate::cli::command(dir.path(), args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take()); // the reader is gone before anything is written
        let output = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(0), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
    let stats: serde_json::Value =
        serde_json::from_str(&ok(dir.path(), &["stats", "--json"])).unwrap();
    assert_eq!(stats["turns"], 23);
}
