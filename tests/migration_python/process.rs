//! Child processes: a child's output lines kept and logged, its signals (stop, kill, freeze,
//! thaw), and what its reports say: the tasks and tokens it holds, the changelog entries it
//! restored.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::repo;

/// A child process whose output lines are kept (with their arrival time) and logged to a file.
pub(crate) struct Proc {
    pub(crate) name: String,
    child: Child,
    lines: Arc<Mutex<Vec<(Instant, String)>>>,
    log: PathBuf,
    /// A Python reference replica (tests/python/migration.py): on a late stop it is asked for
    /// its tasks' stacks, and a hung stop is recorded as the reference's, not failed (see
    /// [`Proc::stop`]).
    python: bool,
}

/// Python replicas whose clean stop hung and were SIGKILLed (see [`Proc::stop`]), as
/// "name (log)": the run's summary names them.
pub(crate) static HUNG_PYTHON_STOPS: Mutex<Vec<String>> = Mutex::new(Vec::new());

impl Proc {
    fn spawn(name: &str, mut command: Command, logs: &Path) -> Proc {
        command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = command.spawn().unwrap_or_else(|e| panic!("start {name}: {e}"));
        let log = logs.join(format!("{name}.log"));
        let file = Arc::new(Mutex::new(File::create(&log).expect("log file")));
        let lines = Arc::new(Mutex::new(Vec::new()));
        let streams: [Box<dyn std::io::Read + Send>; 2] =
            [Box::new(child.stdout.take().unwrap()), Box::new(child.stderr.take().unwrap())];
        for stream in streams {
            let (file, lines) = (file.clone(), lines.clone());
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    let _ = writeln!(file.lock().unwrap(), "{line}");
                    lines.lock().unwrap().push((Instant::now(), line));
                }
            });
        }
        Proc { name: name.to_owned(), child, lines, log, python: false }
    }

    pub(crate) fn python(name: &str, python: &Path, script: &str, args: &[&str], logs: &Path) -> Proc {
        let mut command = Command::new(python);
        command.arg(repo().join(script)).args(args).env("PYTHONUNBUFFERED", "1");
        let mut proc = Proc::spawn(name, command, logs);
        proc.python = true;
        proc
    }

    pub(crate) fn rust(name: &str, args: &[&str], logs: &Path) -> Proc {
        let mut command = Command::new(std::env::current_exe().expect("own path"));
        command.arg("--child").args(args);
        Proc::spawn(name, command, logs)
    }

    /// The values `f` finds in the output lines, in order.
    fn find<T>(&self, f: impl Fn(&str) -> Option<T>) -> Vec<T> {
        self.lines.lock().unwrap().iter().filter_map(|(_, l)| f(l)).collect()
    }

    pub(crate) fn last<T>(&self, f: impl Fn(&str) -> Option<T>) -> Option<T> {
        self.find(f).pop()
    }

    /// The partitions this Python replica held in every generation it joined, when it joined
    /// consecutive generations (aiokafka's `Joined group '…' (generation N)`, each followed by
    /// `Setting newly assigned partitions {…partition=P…}`): then no other member held them
    /// from its first join until it left. Empty when a generation is missing (the replica was
    /// out of the group for one) or it never joined.
    pub(crate) fn held_throughout(&self) -> std::collections::BTreeSet<i32> {
        let mut generations: Vec<(i64, std::collections::BTreeSet<i32>)> = Vec::new();
        for line in self.find(|l| Some(l.to_owned())) {
            if let Some((_, rest)) = line.split_once("(generation ") {
                if let Some(n) = rest.split(')').next().and_then(|n| n.trim().parse().ok()) {
                    generations.push((n, std::collections::BTreeSet::new()));
                }
            } else if line.contains("Setting newly assigned partitions") {
                if let Some((_, assigned)) = generations.last_mut() {
                    assigned.extend(line.split("partition=").skip(1).filter_map(|rest| {
                        rest.split(|c: char| !c.is_ascii_digit()).next().and_then(|n| n.parse::<i32>().ok())
                    }));
                }
            }
        }
        let consecutive = generations.windows(2).all(|w| w[1].0 == w[0].0 + 1);
        match generations.split_first() {
            Some(((_, first), rest)) if consecutive => {
                rest.iter().fold(first.clone(), |held, (_, assigned)| held.intersection(assigned).copied().collect())
            }
            _ => std::collections::BTreeSet::new(),
        }
    }

    pub(crate) fn context(&self) -> String {
        format!("{} (log {})", self.name, self.log.display())
    }

    fn signal(&self, signal: i32) {
        // SAFETY: kill(2) on our own child's pid.
        let rc = unsafe { libc::kill(self.child.id() as i32, signal) };
        assert_eq!(rc, 0, "signal {signal} to {}", self.context());
    }

    fn wait_for_exit(&mut self, max: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + max;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return Some(status);
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// SIGTERM, then the clean shutdown must end the process with status 0 within 30 s.
    ///
    /// A Python replica gets 30 s more after a SIGUSR1 that makes it log every asyncio task's
    /// stack; if it still runs, it is SIGKILLed and recorded in [`HUNG_PYTHON_STOPS`] (the
    /// scenario goes on: a SIGKILL is a handover the protocol survives, and what hangs is the
    /// reference's own shutdown, docs/compatibility.md hazard 10). A Rust replica that is late
    /// fails the scenario.
    pub(crate) fn stop(&mut self) {
        self.signal(libc::SIGTERM);
        let mut status = self.wait_for_exit(Duration::from_secs(30));
        if status.is_none() && self.python {
            self.signal(libc::SIGUSR1);
            status = self.wait_for_exit(Duration::from_secs(30));
            match status {
                Some(_) => eprintln!(
                    "migration: {} stopped 30-60 s after SIGTERM (its tasks' stacks are in the log)",
                    self.context()
                ),
                None => {
                    self.kill();
                    eprintln!("migration: {} hung on its clean stop; SIGKILLed 60 s after SIGTERM (its tasks' stacks are in the log)", self.context());
                    HUNG_PYTHON_STOPS.lock().unwrap().push(self.context());
                    return;
                }
            }
        }
        match status {
            Some(status) => assert!(status.success(), "{} exited with {status} after SIGTERM", self.context()),
            None => panic!("{} did not stop within 30 s of SIGTERM", self.context()),
        }
    }

    pub(crate) fn kill(&mut self) {
        self.signal(libc::SIGKILL);
        self.wait_for_exit(Duration::from_secs(10)).expect("a SIGKILLed process ends");
    }

    /// Freezes the process (SIGSTOP): none of its threads runs until [`Proc::thaw`].
    pub(crate) fn freeze(&mut self) {
        self.signal(libc::SIGSTOP);
    }

    /// Lets a frozen process run on (SIGCONT).
    pub(crate) fn thaw(&mut self) {
        self.signal(libc::SIGCONT);
    }

    fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().expect("try_wait")
    }

    /// Asserts the process still runs (a crash would otherwise show up as a timeout).
    pub(crate) fn alive(&mut self) {
        if let Some(status) = self.exited() {
            panic!("{} ended unexpectedly with {status}", self.context());
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Tasks a process holds according to its latest report: Python logs `Initialized tasks [..]
/// (now running N)` and `Closed tasks [..]`, the Rust children print `tasks N`.
pub(crate) fn tasks_held(p: &Proc) -> usize {
    p.last(|line| {
        if let Some(rest) = line.strip_prefix("tasks ") {
            return rest.trim().parse().ok();
        }
        if line.contains("flechtwerk.transformer: Closed tasks [") {
            return Some(0);
        }
        let (_, rest) = line.split_once("flechtwerk.transformer: Initialized tasks [")?;
        let (_, running) = rest.split_once("(now running ")?;
        running.trim_end_matches(')').parse().ok()
    })
    .unwrap_or(0)
}

/// Changelog entries a process restored when its tasks started (every task start counts).
pub(crate) fn restored_entries(p: &Proc) -> usize {
    p.find(|line| {
        if let Some(rest) = line.strip_prefix("restored ") {
            return rest.split_whitespace().nth(1)?.parse::<usize>().ok();
        }
        let (_, rest) = line.split_once("flechtwerk.kafka: Restored ")?;
        rest.split_whitespace().next()?.parse().ok()
    })
    .into_iter()
    .sum()
}

/// Tokens a process holds according to its latest report: Python logs `Acquired tokens [..]`
/// and `No tokens assigned`, the Rust children print `tokens N`.
pub(crate) fn tokens_held(p: &Proc) -> usize {
    p.last(|line| {
        if let Some(rest) = line.strip_prefix("tokens ") {
            return rest.trim().parse().ok();
        }
        // A revoke gives every token up (Python's suspend_tokens) until the next "Acquired
        // tokens": a replica mid-rebalance holds none, whatever it held before.
        if line.contains("No tokens assigned") || line.contains("Revoking previously assigned partitions") {
            return Some(0);
        }
        let (_, rest) = line.split_once("Acquired tokens [")?;
        let (list, _) = rest.split_once(']')?;
        Some(list.split(',').filter(|t| !t.trim().is_empty()).count())
    })
    .unwrap_or(0)
}
