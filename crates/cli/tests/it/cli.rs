use std::{
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Child, Command, Output, Stdio},
};

pub const BIN: &str = env!("CARGO_BIN_EXE_evicortex");

/// The repository's sample conversation.
pub fn sample() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/sample-conversation.jsonl")
}

/// `evicortex --store <store> <args>`, with no EVICORTEX_HOME leaking in.
pub fn command(store: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.env_remove("EVICORTEX_HOME").arg("--store").arg(store).args(args);
    cmd
}

pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

pub fn run(store: &Path, args: &[&str]) -> Run {
    finish(command(store, args))
}

/// [`run`] in the working directory `cwd`.
pub fn run_in(cwd: &Path, store: &Path, args: &[&str]) -> Run {
    let mut cmd = command(store, args);
    cmd.current_dir(cwd);
    finish(cmd)
}

/// Runs `cmd` to its end.
pub fn finish(mut cmd: Command) -> Run {
    let Output { status, stdout, stderr } = cmd.output().unwrap();
    Run {
        code: status.code().expect("exited normally"),
        stdout: String::from_utf8(stdout).unwrap(),
        stderr: String::from_utf8(stderr).unwrap(),
    }
}

/// Runs and asserts success, returning stdout.
#[track_caller]
pub fn ok(store: &Path, args: &[&str]) -> String {
    let r = run(store, args);
    assert_eq!(r.code, 0, "evicortex {args:?} failed:\n{}\n{}", r.stdout, r.stderr);
    r.stdout
}

/// Slow tests run only with EVICORTEX_SLOW_TESTS=1 (CI sets it); say so when skipping.
pub fn slow_tests_enabled(test: &str) -> bool {
    let on = std::env::var("EVICORTEX_SLOW_TESTS").is_ok_and(|v| v == "1");
    if !on {
        eprintln!("{test}: SKIPPED BY DESIGN (slow); run with EVICORTEX_SLOW_TESTS=1, as CI does");
    }
    on
}

/// Starts `cmd`, an `evicortex ... serve --listen 127.0.0.1:0`, and returns the child and the base
/// URL from its first line, `listening on URL`. The rest of its standard output is drained, so
/// the server never blocks on a full pipe; its standard error is as `cmd` set it.
pub fn spawn_serve(mut cmd: Command) -> (Child, String) {
    let mut child = cmd.stdout(Stdio::piped()).spawn().expect("start evicortex serve");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    stdout.read_line(&mut line).expect("read the address line");
    let base = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("the first line is not the address: {line:?}"))
        .to_owned();
    std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()).ok());
    (child, base)
}

/// Sends SIGTERM, the signal a service manager stops a server with; the caller waits.
pub fn sigterm(child: &Child) {
    let sent = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    assert!(sent.expect("run kill").success(), "kill -TERM {}", child.id());
}

/// Creates a key with `evicortex keys create` and returns the last line of its output.
pub fn create_key(store: &Path, namespace: &str) -> String {
    let out = ok(store, &["keys", "create", "--namespace", namespace]);
    let key = out.lines().last().expect("a key on the last line").trim().to_owned();
    assert!(key.starts_with("evk_"), "{out}");
    key
}
