//! `evicortex keys`: the scope flags and the namespace are checked before any key exists.

use crate::cli::{ok, run};

/// B3: `--namespace NS --admin` used to make an admin key silently; an invalid namespace was
/// not even checked when `--admin` was given.
#[test]
fn a_namespace_key_request_never_yields_an_admin_key() {
    let dir = tempfile::tempdir().unwrap();
    for args in [
        &["keys", "create", "--namespace", "alpha", "--admin"][..],
        &["keys", "create", "--namespace", "../x", "--admin"],
        &["keys", "create", "--namespace", "../x"],
        &["keys", "create"],
    ] {
        let r = run(dir.path(), args);
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        assert!(r.stdout.is_empty(), "{args:?} printed a key: {}", r.stdout);
    }
    let r = run(dir.path(), &["keys", "create", "--namespace", "alpha", "--admin"]);
    assert!(r.stderr.contains("cannot be used with"), "{}", r.stderr);
    let r = run(dir.path(), &["keys", "create", "--namespace", "../x"]);
    assert!(
        r.stderr.contains("invalid value '../x' for '--namespace <NAMESPACE>'"),
        "{}",
        r.stderr
    );
    assert!(!dir.path().join("keys.sqlite").exists(), "a refused request opened the key store");

    ok(dir.path(), &["keys", "create", "--namespace", "alpha"]);
    let listed = ok(dir.path(), &["keys", "list"]);
    assert!(
        listed.lines().skip(1).all(|l| l.contains("namespace") && l.ends_with("alpha")),
        "{listed}"
    );
}
