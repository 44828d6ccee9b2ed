//! The cut-overs, stopped and killed: Python → Rust → Python on one `application_id`, each
//! switch a clean stop or a SIGKILL while a transaction is open; how a switch is made, and how
//! long the successor took to fence a killed owner's transaction.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use flechtwerk::testing::read_topic;

use crate::checks::{check_changelog, check_counter_outputs, compare_python_view, fail, python_read};
use crate::process::{restored_entries, Proc};
use crate::topics::{committed, create_topics, feed, Watermarks};
use crate::{
    block, kafka, wait_until, Setup, FENCE_MAX, FROZEN_SETTLE, INPUTS, KILL_ATTEMPTS, PARTITIONS, PHASE_MAX,
    TRANSACTION_TIMEOUT,
};

#[derive(Clone, Copy, PartialEq, Debug)]
pub(crate) enum Switch {
    Stop,
    Kill,
}

/// How a victim's ownership ended: when, after how many attempts, and (a kill) the partitions
/// its open transaction held, each with its high watermark at the kill.
pub(crate) struct SwitchedOff {
    at: Instant,
    pub(crate) attempts: usize,
    open: Vec<(String, i32, i64)>,
}

/// Ends `victim`'s ownership: SIGTERM, or SIGKILL while one of its transactions is open (frozen
/// first, and let run on when its transaction closed before the freeze).
pub(crate) fn switch_off(
    how: Switch,
    victim: &mut Proc,
    watermarks: &Watermarks,
    topics: &[&str],
    progress: &dyn Fn() -> i64,
) -> SwitchedOff {
    if how == Switch::Stop {
        victim.stop();
        return SwitchedOff { at: Instant::now(), attempts: 1, open: Vec::new() };
    }
    for attempt in 1..=KILL_ATTEMPTS {
        // Freeze the victim the moment an open transaction shows, and kill it only if the
        // transaction is still open while it is frozen (nothing can commit it any more);
        // else let it run on and wait for the next one. A transaction is open for a few
        // milliseconds per batch: a kill sent on sight used to miss it often, and every miss
        // cost a restart and a share of the paced input (in one CI run, four misses in a row
        // left the fifth incarnation no input to make progress with).
        let deadline = Instant::now() + Duration::from_secs(20);
        while !watermarks.any_open(topics) && Instant::now() < deadline {
            victim.alive();
        }
        victim.freeze();
        // A transaction whose EndTxn the victim sent just before the freeze still shows open
        // until the coordinator wrote its markers (milliseconds): killing then would leave
        // nothing for the successor to fence. Only a transaction still open after a second of
        // the victim frozen is one the victim left open.
        std::thread::sleep(FROZEN_SETTLE);
        let open = watermarks.open_positions(topics);
        if !open.is_empty() {
            victim.kill();
            let at = Instant::now();
            let shown: Vec<String> =
                open.iter().map(|(t, p, high)| format!("{t}/{p} (high watermark {high})")).collect();
            println!("migration: {} SIGKILLed with a transaction open on {}", victim.name, shown.join(", "));
            return SwitchedOff { at, attempts: attempt, open };
        }
        victim.thaw();
        println!("migration: {} froze between transactions (attempt {attempt}); trying again", victim.name);
        let before = progress();
        wait_until("the victim to make progress after the freeze", PHASE_MAX, || {
            victim.alive();
            progress() > before
        });
    }
    panic!("no kill of {} landed in an open transaction in {KILL_ATTEMPTS} attempts", victim.name);
}

/// After a kill: the successor must abort the victim's open transaction by fencing it, long
/// before the transaction timeout would. The victim's transaction is over on a partition once
/// its last stable offset reached the high watermark of the kill (the abort marker follows the
/// victim's records; the successor's own transactions open later). Returns the time from the
/// kill.
pub(crate) fn fenced(watermarks: &Watermarks, killed: &SwitchedOff, successor: &mut Proc) -> Duration {
    let deadline = killed.at + FENCE_MAX;
    loop {
        let still_open: Vec<String> = killed
            .open
            .iter()
            .filter_map(|(topic, p, high)| {
                let (lso, _) = watermarks.of(topic, *p);
                (lso < *high).then(|| format!("{topic}/{p} (LSO {lso} < {high} at the kill)"))
            })
            .collect();
        if still_open.is_empty() {
            return killed.at.elapsed();
        }
        successor.alive();
        assert!(
            Instant::now() < deadline,
            "the killed owner's transaction is still open {FENCE_MAX:?} after the kill (still open: {still_open:?}); \
             the successor did not fence it (its transactional ids differ?). The transaction timeout is \
             {TRANSACTION_TIMEOUT:?}; successor log: {}",
            successor.context()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Python → Rust → Python, each switch a stop or a kill.
///
/// Pins: LIFE-03 (the changelog, the group and the per-task transactional ids are Python's: the
/// `app-id` planted bug fails it), TRX-30 (the task producers' ids `{application_id}-{p}`: a
/// killed owner's open transaction is aborted by its successor's fence, long before it could time
/// out), TRX-31 (fence, then restore the changelog the other side wrote: the `forget` planted bug
/// fails it), TRX-11 (each side goes on from the offsets the other committed: every key counts
/// 1..n), ATTR-43 (Python's consumer reads Rust's outputs byte for byte, canonical JSON).
pub(crate) fn cutover(setup: Setup, how: Switch) -> String {
    let started = Instant::now();
    let p = &setup.prefix;
    let (input, output, app) = (format!("{p}-in"), format!("{p}-out"), format!("{p}-app"));
    let changelog = format!("{app}-changelog");
    create_topics(&[(&input, PARTITIONS, false), (&output, PARTITIONS, false)]);
    let rust_group = setup.rust_group(&app);
    let (fed, feeder) = feed(&input, vec![app.clone(), rust_group.clone()]);
    let watermarks = Watermarks::new();
    let txn_topics = [output.as_str(), changelog.as_str()];

    // Python first.
    let mut py1 = setup.python_counter("py-first", &app, "pod-0");
    wait_until("Python to process 25% of the input", PHASE_MAX, || {
        py1.alive();
        committed(&app, &input, PARTITIONS) >= (INPUTS / 4) as i64
    });
    let py_progress = || committed(&app, &input, PARTITIONS);
    let killed1 = switch_off(how, &mut py1, &watermarks, &txn_topics, &py_progress);
    let python_end = watermarks.stable(&output);

    // Rust takes over.
    let mut rust = setup.rust_counter("rust", &app, "rust-0");
    let fence1 = (how == Switch::Kill).then(|| fenced(&watermarks, &killed1, &mut rust));
    let before = committed(&rust_group, &input, PARTITIONS);
    wait_until("Rust to take over and process up to 55% of the input", PHASE_MAX, || {
        rust.alive();
        let done = committed(&rust_group, &input, PARTITIONS);
        done > before && done >= (INPUTS * 55 / 100) as i64
    });
    assert!(fed.load(Ordering::SeqCst) < INPUTS, "the feed ended before the switch back: slow it down");
    let rust_progress = || committed(&rust_group, &input, PARTITIONS);
    let killed2 = switch_off(how, &mut rust, &watermarks, &txn_topics, &rust_progress);
    let rust_end = watermarks.stable(&output);

    // And back to Python, to the end of the input.
    let mut py2 = setup.python_counter("py-back", &app, "pod-0");
    let fence2 = (how == Switch::Kill).then(|| fenced(&watermarks, &killed2, &mut py2));
    feeder.join().expect("feeder");
    wait_until("Python to process every input", PHASE_MAX, || {
        py2.alive();
        committed(&app, &input, PARTITIONS) == INPUTS as i64
    });
    py2.stop();

    let procs = [&py1, &rust, &py2];
    let label = format!("cut-over ({how:?})");
    let outputs = block(read_topic(&*kafka(), "migration-reader", &output)).expect("read output");
    let (violations, finals) = check_counter_outputs(&outputs);
    if !violations.is_empty() {
        fail(&label, "the output does not count every key exactly 1..n", &violations, &procs);
    }
    let log = block(read_topic(&*kafka(), "migration-reader", &changelog)).expect("read changelog");
    let violations = check_changelog(&finals, &log);
    if !violations.is_empty() {
        fail(&label, "the changelog disagrees with the outputs", &violations, &procs);
    }
    // What each implementation wrote, by offsets: Python up to `python_end`, Rust up to `rust_end`.
    let by_rust: Vec<usize> = (0..PARTITIONS as i32)
        .map(|p| {
            let (from, to) = (python_end[p as usize], rust_end[p as usize]);
            outputs.iter().filter(|r| r.partition == p && r.offset >= from && r.offset < to).count()
        })
        .collect();
    assert!(by_rust.iter().all(|&n| n > 0), "{label}: Rust wrote no output on some partition: {by_rust:?}");
    let (rust_restored, python_restored) = (restored_entries(&rust), restored_entries(&py2));
    assert!(rust_restored > 0, "{label}: Rust restored nothing from Python's changelog ({})", rust.context());
    assert!(python_restored > 0, "{label}: Python restored nothing from the changelog ({})", py2.context());
    // A Python consumer reads the output Python and Rust wrote: the same records and bytes.
    let violations = compare_python_view(&python_read(&setup.python, &output, &setup.logs), &outputs);
    if !violations.is_empty() {
        fail(&label, "a Python consumer reads the output differently", &violations, &procs);
    }
    let fences = match (fence1, fence2) {
        (Some(a), Some(b)) => format!(
            "; killed mid-transaction ({} and {} attempt(s)), the open transaction fenced {:.1} s and {:.1} s after \
             the kill",
            killed1.attempts,
            killed2.attempts,
            a.as_secs_f64(),
            b.as_secs_f64()
        ),
        _ => String::new(),
    };
    format!(
        "{label}: {} outputs, every key 1..n; Rust wrote {} of them ({by_rust:?} per partition) after restoring {} \
         changelog records of Python's, Python restored {} back{fences}; a Python consumer read all {} records \
         byte for byte; {:.0} s",
        outputs.len(),
        by_rust.iter().sum::<usize>(),
        rust_restored,
        python_restored,
        outputs.len(),
        started.elapsed().as_secs_f64()
    )
}
