use crate::cli::{ok, sample};

#[test]
fn export_round_trips_through_ingest_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a");
    ok(&a, &["ingest", sample().to_str().unwrap()]);
    let exported = ok(&a, &["export"]);
    // The sample is written in export form, so the export reproduces the file exactly.
    assert_eq!(exported.as_bytes(), fs_err::read(sample()).unwrap());

    let file = dir.path().join("export.jsonl");
    ok(&a, &["export", "--output", file.to_str().unwrap()]);
    let b = dir.path().join("b");
    ok(&b, &["ingest", file.to_str().unwrap()]);
    assert_eq!(ok(&b, &["export"]), exported);
    let bob = ok(&b, &["export", "--namespace", "bob"]);
    assert_eq!(bob.lines().count(), 3);
    assert!(bob.lines().all(|l| l.starts_with(r#"{"namespace":"bob""#)));
}
