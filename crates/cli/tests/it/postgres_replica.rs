//! `evicortex --store postgres://<hot standby>`: verify, export and compile read what the
//! standby has replayed; ingest and erase exit with the refusal code naming the replica. Needs
//! the pair `scripts/postgres start-replicated` prints.

use std::path::Path;

use crate::{
    cli::{command, sample},
    compile::args,
    test_db::ReplicatedDb,
};

/// `evicortex --store URL args` with its derived files in `derived`: (exit code, stdout, stderr).
fn run_url(url: &str, derived: &Path, args: &[&str]) -> (i32, String, String) {
    let out = command(Path::new(url), args).env("EVICORTEX_DERIVED_DIR", derived).output().unwrap();
    let text = |bytes: Vec<u8>| String::from_utf8(bytes).unwrap();
    (out.status.code().expect("exited normally"), text(out.stdout), text(out.stderr))
}

fn ok_url(url: &str, derived: &Path, args: &[&str]) -> String {
    let (code, stdout, stderr) = run_url(url, derived, args);
    assert_eq!(code, 0, "evicortex --store {url} {args:?} failed:\n{stdout}\n{stderr}");
    stdout
}

#[test]
fn a_replica_store_reads_what_the_primary_wrote_and_refuses_ingest_and_erase() {
    let db = ReplicatedDb::new();
    let (primary, replica) = (db.primary.url.clone(), db.replica_url.clone());
    let dir = tempfile::tempdir().unwrap();
    let (on_primary, on_replica) = (dir.path().join("primary"), dir.path().join("replica"));
    ok_url(&primary, &on_primary, &["ingest", "--no-embed", sample().to_str().unwrap()]);
    db.wait_for_replay();

    let verify = |url: &str, derived: &Path| -> serde_json::Value {
        serde_json::from_str(&ok_url(url, derived, &["verify", "--json"])).unwrap()
    };
    assert_eq!(verify(&replica, &on_replica), verify(&primary, &on_primary));
    let export = ["export", "--namespace", "alice"];
    assert_eq!(ok_url(&replica, &on_replica, &export), ok_url(&primary, &on_primary, &export));
    let compile = args(&["--query", "What is my dog's name?", "--budget", "150", "--json"]);
    let compiled = |url: &str, derived: &Path| -> serde_json::Value {
        serde_json::from_str::<serde_json::Value>(&ok_url(url, derived, &compile)).unwrap()["items"]
            .clone()
    };
    let items = compiled(&primary, &on_primary);
    assert!(items.as_array().is_some_and(|i| !i.is_empty()), "{items}");
    assert_eq!(compiled(&replica, &on_replica), items);

    let server = db.replica_url.rsplit_once('@').unwrap().1.split('/').next().unwrap().to_owned();
    let new_turn = dir.path().join("new.jsonl");
    fs_err::write(
        &new_turn,
        r#"{"namespace":"alice","session":"later","turn":0,"role":"user","text":"Only the primary may store this.","time":"2024-05-01T10:00:00Z"}"#,
    )
    .unwrap();
    for args in [
        vec!["ingest", "--no-embed", new_turn.to_str().unwrap()],
        vec!["erase", "--namespace", "alice", "--record", "2"],
    ] {
        let (code, stdout, stderr) = run_url(&replica, &on_replica, &args);
        assert_eq!(code, 2, "{args:?}:\n{stdout}\n{stderr}");
        assert!(stderr.contains(&server) && stderr.contains("go to the primary"), "{stderr}");
    }
    db.wait_for_replay();
    assert_eq!(verify(&replica, &on_replica), verify(&primary, &on_primary));
}
