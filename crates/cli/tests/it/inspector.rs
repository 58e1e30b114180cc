//! The web inspector at `/ui`, driven as a person would use it: a real `evicortex serve` on
//! loopback over a temporary store, Debian's headless Chromium through chromedriver. The page's
//! citations and budget figures are checked against `evicortex compile --json` with the same
//! settings; a wrong key gets the 401 message; another namespace's data never appears; stored
//! markup renders as text. Screenshots go to the test's output directory.

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};

use serde_json::{Value, json};

use crate::cli::{command, create_key, ok, sample, spawn_serve};
use crate::webdriver::Browser;

const QUESTION: &str = "What is my dog's name, and when was his vet booster?";
const BUDGET: &str = "200";
const TOKENIZER: &str = "o200k_base";

/// `evicortex serve` on a free loopback port; killed on drop.
struct Server {
    child: Child,
    base: String,
}

impl Server {
    fn start(store: &Path) -> Server {
        let mut serve = command(store, &["serve", "--listen", "127.0.0.1:0"]);
        serve.stderr(Stdio::inherit());
        let (child, base) = spawn_serve(serve);
        Server { child, base }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.child.kill().ok();
        self.child.wait().ok();
    }
}

/// Where this test's screenshots go (kept after the run).
fn output_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("inspector");
    fs_err::create_dir_all(&dir).expect("output dir");
    dir
}

/// What the page shows about its state, for failure messages.
const DESCRIBE: &str = "return ['auth-message','compile-message','verify-result','erase-result']
    .map((id) => id + ': ' + document.getElementById(id).textContent).join(' | ');";

/// Types `key` into the page and connects.
async fn connect(browser: &Browser, key: &str) {
    browser.type_into("#key", key).await;
    browser.click("#connect").await;
    wait_until(
        browser,
        "const m = document.getElementById('auth-message').textContent;
                return m.length > 0 && m !== 'Connecting…';",
    )
    .await;
}

/// Waits up to 30 s for `script` to return true in the page.
async fn wait_until(browser: &Browser, script: &str) {
    browser.wait_for(script, 30, DESCRIBE).await;
}

/// Fills the compile form and waits for a result or an error.
async fn compile(browser: &Browser, question: &str) {
    browser.type_into("#question", question).await;
    browser.type_into("#budget", BUDGET).await;
    browser.click("#compile").await;
    browser
        .wait_for(
            "return !document.getElementById('result').hidden ||
                document.getElementById('compile-message').className.includes('error');",
            120,
            DESCRIBE,
        )
        .await;
    let message = browser.text("#compile-message").await;
    assert!(message.is_empty(), "compile failed in the page: {message}");
}

/// The texts of every element `css` selects.
async fn texts(browser: &Browser, css: &str) -> Vec<String> {
    let value = browser
        .script(
            "return Array.from(document.querySelectorAll(arguments[0])).map((e) => e.textContent);",
            json!([css]),
        )
        .await;
    serde_json::from_value(value).expect("a list of texts")
}

/// Checks `budget_parts` against the compiled text, recounted here with the reader tokenizer: the
/// preamble line, each session header line (with its blank line), and the items' own counts.
fn recount_budget_parts(context: &Value) {
    let reader = evicortex::reader_tokenizer(TOKENIZER).expect("the reader tokenizer");
    let count = |text: &str| reader.count(text).expect("count") as u64;
    let text = context["text"].as_str().expect("text");
    let parts = &context["budget_parts"];
    assert!(text.starts_with(evicortex::front_end::PREAMBLE), "{text}");
    assert_eq!(parts["preamble"].as_u64(), Some(count(evicortex::front_end::PREAMBLE)));
    let headers: u64 = text
        .lines()
        .filter(|line| line.starts_with("Session "))
        .map(|line| count(&format!("\n{line}\n")))
        .sum();
    assert_eq!(parts["headers"].as_u64(), Some(headers), "{text}");
    let items = context["items"].as_array().expect("items");
    let evidence: u64 = items.iter().map(|i| i["tokens"].as_u64().expect("tokens")).sum();
    assert_eq!(parts["evidence"].as_u64(), Some(evidence));
}

/// `value` with every number as an f64: the browser's JSON writes 10.0 as 10.
fn numbers_as_f64(value: &Value) -> Value {
    match value {
        Value::Number(n) => json!(n.as_f64().expect("a finite number")),
        Value::Array(items) => Value::Array(items.iter().map(numbers_as_f64).collect()),
        Value::Object(map) => {
            Value::Object(map.iter().map(|(k, v)| (k.clone(), numbers_as_f64(v))).collect())
        }
        other => other.clone(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspector_compile_matches_compile_json_and_keys_are_enforced() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store");
    let sample = sample();
    ok(&store, &["ingest", sample.to_str().expect("utf-8 path")]);
    let cli_json = ok(
        &store,
        &[
            "compile",
            "--namespace",
            "alice",
            "--query",
            QUESTION,
            "--budget",
            BUDGET,
            "--reader-tokenizer",
            TOKENIZER,
            "--json",
        ],
    );
    let expected: Value = serde_json::from_str(&cli_json).expect("compile --json");
    assert!(!expected["items"].as_array().expect("items").is_empty(), "{cli_json}");
    recount_budget_parts(&expected);
    let alice = create_key(&store, "alice");
    let server = Server::start(&store);
    let browser = Browser::start(1400, 1500).await;
    browser.open(&format!("{}/ui", server.base)).await;
    assert_eq!(browser.script("return document.title;", json!([])).await, "EviCortex inspector");

    // A wrong key: the API's 401, said on the page; nothing of the workspace shows.
    connect(&browser, "evk_not-a-key").await;
    let refused = browser.text("#auth-message").await;
    assert!(refused.contains("401") && refused.contains("invalid api key"), "{refused}");
    assert_eq!(
        browser.script("return document.getElementById('workspace').hidden;", json!([])).await,
        true
    );

    // Alice's key reads alice only: the namespace list and the timeline are hers.
    connect(&browser, &alice).await;
    wait_until(&browser, "return document.querySelectorAll('#timeline li strong').length > 0;")
        .await;
    assert_eq!(texts(&browser, "#namespace option").await, ["alice"]);
    assert_eq!(
        texts(&browser, "#timeline li strong").await,
        ["2024-03-04-planning", "2024-04-18-apartment", "2024-06-02-settled"]
    );
    let url = browser.script("return location.href;", json!([])).await;
    assert!(!url.as_str().unwrap_or_default().contains(&alice), "the key is in the URL: {url}");

    // A compile through the page shows what `evicortex compile --json` gives.
    compile(&browser, QUESTION).await;
    let citations: Vec<String> = expected["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|i| i["citation"].as_str().expect("citation").to_owned())
        .collect();
    assert_eq!(texts(&browser, "#citations td.citation").await, citations);
    for (part, value) in [
        ("preamble", &expected["budget_parts"]["preamble"]),
        ("headers", &expected["budget_parts"]["headers"]),
        ("evidence", &expected["budget_parts"]["evidence"]),
        ("used", &expected["tokens_used"]),
        ("budget", &expected["budget"]),
    ] {
        let shown = browser.text(&format!("#budget-figures dd[data-part={part}]")).await;
        assert!(value.is_u64(), "compile --json has no {part}: {cli_json}");
        assert_eq!(shown, value.to_string(), "budget figure {part}");
    }
    assert_eq!(browser.text("#context-text").await, expected["text"].as_str().expect("text"));
    let explained = texts(&browser, "#explain tbody tr").await.len();
    let candidates = citations.len() + expected["excluded"].as_array().expect("excluded").len();
    assert_eq!(explained, candidates, "one explain row per item and excluded candidate");
    let shown: Value =
        serde_json::from_str(&browser.text("#raw-json").await).expect("the page's json");
    for field in ["items", "excluded", "tokens_used", "budget_parts", "config", "text"] {
        assert_eq!(
            numbers_as_f64(&shown[field]),
            numbers_as_f64(&expected[field]),
            "{field} differs from compile --json"
        );
    }
    let screenshot = output_dir().join("inspector.png");
    browser.screenshot(&screenshot).await;
    println!("screenshot: {}", screenshot.display());

    // Verify needs an admin key: the page says so with the API's 403.
    browser.click("#verify").await;
    wait_until(
        &browser,
        "return document.getElementById('verify-result').className.includes('error');",
    )
    .await;
    let verified = browser.text("#verify-result").await;
    assert!(verified.contains("403"), "{verified}");

    // Erase asks first; cancelling erases nothing, confirming erases the session.
    browser.type_into("#erase-target", "2024-06-02-settled").await;
    browser.click("#erase").await;
    assert!(browser.text("#erase-question").await.contains("2024-06-02-settled"));
    browser.click("#erase-no").await;
    assert_eq!(browser.text("#erase-result").await, "Nothing erased.");
    browser.click("#erase").await;
    browser.click("#erase-yes").await;
    wait_until(&browser, "return document.querySelectorAll('#timeline li strong').length === 2;")
        .await;
    let erased = browser.text("#erase-result").await;
    assert!(erased.starts_with("Erased 6 turns"), "{erased}");

    // Nothing of bob's namespace ever reached the page.
    let page = browser.script("return document.documentElement.outerHTML;", json!([])).await;
    let page = page.as_str().expect("html");
    for bob in ["expense policy", "onboarding-2024-05", "bob"] {
        assert!(!page.to_lowercase().contains(bob), "the page shows {bob:?}");
    }
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stored_markup_renders_as_text() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store");
    let turns = dir.path().join("markup.jsonl");
    let hostile = [
        "<script>window.__injected = 'script';</script> my locker code is 4711",
        "<img src=x onerror=\"window.__injected = 'img'\"> the locker is in the basement",
    ];
    let lines: Vec<String> = hostile
        .iter()
        .enumerate()
        .map(|(i, text)| {
            json!({"namespace": "mallory", "session": "<b>s1</b>", "turn": i, "role": "user",
                "text": text, "time": "2024-05-02T10:00:00+01:00"})
            .to_string()
        })
        .collect();
    fs_err::write(&turns, lines.join("\n") + "\n").expect("write turns");
    ok(&store, &["ingest", turns.to_str().expect("utf-8 path")]);
    let key = create_key(&store, "mallory");
    let server = Server::start(&store);
    let browser = Browser::start(1400, 1000).await;
    browser.open(&format!("{}/ui", server.base)).await;
    connect(&browser, &key).await;
    wait_until(&browser, "return document.querySelectorAll('#timeline li strong').length > 0;")
        .await;
    compile(&browser, "Where is the locker and what is its code?").await;

    let cited = texts(&browser, "#citations td.turn-text").await;
    for text in hostile {
        assert!(cited.iter().any(|c| c == text), "{text:?} not shown verbatim in {cited:?}");
        assert!(browser.text("#context-text").await.contains(text));
    }
    assert_eq!(texts(&browser, "#timeline li strong").await, ["<b>s1</b>"]);
    let injected = browser
        .script(
            "return [window.__injected === undefined,
                document.querySelectorAll('main img, main script, main b').length];",
            json!([]),
        )
        .await;
    assert_eq!(injected, json!([true, 0]), "stored markup became elements or ran");
    let screenshot = output_dir().join("inspector-markup.png");
    browser.screenshot(&screenshot).await;
    println!("screenshot: {}", screenshot.display());
    browser.close().await;
}
