//! `evicortex answer`: the real smallest reader answers from a store's context, counted in its
//! own tokens; refusals with their exit codes.

use crate::cli::{ok, run, sample};

const READER: &[&str] = &[
    "answer",
    "--namespace",
    "alice",
    "--reader",
    "smollm2-135m-instruct-q4_1",
    "--dense",
    "off",
    "--max-new-tokens",
    "6",
];

fn args<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    READER.iter().copied().chain(extra.iter().copied()).collect()
}

#[test]
fn answers_with_the_context_and_the_readers_identity() {
    let dir = tempfile::tempdir().unwrap();
    ok(dir.path(), &["ingest", sample().to_str().unwrap()]);
    let out =
        ok(dir.path(), &args(&["--query", "What is my dog's name?", "--budget", "300", "--json"]));
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(json["compiler_abstained"], false, "{json}");
    assert!(json["context"]["text"].as_str().unwrap().contains("Biscuit"), "{json}");
    assert!(json["context"]["tokens_used"].as_u64().unwrap() <= 300, "{json}");
    let answer = &json["answer"];
    assert_eq!(answer["reader"]["name"], "smollm2-135m-instruct-q4_1", "{json}");
    assert!(
        answer["prompt_tokens"].as_u64().unwrap()
            > json["context"]["tokens_used"].as_u64().unwrap()
    );
    assert!(answer["generated_tokens"].as_u64().unwrap() <= 6, "{json}");
    let plain = ok(dir.path(), &args(&["--query", "What is my dog's name?", "--budget", "300"]));
    assert!(plain.contains("\n---\ncited: "), "{plain}");
    assert!(plain.contains("reader: smollm2-135m-instruct-q4_1; prompt "), "{plain}");

    // A budget over the reader's window: refused with the numbers, exit code 2.
    let refused = run(dir.path(), &args(&["--query", "dog", "--budget", "100000"]));
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(refused.stderr.contains("context window of"), "{}", refused.stderr);
    // An endpoint needs the tokenizer its model uses.
    let usage = run(
        dir.path(),
        &["answer", "--namespace", "alice", "--query", "q", "--budget", "100", "--endpoint"],
    );
    assert_eq!(usage.code, 2, "{}", usage.stderr);
    assert!(usage.stderr.contains("--reader-tokenizer"), "{}", usage.stderr);
}
