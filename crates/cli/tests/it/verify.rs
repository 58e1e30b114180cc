use crate::cli::{ok, run, sample};

fn ingested() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    ok(dir.path(), &["ingest", sample().to_str().unwrap()]);
    dir
}

fn sql(dir: &std::path::Path, statement: &str) {
    let conn = rusqlite::Connection::open(dir.join("ledger.sqlite")).unwrap();
    assert_eq!(conn.execute(statement, []).unwrap(), 1, "{statement}");
}

#[test]
fn verify_names_the_first_altered_record_with_exit_code_4() {
    let dir = ingested();
    sql(dir.path(), "UPDATE records SET text = 'I never said that.' WHERE seq = 5");
    sql(dir.path(), "UPDATE records SET role = 'system' WHERE seq = 9");
    let r = run(dir.path(), &["verify"]);
    assert_eq!(r.code, 4, "{}", r.stderr);
    assert!(r.stderr.contains("record #5 is corrupted: digest mismatch"), "{}", r.stderr);
    let r = run(dir.path(), &["verify", "--json"]);
    assert_eq!(r.code, 4, "{}", r.stderr);
    let failure: serde_json::Value = serde_json::from_str(&r.stdout).expect("failure JSON");
    assert_eq!(failure["ok"], false);
    assert_eq!(failure["first_bad_record"], 5);
    assert!(failure["error"].as_str().unwrap().contains("digest mismatch"), "{failure}");
    // Reading commands still work on a store whose head is intact; appends are allowed too,
    // since only the full verify reads every record.
    assert_eq!(run(dir.path(), &["stats"]).code, 0);
}

#[test]
fn a_store_failing_the_open_check_is_refused_but_inspectable() {
    let dir = ingested();
    sql(dir.path(), "DELETE FROM records WHERE seq = 23");
    for args in [&["stats"][..], &["export"], &["ingest", sample().to_str().unwrap()]] {
        let r = run(dir.path(), args);
        assert_eq!(r.code, 4, "{args:?}: {}", r.stderr);
        assert!(r.stderr.contains("failed its integrity check on open"), "{args:?}: {}", r.stderr);
    }
    let r = run(dir.path(), &["verify"]);
    assert_eq!(r.code, 4, "{}", r.stderr);
    assert!(r.stderr.contains("warning: the open-time check failed"), "{}", r.stderr);
    assert!(r.stderr.contains("ledger head is corrupted"), "{}", r.stderr);
}

#[test]
fn verify_reports_json() {
    let dir = ingested();
    let report: serde_json::Value =
        serde_json::from_str(&ok(dir.path(), &["verify", "--json"])).unwrap();
    assert_eq!(report["ok"], true);
    assert_eq!(report["records"], 23);
    assert_eq!(report["turns"], 23);
}

/// S3: compile and export check every record they serve against its digest: an altered record
/// is an integrity failure (exit code 4) naming it, never cited or exported.
#[test]
fn compile_and_export_refuse_an_altered_record_with_exit_code_4() {
    let dir = ingested();
    sql(dir.path(), "UPDATE records SET text = 'He is NOT chipped.' WHERE seq = 5");
    for args in [
        &["export"][..],
        &[
            "compile",
            "--namespace",
            "alice",
            "--query",
            "chipped",
            "--budget",
            "200",
            "--reader-tokenizer",
            "o200k_base",
            "--dense",
            "off",
        ],
    ] {
        let r = run(dir.path(), args);
        assert_eq!(r.code, 4, "{args:?}: {}", r.stderr);
        assert!(r.stderr.contains("record #5"), "{args:?}: {}", r.stderr);
        assert!(!r.stdout.contains("NOT chipped"), "{args:?} served the altered text");
    }
}

/// B5: a foreign SQLite file where the ledger should be is an integrity failure (4) for
/// `verify`, and no command changes it.
#[test]
fn a_foreign_database_is_refused_as_integrity_and_left_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.sqlite");
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch("CREATE TABLE x (a); INSERT INTO x VALUES (1);")
        .unwrap();
    let before = fs_err::read(&path).unwrap();
    let good = dir.path().join("good.jsonl");
    fs_err::write(&good, r#"{"namespace":"a","session":"s","turn":0,"role":"user","text":"hi","time":"2024-01-01T00:00:00Z"}"#).unwrap();
    for args in [&["verify"][..], &["ingest", "--no-embed", good.to_str().unwrap()], &["stats"]] {
        let r = run(dir.path(), args);
        assert_eq!(r.code, 4, "{args:?}: {}", r.stderr);
        assert!(r.stderr.contains("not an EviCortex ledger"), "{args:?}: {}", r.stderr);
        assert!(fs_err::read(&path).unwrap() == before, "{args:?} changed the file");
    }
}
