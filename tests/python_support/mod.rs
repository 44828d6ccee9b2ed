//! The Python reference (flechtwerk 0.17.0 and flechtctl in a venv) for the tests that run it
//! beside this library: `tests/migration_python/` and `tests/secrets_python.rs` include this file.

use std::path::PathBuf;
use std::process::{Command, Stdio};

/// The repository's root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The Python of the reference venv: `PYTHON_REF`, else what `scripts/python-ref` installs.
pub fn python_ref() -> PathBuf {
    if let Some(python) = std::env::var_os("PYTHON_REF").filter(|p| !p.is_empty()) {
        return PathBuf::from(python);
    }
    let out = Command::new(repo().join("scripts/python-ref"))
        .stderr(Stdio::inherit())
        .output()
        .expect("run scripts/python-ref");
    assert!(out.status.success(), "scripts/python-ref failed: install the Python reference first");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().find_map(|l| l.strip_prefix("PYTHON_REF=")).expect("PYTHON_REF= in its output");
    PathBuf::from(line)
}
