//! The chaos harness's SVG timeline, opened in a real browser: headless Chromium (Debian's
//! `chromium`, installed by `scripts/chromium`, which `scripts/test` runs) parses the timeline
//! of a planted bug's failing seed, and its DOM holds what the failure printed: the fault rows
//! named by the schedule's kinds, the labelled time axis, the reference run's lanes, the
//! violations. A screenshot of it must come out non-empty.
//!
//! Without a `chromium` binary the browser half is skipped, loudly; with `FLECHTWERK_CHROMIUM`
//! set (scripts/test sets it to the binary's path) a missing browser fails the test.
//!
//! `RUSTFLAGS="--cfg madsim" cargo test -p flechtwerk-sim --test timeline_in_a_browser`

#![cfg(madsim)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use flechtwerk::attribute::{Attribute, INT};
use flechtwerk::stage::{transformer, FnTransformer};
use flechtwerk::{Event, Message};
use flechtwerk_sim::chaos::{Chaos, Failure, Input};

const AMOUNT: Attribute<i64> = Attribute::new("amount", &INT);
const SUM: Attribute<i64> = Attribute::new("sum", &INT);

/// The planted bug of `chaos_user_stage`: the sum in the stage's memory, lost by a handover.
fn in_memory_sum() -> FnTransformer {
    let sums: Arc<Mutex<BTreeMap<String, i64>>> = Arc::default();
    transformer(["amounts"]).transform(move |msg, _state, out| {
        let amount = msg.value.as_ref().map(|v| v.get(&AMOUNT)).transpose()?.flatten().unwrap_or(0);
        let mut sums = sums.lock().expect("sums lock");
        let sum = sums.entry(msg.key.clone()).or_default();
        *sum += amount;
        out.send(Message::new("sums", msg.key.as_str(), Event::new().with(&SUM, *sum)?));
        Ok(())
    })
}

/// The first failing seed's failure, its timeline written into `dir`.
fn first_failure(dir: &Path) -> Failure {
    // The only test of this binary: no other thread reads the environment meanwhile.
    std::env::set_var("FLECHTWERK_CHAOS_TIMELINE_DIR", dir);
    for seed in 0..20 {
        let test = Chaos::transformer(in_memory_sum)
            .input("amounts", 4)
            .output("sums", 4)
            .inputs(200, |rng, i| {
                Input::new("amounts", format!("acct-{}", rng.below(12)), format!(r#"{{"amount":{}}}"#, i % 7 + 1))
            })
            .profile("everything")
            .seeds(seed..seed + 1);
        if let Err(failure) = test.try_run() {
            return failure;
        }
    }
    panic!("the in-memory sum passed 20 seeds: the oracle is broken");
}

/// The Chromium binary: `FLECHTWERK_CHROMIUM` (which must exist), else `chromium` on the PATH.
fn chromium() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("FLECHTWERK_CHROMIUM") {
        let path = PathBuf::from(path);
        assert!(path.is_file(), "FLECHTWERK_CHROMIUM={} is not a file (scripts/chromium installs it)", path.display());
        return Some(path);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join("chromium")).find(|p| p.is_file())
}

/// Runs headless Chromium on `file` with `args` (at most two minutes); its stdout.
fn headless(chromium: &Path, profile: &Path, args: &[&str], file: &Path) -> Vec<u8> {
    let mut child = Command::new(chromium)
        .args(["--headless", "--disable-gpu", "--no-sandbox", "--no-first-run", "--hide-scrollbars"])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(format!("file://{}", file.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start chromium");
    let mut stdout = child.stdout.take().expect("stdout");
    let reader = std::thread::spawn(move || {
        let mut out = Vec::new();
        std::io::Read::read_to_end(&mut stdout, &mut out).expect("read chromium's output");
        out
    });
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(status) = child.try_wait().expect("wait for chromium") {
            assert!(status.success(), "chromium {args:?} failed: {status}");
            break;
        }
        if Instant::now() > deadline {
            child.kill().expect("kill chromium");
            panic!("chromium {args:?} still running after two minutes");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    reader.join().expect("the reader")
}

#[test]
fn the_failing_seeds_timeline_renders_in_headless_chromium() {
    let dir = std::env::temp_dir().join(format!("flechtwerk-timeline-browser-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let failure = first_failure(&dir);
    let path = failure.timeline.clone().expect("the failure names its timeline");
    let svg = std::fs::read_to_string(&path).expect("the timeline was written");

    // The picture tells the failure's story: its faults by the schedule's kind names, the
    // same clock, the violations of the same (shrunk) run, the reference run.
    let text = failure.to_string();
    assert!(text.contains("time from the start of the fault period"), "{text}");
    assert!(svg.contains("time from the start of the fault period"), "the axis says where it counts from");
    for timed in &failure.shrunk.faults {
        assert!(svg.contains(&format!(">{}", timed.fault.kind())), "no row for {} in {}", timed.fault, path.display());
    }
    assert!(!svg.contains("network-partition"), "the trace's name for an isolation stays out of the picture");
    assert!(svg.contains(r#"id="reference""#), "the reference run's lanes");
    assert!(!failure.shrunk_violations.is_empty(), "{text}");
    let first = &failure.shrunk_violations[0];
    let head: String = first.chars().take(40).collect();
    assert!(svg.contains(&head.replace('"', "&quot;")), "the SVG lists the shrunk run's violations: {head}");
    assert!(text.contains(&format!("  - {first}")), "the console lists them too:\n{text}");

    let Some(chromium) = chromium() else {
        // Straight to the process's stderr, past the test harness's capture: a skip must show.
        let warning = format!(
            "\n!!!!!!!!\n!!! SKIPPED: no `chromium` binary on the PATH: the timeline {} was NOT opened in a browser.\n\
             !!! Run scripts/chromium (Debian's package) or scripts/test, which installs it and sets FLECHTWERK_CHROMIUM.\n!!!!!!!!\n",
            path.display()
        );
        let _ = std::io::Write::write_all(&mut std::io::stderr(), warning.as_bytes());
        return;
    };
    let profile = dir.join("chromium-profile");
    let dom = String::from_utf8_lossy(&headless(&chromium, &profile, &["--dump-dom"], &path)).into_owned();
    assert!(!dom.contains("parsererror") && !dom.contains("This page contains the following errors"), "{dom}");
    assert!(dom.contains("<svg"), "chromium's DOM holds no <svg>: {dom}");
    for element in [r#"id="axis""#, r#"class="fault""#, r#"id="reference""#, r#"class="violation""#] {
        assert!(dom.contains(element), "chromium's DOM lacks {element}");
    }
    let png = dir.join("timeline.png");
    headless(&chromium, &profile, &[&format!("--screenshot={}", png.display()), "--window-size=1400,1000"], &path);
    let image = std::fs::read(&png).expect("chromium wrote the screenshot");
    assert!(image.len() > 10_000 && image.starts_with(b"\x89PNG"), "a screenshot of {} bytes", image.len());
    eprintln!("the timeline {} renders in {}: screenshot {}", path.display(), chromium.display(), png.display());
    let _ = std::fs::remove_dir_all(&dir);
}
