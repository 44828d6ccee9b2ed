//! The key-rotation walkthroughs of docs/concepts/secrets.md, run as they stand: each `sh` block
//! after a `<!-- walkthrough:NAME -->` marker runs under `sh -eu` in a scratch directory, and
//! what it prints must be the `text` block that follows it. Each runs four times: with this
//! crate's `flechtctl`, with Python's flechtctl 0.17.0, and with the two taking turns command by
//! command (either one first), so every keyring file and token of the walkthrough is also read
//! and edited by the implementation that did not write it.
//!
//! Needs the Python reference: `PYTHON_REF`, else `scripts/python-ref` (see tests/support).

mod support;

use std::process::Command;

use support::python_ref;

/// The walkthroughs: (name, script, expected output).
fn walkthroughs() -> Vec<(String, String, String)> {
    let doc = std::fs::read_to_string(support::repo().join("docs/concepts/secrets.md")).unwrap();
    let mut out = Vec::new();
    for (i, _) in doc.match_indices("<!-- walkthrough:") {
        let rest = &doc[i + "<!-- walkthrough:".len()..];
        let name = rest[..rest.find(" -->").unwrap()].to_owned();
        let block = |from: &str, fence: &str| -> (String, usize) {
            let start = from.find(fence).unwrap_or_else(|| panic!("{name}: no {fence} block")) + fence.len();
            let end = start + from[start..].find("\n```").unwrap();
            (from[start..end].trim_start_matches('\n').to_owned() + "\n", end + 4)
        };
        let (script, after) = block(rest, "```sh");
        let (expected, _) = block(&rest[after..], "```text");
        out.push((name, script, expected));
    }
    out
}

/// A `flechtctl` on the PATH of the script: `rs`, `py`, or turns starting with either.
fn shim(dir: &std::path::Path, mode: &str) -> std::path::PathBuf {
    let rs = format!("'{}'", env!("CARGO_BIN_EXE_flechtctl"));
    let py = format!("PYTHONUTF8=1 PYTHONDONTWRITEBYTECODE=1 '{}' -m flechtctl", python_ref().display());
    let bin = dir.join(format!("shim-{mode}"));
    std::fs::create_dir_all(&bin).unwrap();
    let counter = bin.join("calls");
    let body = match mode {
        "rs" => format!("exec {rs} \"$@\"\n"),
        "py" => format!("exec env {py} \"$@\"\n"),
        turns => {
            let (first, second) = if turns == "turns-py-first" { (&py, &rs) } else { (&rs, &py) };
            let first = if first == &py { format!("env {first}") } else { first.clone() };
            let second = if second == &py { format!("env {second}") } else { second.clone() };
            format!(
                "n=$(cat '{c}' 2>/dev/null || echo 0)\necho $((n + 1)) > '{c}'\n\
                 if [ $((n % 2)) -eq 0 ]; then exec {first} \"$@\"; else exec {second} \"$@\"; fi\n",
                c = counter.display()
            )
        }
    };
    let path = bin.join("flechtctl");
    std::fs::write(&path, format!("#!/bin/sh\n{body}")).unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

#[test]
fn the_rotation_walkthroughs_print_what_the_docs_say() {
    let walkthroughs = walkthroughs();
    let names: Vec<&str> = walkthroughs.iter().map(|w| w.0.as_str()).collect();
    assert_eq!(names, ["rotation", "recipient"]);
    let root = std::env::temp_dir().join(format!("flechtctl-walkthrough-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let mut runs = 0;
    for (name, script, expected) in &walkthroughs {
        for mode in ["rs", "py", "turns-rs-first", "turns-py-first"] {
            let dir = root.join(format!("{name}-{mode}"));
            std::fs::create_dir_all(&dir).unwrap();
            let bin = shim(&root, mode);
            let _ = std::fs::remove_file(bin.join("calls"));
            let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
            let out =
                Command::new("sh").args(["-eu", "-c", script]).current_dir(&dir).env("PATH", path).output().unwrap();
            let stdout = String::from_utf8(out.stdout).unwrap();
            let stderr = String::from_utf8(out.stderr).unwrap();
            assert!(out.status.success(), "walkthrough {name} with {mode}: {stderr}");
            assert_eq!(&stdout, expected, "walkthrough {name} with {mode} (stderr: {stderr})");
            if name == "rotation" {
                assert_eq!(stderr, "flechtctl: error: cannot decrypt secret value; scope='db'; kid='k-2026'\n");
            } else {
                assert_eq!(stderr, "");
            }
            runs += 1;
        }
    }
    eprintln!("{runs} walkthrough runs, each printing what the docs say");
    let _ = std::fs::remove_dir_all(&root);
}
