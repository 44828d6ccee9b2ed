//! Running this crate's `flechtctl` and Python's (flechtctl 0.17.0 in the reference venv) side by
//! side in a scratch directory.
//!
//! The Python reference is `PYTHON_REF` (scripts/test sets it), else what `scripts/python-ref`
//! finds or installs, as the library's tests/python_support does.

#![allow(dead_code)] // each test program uses its own part of this

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;

/// The repository's root (this crate is one directory below it).
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace root").to_path_buf()
}

/// The Python of the reference venv.
pub fn python_ref() -> PathBuf {
    static FOUND: Mutex<Option<PathBuf>> = Mutex::new(None);
    let mut found = FOUND.lock().unwrap();
    if let Some(python) = found.as_ref() {
        return python.clone();
    }
    let python = match std::env::var_os("PYTHON_REF").filter(|p| !p.is_empty()) {
        Some(python) => PathBuf::from(python),
        None => {
            let out = Command::new(repo().join("scripts/python-ref"))
                .stderr(Stdio::inherit())
                .output()
                .expect("run scripts/python-ref");
            assert!(out.status.success(), "scripts/python-ref failed: install the Python reference first");
            let text = String::from_utf8_lossy(&out.stdout);
            PathBuf::from(text.lines().find_map(|l| l.strip_prefix("PYTHON_REF=")).expect("PYTHON_REF= in its output"))
        }
    };
    *found = Some(python.clone());
    python
}

/// Which implementation runs a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Side {
    /// Python's flechtctl 0.17.0.
    Py,
    /// This crate's binary.
    Rs,
}

pub use Side::{Py, Rs};

impl Side {
    pub fn other(self) -> Side {
        match self {
            Py => Rs,
            Rs => Py,
        }
    }
}

/// What a command did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Out {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// A scratch directory both implementations work in, and a tally of what was checked.
pub struct Bench {
    pub dir: PathBuf,
    tally: Mutex<BTreeMap<String, usize>>,
    name: String,
}

impl Bench {
    pub fn new(name: &str) -> Bench {
        let dir = std::env::temp_dir().join(format!("flechtctl-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Bench { dir, tally: Mutex::new(BTreeMap::new()), name: name.to_owned() }
    }

    /// The command line that runs `side`'s flechtctl.
    pub fn command(&self, side: Side) -> Command {
        let mut command = match side {
            Py => {
                let mut c = Command::new(python_ref());
                c.args(["-m", "flechtctl"]).env("PYTHONUTF8", "1").env("PYTHONDONTWRITEBYTECODE", "1");
                c
            }
            Rs => Command::new(env!("CARGO_BIN_EXE_flechtctl")),
        };
        command.current_dir(&self.dir);
        command
    }

    /// Runs `side`'s flechtctl with `args` in the directory, `stdin` on its standard input
    /// (never a terminal).
    pub fn run(&self, side: Side, args: &[&str], stdin: &str) -> Out {
        let mut child = self
            .command(side)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start flechtctl");
        child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        Out {
            code: out.status.code().expect("an exit code"),
            stdout: String::from_utf8(out.stdout).expect("UTF-8 output"),
            stderr: String::from_utf8(out.stderr).expect("UTF-8 errors"),
        }
    }

    /// Runs a command that must succeed; its standard output.
    pub fn ok(&self, side: Side, args: &[&str]) -> String {
        self.ok_in(side, args, "")
    }

    pub fn ok_in(&self, side: Side, args: &[&str], stdin: &str) -> String {
        let out = self.run(side, args, stdin);
        assert_eq!(out.code, 0, "{side:?} flechtctl {args:?} failed: {out:?}");
        out.stdout
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    pub fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.path(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
    }

    pub fn write(&self, name: &str, text: &str) {
        if let Some(parent) = self.path(name).parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(self.path(name), text).unwrap();
    }

    /// Counts one check of `what`.
    pub fn count(&self, what: &str) {
        *self.tally.lock().unwrap().entry(what.to_owned()).or_default() += 1;
    }

    /// Every file of the directory (below it too) with its bytes.
    pub fn snapshot(&self) -> BTreeMap<PathBuf, Vec<u8>> {
        fn walk(dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    walk(&path, out);
                } else {
                    out.insert(path.clone(), std::fs::read(&path).unwrap());
                }
            }
        }
        let mut out = BTreeMap::new();
        walk(&self.dir, &mut out);
        out
    }
}

impl Drop for Bench {
    fn drop(&mut self) {
        let tally = self.tally.lock().unwrap();
        let total: usize = tally.values().sum();
        eprintln!("{}: {total} checks", self.name);
        for (what, n) in tally.iter() {
            eprintln!("  {n:5}  {what}");
        }
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
