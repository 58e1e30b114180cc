//! Builds the `faultfs` LD_PRELOAD shim (`../faultfs.c`) with the system C compiler. Shared by the
//! fault tests of the ledger, the facade and the CLI: each test binary includes this file with
//! `#[path]`, and the C source travels inside it, so no crate depends on another's folder layout.

use std::path::{Path, PathBuf};

/// Compiles the shim into `dir`; returns the library's path.
pub fn build_faultfs(dir: &Path) -> PathBuf {
    let source = dir.join("faultfs.c");
    fs_err::write(&source, include_str!("../faultfs.c")).expect("write faultfs.c");
    let out = dir.join("libfaultfs.so");
    let status = std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-O1", "-o"])
        .arg(&out)
        .arg(&source)
        .arg("-ldl")
        .status()
        .expect("the fault injection tests need a C compiler (`cc`) to build faultfs.c");
    assert!(status.success(), "compiling {}", source.display());
    out
}
