//! Running `pip download` for binary wheels only, without dependencies.

use std::{ffi::OsStr, path::Path, process::Command};

use evicortex_embed::FetchError;

/// Downloads the wheels of `requirements` (exact versions) into `dir` with one pip call.
pub fn download(python: &OsStr, requirements: &[&str], dir: &Path) -> Result<(), FetchError> {
    let output = Command::new(python)
        .args([
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--disable-pip-version-check",
            "--no-input",
        ])
        .arg("--dest")
        .arg(dir)
        .args(requirements)
        .output()
        .map_err(|source| FetchError::PipNotRunnable {
            program: python.to_string_lossy().into_owned(),
            source,
        })?;
    if output.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    Err(FetchError::PipFailed {
        requirement: requirements.join(" "),
        status: output.status.to_string(),
        stderr: lines[lines.len().saturating_sub(8)..].join("\n"),
    })
}
