//! Links the system RocksDB library for the `rocksdb` feature (the production state store).
//!
//! Nothing is compiled: `src/state/rocksdb/ffi.rs` declares the few functions of RocksDB's C API
//! it calls, and this script only tells the linker where `librocksdb` is. It looks, in order:
//!
//! 1. in `FLECHTWERK_ROCKSDB_LIB_DIR`, if set (an install outside the usual places);
//! 2. where `pkg-config --libs rocksdb` says (honours `PKG_CONFIG_PATH`, `PKG_CONFIG`);
//! 3. in the standard library directories (Debian/Ubuntu multiarch, lib64, lib, /usr/local,
//!    Homebrew).
//!
//! and fails with the package to install when none has it. Simulation builds (`--cfg madsim`)
//! and builds without the feature link nothing.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

const OVERRIDE: &str = "FLECHTWERK_ROCKSDB_LIB_DIR";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed={OVERRIDE}");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG");
    if env::var_os("CARGO_FEATURE_ROCKSDB").is_none() || env::var_os("CARGO_CFG_MADSIM").is_some() {
        return;
    }
    let target_os = env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let file_names: &[&str] = match target_os.as_str() {
        "macos" | "ios" => &["librocksdb.dylib"],
        "windows" => &["rocksdb.lib", "rocksdb.dll.lib"],
        _ => &["librocksdb.so"],
    };
    let has_library = |dir: &Path| file_names.iter().any(|name| dir.join(name).is_file());

    if let Some(dir) = env::var_os(OVERRIDE) {
        let dir = PathBuf::from(dir);
        if !has_library(&dir) {
            fail(&format!("{OVERRIDE}={} holds no {}", dir.display(), file_names.join(" or ")));
        }
        link(&dir);
        return;
    }
    if let Some(dir) = pkg_config_lib_dirs().into_iter().find(|dir| has_library(dir)) {
        link(&dir);
        return;
    }
    let searched = standard_dirs(&target_os);
    match searched.iter().find(|dir| has_library(dir)) {
        Some(dir) => link(dir),
        None => fail(&format!(
            "no {} in {}",
            file_names.join(" or "),
            searched.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(", ")
        )),
    }
}

fn link(dir: &Path) {
    println!("cargo:rustc-link-search=native={}", dir.display());
    println!("cargo:rustc-link-lib=dylib=rocksdb");
}

/// The `-L` directories of `pkg-config --libs rocksdb`, if pkg-config and rocksdb.pc are there
/// (none when the library is in a system directory: those are searched next anyway).
fn pkg_config_lib_dirs() -> Vec<PathBuf> {
    let pkg_config = env::var_os("PKG_CONFIG").unwrap_or_else(|| "pkg-config".into());
    match Command::new(pkg_config).args(["--libs-only-L", "rocksdb"]).output() {
        Ok(output) if output.status.success() => String::from_utf8_lossy(&output.stdout)
            .split_whitespace()
            .filter_map(|flag| flag.strip_prefix("-L"))
            .map(PathBuf::from)
            .collect(),
        _ => Vec::new(),
    }
}

/// Where distributions and Homebrew put shared libraries, for the target being built.
fn standard_dirs(target_os: &str) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if target_os == "linux" {
        let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
        let multiarch = match arch.as_str() {
            "x86" => "i386-linux-gnu".to_owned(),
            "arm" => "arm-linux-gnueabihf".to_owned(),
            arch => format!("{arch}-linux-gnu"),
        };
        dirs.push(PathBuf::from("/usr/lib").join(multiarch)); // Debian, Ubuntu
        dirs.push("/usr/lib64".into()); // Fedora, RHEL, openSUSE
    }
    if target_os == "macos" {
        dirs.push("/opt/homebrew/lib".into()); // Homebrew on Apple silicon
    }
    dirs.push("/usr/local/lib".into()); // Homebrew on Intel, source installs
    dirs.push("/usr/lib".into()); // Arch, Alpine
    dirs
}

fn fail(why: &str) -> ! {
    eprintln!(
        "\n\
error: the `rocksdb` feature of flechtwerk (on by default) links the system RocksDB library,
and it was not found: {why}.

Install it (the development package provides the unversioned librocksdb to link against):
    Debian, Ubuntu:   sudo apt-get install librocksdb-dev
    Fedora, RHEL:     sudo dnf install rocksdb-devel
    Arch:             sudo pacman -S rocksdb
    Alpine:           apk add rocksdb-dev
    macOS (Homebrew): brew install rocksdb
A library installed elsewhere: set {OVERRIDE} to the directory holding it.
Or build without RocksDB (task state then lives in memory):
    cargo build --no-default-features
    flechtwerk = {{ version = \"...\", default-features = false }}   (in a dependent's Cargo.toml)
"
    );
    std::process::exit(1);
}
