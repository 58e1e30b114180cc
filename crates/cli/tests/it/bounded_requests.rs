//! `evicortex serve` flooded with answers, chat completions and compiles at once: each request
//! gets its answer or a clear refusal (429 with `Retry-After`) within its time limit, one answer
//! reads at a time, the accepted answers are the running one plus the queue, and the server's
//! memory stays within the documented bound. The MCP tool `answer` is bounded alike.
//!
//! The reader is a real HTTP chat-completions endpoint served by this test that takes
//! [`READ_SECS`] per reply, so the queue is full for the whole burst whatever the machine's
//! speed (the real local readers take from a fraction of a second to tens of seconds).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::cli::{command, create_key, ok, spawn_serve};

/// Seconds the test reader takes per reply.
const READ_SECS: u64 = 4;
const QUEUED_ANSWERS: usize = 2;
const QUEUED_COMPILES: usize = 4;
const BODY_LIMIT: usize = 64 * 1024;
/// The documented allowance for one running compile's working memory (docs/reliability.md, S1).
const COMPILE_WORKING_MIB: u64 = 16;

/// What a flood may add to the server's resident memory at rest, as docs/reliability.md (S1)
/// states it: every running or waiting request's body, and each running compile's working
/// memory.
fn flood_bound_kib(cores: u64) -> u64 {
    let places = 1 + QUEUED_ANSWERS as u64 + cores + QUEUED_COMPILES as u64;
    places * (BODY_LIMIT as u64 / 1024) + cores * COMPILE_WORKING_MIB * 1024
}

/// A chat-completions endpoint that answers every request after [`READ_SECS`], counting how many
/// it serves at once.
struct SlowReader {
    base_url: String,
    /// Requests received (counted as they arrive, so that a count read after the replies is
    /// exact).
    received: Arc<AtomicUsize>,
    most_at_once: Arc<AtomicUsize>,
}

impl SlowReader {
    fn start() -> SlowReader {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the test reader");
        let base_url = format!("http://{}/v1", listener.local_addr().expect("addr"));
        let received = Arc::new(AtomicUsize::new(0));
        let most_at_once = Arc::new(AtomicUsize::new(0));
        let now = Arc::new(AtomicUsize::new(0));
        let (r, m) = (received.clone(), most_at_once.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (received, most_at_once, now) = (r.clone(), m.clone(), now.clone());
                std::thread::spawn(move || {
                    received.fetch_add(1, Ordering::SeqCst);
                    let at_once = now.fetch_add(1, Ordering::SeqCst) + 1;
                    most_at_once.fetch_max(at_once, Ordering::SeqCst);
                    // Done reading before the reply leaves, so that the next read, which the
                    // reply lets start, cannot overlap this one in the count.
                    reply_slowly(stream, || {
                        now.fetch_sub(1, Ordering::SeqCst);
                    });
                });
            }
        });
        SlowReader { base_url, received, most_at_once }
    }
}

/// Reads one HTTP request and answers it after [`READ_SECS`], calling `done` just before the
/// reply is sent.
fn reply_slowly(stream: TcpStream, done: impl FnOnce()) {
    let mut reader = BufReader::new(stream.try_clone().expect("clone the stream"));
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).expect("request head") == 0 || line == "\r\n" {
            break;
        }
        let lower = line.to_ascii_lowercase();
        if let Some(value) = lower.strip_prefix("content-length:") {
            length = value.trim().parse().expect("content length");
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).expect("request body");
    let request: serde_json::Value = serde_json::from_slice(&body).expect("a JSON request");
    assert!(request["messages"].as_array().is_some_and(|m| !m.is_empty()), "{request}");
    std::thread::sleep(Duration::from_secs(READ_SECS));
    done();
    let reply = json!({
        "id": "chatcmpl-test", "object": "chat.completion", "created": 0, "model": "slow",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Lisbon [#1]"},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 3, "total_tokens": 103},
    })
    .to_string();
    let mut stream = stream;
    let head = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
         connection: close\r\n\r\n",
        reply.len()
    );
    stream.write_all(head.as_bytes()).and_then(|()| stream.write_all(reply.as_bytes())).ok();
}

/// A store in `dir` whose namespace `alice` holds enough turns that compiles take a while, so
/// that a burst of them overflows the queue.
fn store_with_turns(dir: &std::path::Path) -> std::path::PathBuf {
    let store = dir.join("store");
    let turns: String = (0..2000)
        .map(|i| {
            json!({"namespace": "alice", "session": format!("s{}", i / 20), "turn": i % 20,
                   "role": "user", "text": format!("note {i}: the move to Lisbon, box {i}"),
                   "time": "2024-03-04T19:02:11Z"})
            .to_string()
                + "\n"
        })
        .collect();
    let input = dir.join("turns.jsonl");
    fs_err::write(&input, turns).expect("write turns");
    ok(&store, &["ingest", input.to_str().expect("utf-8"), "--no-embed"]);
    store
}

/// A field of `/proc/PID/status` in KiB (`VmRSS`, `VmHWM`).
fn proc_status_kib(pid: u32, field: &str) -> u64 {
    let status = fs_err::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    let line = status.lines().find(|l| l.starts_with(field)).expect("the field");
    line.split_whitespace().nth(1).expect("a number").parse().expect("kib")
}

/// What one request got.
#[derive(Debug)]
struct Outcome {
    status: u16,
    retry_after: Option<u64>,
    error: Option<String>,
    took: Duration,
}

async fn send(
    client: &reqwest::Client,
    url: String,
    key: &str,
    body: serde_json::Value,
) -> Outcome {
    let started = Instant::now();
    let response = client.post(url).bearer_auth(key).json(&body).send().await.expect("a response");
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().expect("ascii").parse::<u64>().expect("whole seconds"));
    let body: serde_json::Value = response.json().await.expect("a JSON body");
    // The server's error body, or the OpenAI error of the chat route.
    let error = body["error"].as_str().or(body["error"]["message"].as_str()).map(str::to_owned);
    Outcome { status, retry_after, error, took: started.elapsed() }
}

/// `evicortex serve` over `store` with the test's queue limits, answering with `reader`.
fn start_server(
    store: &std::path::Path,
    reader: &SlowReader,
    max_wait_secs: u64,
) -> (std::process::Child, String) {
    let mut serve = command(
        store,
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--lexical-only",
            "--reader-endpoint",
            "--reader-tokenizer",
            "o200k_base",
            "--max-queued-answers",
            &QUEUED_ANSWERS.to_string(),
            "--max-queued-compiles",
            &QUEUED_COMPILES.to_string(),
            "--max-queue-wait-secs",
            &max_wait_secs.to_string(),
            "--body-limit-bytes",
            &BODY_LIMIT.to_string(),
        ],
    );
    serve
        .env("EVICORTEX_READER_BASE_URL", &reader.base_url)
        .env("EVICORTEX_READER_MODEL", "slow")
        .env_remove("EVICORTEX_READER_API_KEY")
        .env_remove("EVICORTEX_READER_CONTEXT_WINDOW")
        .stderr(Stdio::null());
    spawn_serve(serve)
}

/// Sends `count` copies of each `(url, key, body)` at once; the outcomes in the same order.
async fn burst(
    client: &reqwest::Client,
    requests: &[(String, String, serde_json::Value, usize)],
) -> Vec<Vec<Outcome>> {
    let tasks: Vec<Vec<_>> = requests
        .iter()
        .map(|(url, key, body, count)| {
            (0..*count)
                .map(|_| {
                    let (client, url, key, body) =
                        (client.clone(), url.clone(), key.clone(), body.clone());
                    tokio::spawn(async move { send(&client, url, &key, body).await })
                })
                .collect()
        })
        .collect();
    let mut outcomes = Vec::new();
    for kind in tasks {
        let mut of_kind = Vec::new();
        for task in kind {
            of_kind.push(task.await.expect("request task"));
        }
        outcomes.push(of_kind);
    }
    outcomes
}

#[test]
fn a_flood_of_answers_and_compiles_gets_answers_or_429s_within_bounded_memory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store_with_turns(dir.path());
    let key = create_key(&store, "alice");
    let admin = ok(&store, &["keys", "create", "--admin"]).lines().last().unwrap().to_owned();
    let reader = SlowReader::start();
    let (mut server, base) = start_server(&store, &reader, 60);
    let pid = server.id();

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .expect("runtime");
    let client = reqwest::Client::builder().timeout(Duration::from_secs(120)).build().unwrap();
    let answer_url = format!("{base}/v1/namespaces/alice/answer");
    let compile_url = format!("{base}/v1/namespaces/alice/compile");
    let ask = json!({"query": "Where is the move to?", "budget": 300, "max_new_tokens": 8});
    let compile = json!({"query": "the move to Lisbon box", "budget": 4000,
                         "reader_tokenizer": "o200k_base"});

    // Warm up (indexes built, tokenizers loaded), then measure the resident memory at rest.
    let model = runtime.block_on(async {
        assert_eq!(send(&client, compile_url.clone(), &key, compile.clone()).await.status, 200);
        let warm = send(&client, answer_url.clone(), &key, ask.clone()).await;
        assert_eq!(warm.status, 200, "{warm:?}");
        let models = client.get(format!("{base}/v1/models")).bearer_auth(&admin).send().await;
        let models: serde_json::Value = models.unwrap().json().await.unwrap();
        models["data"][0]["id"].as_str().expect("the served model").to_owned()
    });
    let chat = json!({"model": model, "max_tokens": 4,
                      "messages": [{"role": "user", "content": "Where is the move to?"}]});
    let rest_kib = proc_status_kib(pid, "VmRSS");
    // Resets the peak (VmHWM) to the current resident size, so that the peak read after the
    // flood is the flood's.
    fs_err::write(format!("/proc/{pid}/clear_refs"), "5").expect("reset the peak resident size");

    let (answers, chats, compiles) = (12, 4, 100);
    let outcomes = runtime.block_on(burst(
        &client,
        &[
            (answer_url, key.clone(), ask, answers),
            (format!("{base}/v1/chat/completions"), admin, chat, chats),
            (compile_url.clone(), key.clone(), compile.clone(), compiles),
        ],
    ));
    let peak_kib = proc_status_kib(pid, "VmHWM");
    let after_kib = proc_status_kib(pid, "VmRSS");

    // Answers and chat completions share the one reader's queue.
    let mut accepted_reads = 0;
    for outcome in outcomes[0].iter().chain(&outcomes[1]) {
        check_refusal_or_success(outcome, "--max-queued-answers");
        if outcome.status == 200 {
            accepted_reads += 1;
            // It waited for at most the queue ahead of it, read one at a time.
            let most = Duration::from_secs(READ_SECS * (QUEUED_ANSWERS as u64 + 1) + 30);
            assert!(outcome.took < most, "{outcome:?}");
        }
    }
    let mut accepted_compiles = 0;
    for outcome in &outcomes[2] {
        check_refusal_or_success(outcome, "--max-queued-compiles");
        accepted_compiles += usize::from(outcome.status == 200);
    }
    eprintln!(
        "flood: answers and chat completions {accepted_reads}/{} accepted, compiles \
         {accepted_compiles}/{compiles} accepted; VmRSS at rest {rest_kib} KiB, peak (VmHWM) \
         {peak_kib} KiB, after {after_kib} KiB",
        answers + chats
    );
    // One answer reads at a time; the burst fits the running one and the queue, the rest 429.
    assert_eq!(reader.most_at_once.load(Ordering::SeqCst), 1);
    assert_eq!(accepted_reads, 1 + QUEUED_ANSWERS);
    assert_eq!(reader.received.load(Ordering::SeqCst), 1 + accepted_reads, "warm-up + accepted");
    assert!(accepted_compiles >= 1 && accepted_compiles < compiles, "{accepted_compiles}");
    let cores = std::thread::available_parallelism().map_or(1, usize::from) as u64;
    assert!(
        peak_kib.saturating_sub(rest_kib) < flood_bound_kib(cores),
        "the flood raised the peak resident memory from {rest_kib} KiB to {peak_kib} KiB, more \
         than the documented {} KiB",
        flood_bound_kib(cores)
    );
    // The server is still serving.
    runtime.block_on(async {
        assert_eq!(send(&client, compile_url, &key, compile).await.status, 200);
    });
    server.kill().ok();
    server.wait().ok();
}

/// A queued answer that has not started within `--max-queue-wait-secs` is a 503 with
/// `Retry-After`, and the reader never reads it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_queued_answer_past_the_time_limit_gets_503_with_retry_after() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store_with_turns(dir.path());
    let key = create_key(&store, "alice");
    let reader = SlowReader::start();
    let (mut server, base) = start_server(&store, &reader, 1);
    let client = reqwest::Client::builder().timeout(Duration::from_secs(60)).build().unwrap();
    let url = format!("{base}/v1/namespaces/alice/answer");
    let ask = json!({"query": "Where is the move to?", "budget": 300, "max_new_tokens": 8});
    let first = send(&client, url.clone(), &key, ask.clone());
    let second = async {
        // Sent once the first holds the reader.
        tokio::time::sleep(Duration::from_millis(500)).await;
        send(&client, url.clone(), &key, ask.clone()).await
    };
    let (first, second) = tokio::join!(first, second);
    assert_eq!(first.status, 200, "{first:?}");
    assert_eq!(second.status, 503, "{second:?}");
    assert!(second.retry_after.is_some_and(|s| s >= 1), "{second:?}");
    let error = second.error.as_deref().expect("an error message");
    assert!(error.contains("--max-queue-wait-secs") && error.contains("retry in"), "{error}");
    assert!(second.took >= Duration::from_secs(1), "{second:?}");
    assert!(second.took < Duration::from_secs(READ_SECS), "{second:?}");
    assert_eq!(reader.received.load(Ordering::SeqCst), 1, "the timed-out answer was never read");
    server.kill().ok();
    server.wait().ok();
}

/// A 200, or a 429 refused at once with `Retry-After` and an error naming the flag to raise.
#[track_caller]
fn check_refusal_or_success(outcome: &Outcome, flag: &str) {
    match outcome.status {
        200 => {}
        429 => {
            let retry = outcome.retry_after.expect("a 429 carries Retry-After");
            assert!(retry >= 1, "{outcome:?}");
            let error = outcome.error.as_deref().expect("an error message");
            assert!(error.contains(flag) && error.contains("retry in"), "{outcome:?}");
            // Refused without waiting for a turn of the reader.
            assert!(outcome.took < Duration::from_secs(READ_SECS), "{outcome:?}");
        }
        _ => panic!("neither an answer nor a refusal: {outcome:?}"),
    }
}

/// The MCP tool `answer` takes its place in the same bounded queue: with no room to wait, of
/// three calls at once one is answered and the others are tool errors saying when to retry.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mcp_answers_beyond_the_queue_are_tool_errors_saying_when_to_retry() {
    use rmcp::ServiceExt;
    use rmcp::model::CallToolRequestParams;
    use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};

    let dir = tempfile::tempdir().expect("tempdir");
    let store = store_with_turns(dir.path());
    let reader = SlowReader::start();
    let command = tokio::process::Command::new(crate::cli::BIN).configure(|cmd| {
        cmd.arg("--store").arg(&store).args([
            "mcp",
            "--namespace",
            "alice",
            "--lexical-only",
            "--reader-endpoint",
            "--reader-tokenizer",
            "o200k_base",
            "--max-queued-answers",
            "0",
        ]);
        cmd.env("EVICORTEX_READER_BASE_URL", &reader.base_url)
            .env("EVICORTEX_READER_MODEL", "slow")
            .env_remove("EVICORTEX_READER_API_KEY")
            .env_remove("EVICORTEX_READER_CONTEXT_WINDOW")
            .env_remove("EVICORTEX_HOME")
            .stderr(Stdio::null());
    });
    let client =
        ().serve(TokioChildProcess::new(command).expect("spawn")).await.expect("mcp handshake");
    let ask = json!({"query": "Where is the move to?", "budget": 300, "max_new_tokens": 8});
    let call = || {
        let params = CallToolRequestParams::new("answer")
            .with_arguments(ask.as_object().expect("object").clone());
        client.call_tool(params)
    };
    let (a, b, c) = tokio::join!(call(), call(), call());
    let mut answered = 0;
    for result in [a, b, c] {
        let result = result.expect("a tool result");
        let body = result.structured_content.clone().expect("structured content");
        if result.is_error == Some(true) {
            let error = body["error"].as_str().expect("an error message");
            assert!(error.contains("--max-queued-answers 0"), "{body}");
            assert!(error.contains("retry in"), "{body}");
        } else {
            assert!(body["answer"].is_object(), "{body}");
            answered += 1;
        }
    }
    assert_eq!(answered, 1);
    assert_eq!(reader.most_at_once.load(Ordering::SeqCst), 1);
    client.cancel().await.expect("stop the mcp server");
}
