//! The architecture as a test (docs/architecture.md): the library's layers flow one way, adapter
//! features gate only module lines, an adapter's files import by name, madsim is named in two
//! files only, runtimes (tasks, the MQTT session) live in the engine, not in `stage/`, and every
//! `select!` is biased (determinism in simulation).
//!
//! Every top-level module of `src/` has a rank; a module may refer (`crate::other`) only to
//! modules of a lower rank, so the import graph has no cycle and no layer reaches up. The ranks
//! group into the layers: the wire model, the ports (each adapter beside its port), the config
//! store and decoding mediation, the stage API and the engine, the application handle; the test
//! kit sits on top.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// Module → (rank, layer). A module may use only modules of a strictly lower rank.
const RANKS: &[(&str, u32, &str)] = &[
    ("json", 0, "wire model"),
    // The `flenc:`/`flsig:` token format and keyrings (feature `secrets`): JSON below them, the
    // codecs that seal attributes (record/secret.rs) above.
    ("secrets", 1, "wire model"),
    ("record", 2, "wire model"),
    ("message", 3, "wire model"),
    ("token", 4, "wire model"),
    ("wire", 5, "wire model"),
    ("kafka", 10, "ports"),
    ("state", 11, "ports"),
    ("observer", 12, "ports"),
    ("mqtt", 13, "ports"),
    ("mediation", 20, "config store"),
    ("configs", 21, "config store"),
    ("error", 30, "engine"),
    ("stage", 31, "engine"),
    ("engine", 32, "engine"),
    ("app", 40, "application"),
    ("testing", 50, "test kit"),
];

/// Adapter features: they may gate only `mod` and `use` lines (the adapter's module and its
/// re-export), never code inside the engine.
const ADAPTER_FEATURES: &[&str] = &["rdkafka", "rdkafka-plaintext", "rocksdb", "mqtt", "prometheus"];

/// The production adapters' modules under `src/` (a directory, its `.rs` module file, or both).
const ADAPTER_MODULES: &[&str] = &["kafka/rdkafka", "state/rocksdb", "observer/prometheus", "mqtt/rumqttc"];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file belongs to (`src/engine/tasks/mod.rs` → `engine`).
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap();
    let first = rel.components().next().unwrap().as_os_str().to_string_lossy().into_owned();
    first.trim_end_matches(".rs").to_owned()
}

/// The code of a line: without its `//` comment (doc comments included).
fn code(line: &str) -> &str {
    line.split("//").next().unwrap_or("")
}

fn sources() -> (PathBuf, Vec<PathBuf>) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    (src, files)
}

#[test]
fn layers_flow_one_way() {
    let (src, files) = sources();
    let ranks: BTreeMap<&str, (u32, &str)> = RANKS.iter().map(|(m, r, l)| (*m, (*r, *l))).collect();
    let mut violations = Vec::new();
    for file in &files {
        let module = module_of(&src, file);
        if module == "lib" {
            continue; // the crate root re-exports the user's surface
        }
        let Some(&(rank, layer)) = ranks.get(module.as_str()) else {
            violations.push(format!("{}: module `{module}` has no rank in tests/architecture.rs", file.display()));
            continue;
        };
        let text = fs::read_to_string(file).unwrap();
        let mut in_tests = false;
        for (n, line) in text.lines().enumerate() {
            // Unit tests may use the test kit; the layering is about the library's code.
            if line.trim_start().starts_with("#[cfg(test)]") {
                in_tests = true;
            }
            if in_tests {
                continue;
            }
            let code = code(line);
            let mut rest = code;
            while let Some(at) = rest.find("crate::") {
                let target: String =
                    rest[at + 7..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                rest = &rest[at + 7..];
                if target == module || target.is_empty() {
                    continue;
                }
                match ranks.get(target.as_str()) {
                    Some(&(target_rank, target_layer)) if target_rank >= rank => violations.push(format!(
                        "{}:{}: `{module}` ({layer}) uses `{target}` ({target_layer}), which is not below it",
                        file.display(),
                        n + 1
                    )),
                    Some(_) => {}
                    None if target == "Error" || target.chars().next().is_some_and(char::is_uppercase) => {}
                    None => violations.push(format!("{}:{}: unknown module `{target}`", file.display(), n + 1)),
                }
            }
        }
    }
    assert!(violations.is_empty(), "layering violations:\n  {}", violations.join("\n  "));
}

#[test]
fn adapter_features_gate_only_module_lines() {
    let (_, files) = sources();
    let mut violations = Vec::new();
    for file in &files {
        let text = fs::read_to_string(file).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (n, line) in lines.iter().enumerate() {
            let code = code(line);
            let gates = ADAPTER_FEATURES.iter().any(|f| code.contains(&format!("feature = \"{f}\"")));
            if !gates {
                continue;
            }
            let next = lines[n + 1..].iter().map(|l| l.trim()).find(|l| !l.starts_with("#[") && !l.starts_with("//"));
            let gated_item_ok = next.is_some_and(|l| {
                let l = l.trim_start_matches("pub(crate) ").trim_start_matches("pub ");
                l.starts_with("mod ") || l.starts_with("use ")
            });
            if !code.trim_start().starts_with("#[cfg(") || !gated_item_ok {
                violations.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(
        violations.is_empty(),
        "adapter features may gate only `mod`/`use` lines (keep adapters in their own modules):\n  {}",
        violations.join("\n  ")
    );
}

/// Every file of an adapter imports what it uses by name: no `use super::*` and no glob of a
/// sibling module (`use consumer::*;` in the adapter's `mod.rs`, `use super::log::*;`), except in
/// a `#[cfg(test)] mod tests` block. The librdkafka adapter's seven files once shared one
/// namespace that way (issue 31): what a file depended on showed nowhere, and any item reached
/// every other file. Globs of other crates (`proptest::prelude::*`) are fine.
#[test]
fn adapter_files_import_by_name() {
    let (src, files) = sources();
    let mut globs = Vec::new();
    let mut seen = 0;
    for file in &files {
        let rel = file.strip_prefix(&src).unwrap().to_string_lossy().replace('\\', "/");
        let in_adapter = ADAPTER_MODULES.iter().any(|m| rel == format!("{m}.rs") || rel.starts_with(&format!("{m}/")));
        if !in_adapter || rel.ends_with("/tests.rs") {
            continue;
        }
        seen += 1;
        let text = fs::read_to_string(file).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        // The file's own child modules: `use child::*;` is a glob of a sibling of the others.
        let children: Vec<&str> = lines
            .iter()
            .filter_map(|l| {
                code(l).trim().trim_start_matches("pub(crate) ").trim_start_matches("pub ").strip_prefix("mod ")
            })
            .filter_map(|rest| rest.strip_suffix(';'))
            .collect();
        let mut tests_end: Option<String> = None;
        for (n, line) in lines.iter().enumerate() {
            if let Some(end) = &tests_end {
                if *line == end.as_str() {
                    tests_end = None;
                }
                continue;
            }
            let code = code(line);
            let trimmed = code.trim_start();
            let attributes = lines[..n].iter().rev().map(|l| l.trim()).take_while(|l| l.starts_with("#["));
            if trimmed.starts_with("mod tests {") && attributes.into_iter().any(|a| a == "#[cfg(test)]") {
                tests_end = Some(format!("{}}}", &code[..code.len() - trimmed.len()]));
                continue;
            }
            let visibility = |v: &str| v.is_empty() || v == "pub " || (v.starts_with("pub(") && v.ends_with(") "));
            let Some((_, path)) = trimmed.split_once("use ").filter(|(v, _)| visibility(v)) else {
                continue;
            };
            if !path.contains('*') {
                continue;
            }
            let first = path.split("::").next().unwrap_or("").trim();
            if ["super", "self", "crate"].contains(&first) || children.contains(&first) {
                globs.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(seen > 5, "found only {seen} adapter files: is the scan still looking at the adapters?");
    assert!(
        globs.is_empty(),
        "glob imports in adapter files (import what the file uses by name):\n  {}",
        globs.join("\n  ")
    );
}

/// Every `tokio::select!` in the library and the simulator is `biased;`. An unbiased one picks
/// among ready branches with tokio's thread-local generator, whose seed comes from a
/// process-wide counter, not from the simulation's seed: a seed's run then depends on what else
/// ran in the process (mqtt seed 425 differed between two runs only when another seed ran
/// beside it, from the simulated MQTT client's keep-alive `select!`).
#[test]
fn every_select_is_biased() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    rust_files(&root.join("sim").join("src"), &mut files);
    files.sort();
    let mut unbiased = Vec::new();
    let mut seen = 0;
    for file in &files {
        let text = fs::read_to_string(file).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (n, line) in lines.iter().enumerate() {
            if !code(line).contains("select! {") {
                continue;
            }
            seen += 1;
            let first = lines[n + 1..].iter().map(|l| code(l).trim()).find(|l| !l.is_empty());
            if first != Some("biased;") {
                unbiased.push(format!("{}:{}", file.display(), n + 1));
            }
        }
    }
    assert!(seen > 10, "found only {seen} select! blocks: is the scan still looking at the sources?");
    assert!(
        unbiased.is_empty(),
        "select! without `biased;` as its first line (nondeterministic in simulation):\n  {}",
        unbiased.join("\n  ")
    );
}

/// The files of `src/` that may know they run under madsim: the fault points and the yield
/// shim (besides the feature gates that leave a native adapter out of simulation builds). The rest of the library is the same code in production and in simulation; a `madsim`
/// cfg elsewhere would make a simulation prove something production does not run (issue 31).
const MADSIM_FILES: &[&str] = &["engine/buggify.rs", "engine/budget.rs"];

#[test]
fn madsim_is_confined() {
    let (src, files) = sources();
    let mut outside = Vec::new();
    let mut inside = 0;
    for file in &files {
        let rel = file.strip_prefix(&src).unwrap().to_string_lossy().replace('\\', "/");
        let text = fs::read_to_string(file).unwrap();
        for (n, line) in text.lines().enumerate() {
            if !code(line).contains("madsim") {
                continue;
            }
            // An adapter that cannot run in the simulation is left out of its builds with its
            // feature gate (which may gate only module lines, see above).
            let adapter_gate = ADAPTER_FEATURES.iter().any(|f| code(line).contains(&format!("feature = \"{f}\"")));
            if MADSIM_FILES.contains(&rel.as_str()) {
                inside += 1;
            } else if adapter_gate {
                continue;
            } else {
                outside.push(format!("{rel}:{}: {}", n + 1, line.trim()));
            }
        }
    }
    assert!(inside > 3, "found only {inside} madsim lines in {MADSIM_FILES:?}: is the scan still looking?");
    assert!(
        outside.is_empty(),
        "madsim is named outside {MADSIM_FILES:?} (keep simulation-only code there):\n  {}",
        outside.join("\n  ")
    );
}

/// `stage/` is what a user writes and configures; what runs it lives in `engine/`. No file of
/// `stage/` spawns a task or drives an MQTT client (the MQTT bridge's pump, reconnect rules and
/// acknowledgements moved to `engine/bridge/` in issue 31).
const RUNTIME_MARKERS: &[&str] = &["tokio::spawn", "JoinHandle", "MqttClient", "EventReceiver", "MqttEvent"];

#[test]
fn runtimes_live_in_the_engine() {
    let (src, files) = sources();
    let mut found = Vec::new();
    let mut stage_files = 0;
    for file in &files {
        if module_of(&src, file) != "stage" {
            continue;
        }
        stage_files += 1;
        let text = fs::read_to_string(file).unwrap();
        for (n, line) in text.lines().enumerate() {
            if RUNTIME_MARKERS.iter().any(|m| code(line).contains(m)) {
                found.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(stage_files > 3, "found only {stage_files} files of stage/: is the scan still looking?");
    assert!(found.is_empty(), "runtime code in stage/ (it belongs under engine/):\n  {}", found.join("\n  "));
}
