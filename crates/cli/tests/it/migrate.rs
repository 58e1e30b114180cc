//! `evicortex migrate` on the committed format-version-1 fixture.

use crate::cli::{ok, run};

const FIXTURE: &[u8] = include_bytes!("../../../ledger/tests/fixtures/ledger-v1.sqlite");

#[test]
fn a_version_1_store_is_refused_with_what_to_do_then_migrated() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    fs_err::create_dir(&store).unwrap();
    fs_err::write(store.join("ledger.sqlite"), FIXTURE).unwrap();
    for args in [&["stats"][..], &["verify"], &["export"]] {
        let r = run(&store, args);
        assert_eq!(r.code, 4, "{args:?}: {}", r.stderr);
        assert!(r.stderr.contains("evicortex migrate --store"), "{args:?}: {}", r.stderr);
    }
    assert!(fs_err::read(store.join("ledger.sqlite")).unwrap() == FIXTURE, "the file changed");

    let out = ok(&store, &["migrate"]);
    assert!(
        out.starts_with("migrated ledger format version 1 to 3: 8 records (3 erased turns)"),
        "{out}"
    );
    let report: serde_json::Value =
        serde_json::from_str(&ok(&store, &["verify", "--json"])).unwrap();
    assert_eq!((report["records"].as_u64(), report["turns"].as_u64()), (Some(8), Some(3)));
    let exported = ok(&store, &["export", "--namespace", "alice"]);
    assert!(exported.contains("I adopted a dog called Biscuit."), "{exported}");
    assert_eq!(ok(&store, &["migrate"]), "already at ledger format version 3; nothing to do\n");
}

#[test]
fn a_missing_store_is_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let r = run(&dir.path().join("none"), &["migrate"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
}
