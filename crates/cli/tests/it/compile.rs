//! `evicortex compile`: a cited context within the budget, byte-identical JSON on rerun, the
//! as-of filter, and refusals with their exit codes.

use crate::cli::{ok, run, sample};

fn store_with_sample() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    ok(dir.path(), &["ingest", sample().to_str().unwrap()]);
    dir
}

const LEXICAL: &[&str] =
    &["compile", "--namespace", "alice", "--reader-tokenizer", "o200k_base", "--dense", "off"];

/// A lexical compile of namespace `alice` in o200k_base tokens, then `extra`.
pub(crate) fn args<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    LEXICAL.iter().copied().chain(extra.iter().copied()).collect()
}

#[test]
fn compiles_a_cited_context_within_budget_reproducibly() {
    let dir = store_with_sample();
    let a = args(&["--query", "What is my dog's name?", "--budget", "150", "--json"]);
    let first = ok(dir.path(), &a);
    let json: serde_json::Value = serde_json::from_str(&first).unwrap();
    assert!(json["tokens_used"].as_u64().unwrap() <= 150);
    assert_eq!(json["abstain"], false);
    let text = json["text"].as_str().unwrap();
    assert!(text.contains("Biscuit"), "{text}");
    let item = &json["items"][0];
    assert!(text.contains(&format!("[{}", item["citation"].as_str().unwrap())));
    assert_eq!(json["config"]["dense"]["mode"], "off");
    assert_eq!(ok(dir.path(), &a), first, "same store, query and config must give the same bytes");

    let plain = ok(
        dir.path(),
        &args(&["--query", "What is my dog's name?", "--budget", "150", "--explain"]),
    );
    assert!(plain.starts_with("Evidence from memory"), "{plain}");
    assert!(plain.contains("\n---\n") && plain.contains("fused"), "{plain}");
}

#[test]
fn as_of_excludes_later_turns() {
    let dir = store_with_sample();
    let json = ok(
        dir.path(),
        &args(&[
            "--query",
            "lease parking spot",
            "--budget",
            "400",
            "--as-of",
            "2024-03-05T00:00:00Z",
            "--json",
        ]),
    );
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    for item in json["items"].as_array().unwrap() {
        assert!(item["time"].as_str().unwrap() < "2024-03-05", "{item}");
    }
}

#[test]
fn refuses_unknown_tokenizer_bad_time_and_missing_store() {
    let dir = store_with_sample();
    let r = run(
        dir.path(),
        &[
            "compile",
            "--namespace",
            "alice",
            "--query",
            "q",
            "--budget",
            "10",
            "--reader-tokenizer",
            "gpt2",
            "--dense",
            "off",
        ],
    );
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("unknown reader tokenizer"), "{}", r.stderr);
    let r = run(dir.path(), &args(&["--query", "q", "--budget", "10", "--as-of", "yesterday"]));
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("--as-of"), "{}", r.stderr);
    let empty = tempfile::tempdir().unwrap();
    let r = run(&empty.path().join("nothing"), &args(&["--query", "q", "--budget", "10"]));
    assert_eq!(r.code, 2, "{}", r.stderr);
}

/// B7: an empty or blank question is refused as bad input (exit 2), as HTTP and MCP refuse it,
/// instead of returning evidence for nothing.
#[test]
fn an_empty_question_is_refused_like_over_http() {
    let dir = store_with_sample();
    for question in ["", "   "] {
        for dense in ["off", "on"] {
            let r = run(
                dir.path(),
                &[
                    "compile",
                    "--namespace",
                    "alice",
                    "--reader-tokenizer",
                    "o200k_base",
                    "--dense",
                    dense,
                    "--query",
                    question,
                    "--budget",
                    "200",
                ],
            );
            assert_eq!(r.code, 2, "question {question:?}, dense {dense}: {}", r.stderr);
            assert!(r.stderr.contains("question is empty"), "{}", r.stderr);
            assert!(r.stdout.is_empty(), "no evidence for an empty question: {}", r.stdout);
        }
    }
}

/// `--options` sets any compile field as the HTTP API's `options` do, over the flags; a bad one
/// exits 2 naming the field.
#[test]
fn options_set_any_compile_field_and_a_bad_one_names_it() {
    let dir = store_with_sample();
    let spread =
        r#"{"spread": {"mode": "per_session", "turns": 1, "questions": "all"}, "rrf_k": 30}"#;
    let out = ok(
        dir.path(),
        &args(&[
            "--query",
            "What is my dog's name?",
            "--budget",
            "150",
            "--json",
            "--options",
            spread,
        ]),
    );
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(json["config"]["spread"]["mode"], "per_session", "{}", json["config"]);
    assert_eq!(json["config"]["rrf_k"], 30.0);
    assert_eq!(json["config"]["dense"]["mode"], "off", "the flags still apply");
    for (options, field) in [
        (r#"{"spread": {"mode": "per_session", "turns": 0, "questions": "all"}}"#, "spread.turns"),
        (r#"{"rrf_kk": 1}"#, "rrf_kk"),
        ("[1]", "--options"),
    ] {
        let r = run(dir.path(), &args(&["--query", "q", "--budget", "150", "--options", options]));
        assert_eq!(r.code, 2, "{options}: {}", r.stderr);
        assert!(r.stderr.contains(field), "{options}: {}", r.stderr);
    }
}
