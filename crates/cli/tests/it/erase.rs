use crate::{
    cli::{ok, run, sample},
    store_bytes::{all_bytes, contains},
};

#[test]
fn erase_removes_text_from_every_file_and_verify_passes() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path();
    ok(store, &["ingest", sample().to_str().unwrap()]);
    let secret = "Sr. Tavares";
    assert!(all_bytes(store).iter().any(|(_, b)| contains(b, secret.as_bytes())));

    let out = ok(store, &["erase", "--namespace", "alice", "--session", "2024-04-18-apartment"]);
    assert!(
        out.starts_with("erased 6 turn(s) of namespace alice session \"2024-04-18-apartment\""),
        "{out}"
    );
    for (path, bytes) in all_bytes(store) {
        assert!(!contains(&bytes, secret.as_bytes()), "{secret} still in {}", path.display());
        assert!(!contains(&bytes, b"third floor, no lift"), "text still in {}", path.display());
    }
    assert!(
        ok(store, &["verify"])
            .starts_with("ok: 24 records verified (17 turns, 6 erased, 1 redactions)")
    );
    assert!(!ok(store, &["export"]).contains("2024-04-18-apartment"));

    // Records are numbered per namespace: bob's second turn is ledger position 22.
    let out = ok(store, &["erase", "--namespace", "bob", "--record", "2"]);
    assert!(out.starts_with("erased 1 turn(s) of namespace bob record #2"), "{out}");
    // alice's record 21 is the redaction of her session.
    let r = run(store, &["erase", "--namespace", "alice", "--record", "21"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("record #21 of namespace alice is not a turn"), "{}", r.stderr);
    let r = run(store, &["erase", "--namespace", "carol"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    let r = run(store, &["erase", "--namespace", "alice", "--session", "x", "--record", "1"]);
    assert_eq!(r.code, 2, "--session and --record conflict: {}", r.stderr);
    ok(store, &["verify"]);
}
