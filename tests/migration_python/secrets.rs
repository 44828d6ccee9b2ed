//! Secrets in a mixed fleet: a Python ledger whose configs and state carry `ENCRYPTED` fields,
//! taken over by the Rust one and back, then a key rotation done with both implementations'
//! `flechtctl` on one keyring file while a Python and a Rust replica share the tasks.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

use flechtwerk::attribute::{encrypted, Attribute, INT, STR};
use flechtwerk::json::Value;
use flechtwerk::secrets::{is_encrypted, kid_of, read_header, Keyring, Refusal, SecretError};
use flechtwerk::stage::BoxError;
use flechtwerk::testing::read_topic;
use flechtwerk::wire::{self, RawRecord};
use flechtwerk::Event;
use sha2::{Digest, Sha256};

use crate::checks::fail;
use crate::process::{tasks_held, Proc};
use crate::topics::{committed, create_topics, produce};
use crate::{block, bootstrap, hex, kafka, wait_until, Setup, I, IMPL, PARTITIONS, PHASE_MAX, SEEN};

/// A config's API key, sealed for scope `vendor` (`migration.py secret-configs` writes them).
pub(crate) const API_KEY: Attribute<String> = Attribute::new("api_key", &encrypted(STR).scope("vendor"));
/// The state's sealed text `ledger:<key>:<total>`.
pub(crate) const LEDGER: Attribute<String> = Attribute::new("ledger", &encrypted(STR).scope("ledger"));
/// An output's running total, proof, and the kids of the tokens its replica read.
pub(crate) const TOTAL: Attribute<i64> = Attribute::new("total", &INT);
pub(crate) const PROOF: Attribute<String> = Attribute::new("proof", &STR);
pub(crate) const STATE_KID: Attribute<String> = Attribute::new("state_kid", &STR);
pub(crate) const CONFIG_KID: Attribute<String> = Attribute::new("config_kid", &STR);

/// Accounts, one config and one input per round each.
const ACCOUNTS: usize = 16;
/// The key the fleet starts with, and the one the rotation brings in.
const OLD_KID: &str = "k-2026";
const NEW_KID: &str = "k-2027";
/// What no topic may hold in plaintext: the API keys and the ledger texts.
const PLAINTEXTS: [&str; 2] = ["apikey-", "ledger:"];

/// The first 16 hex digits of SHA-256 over `<api_key>|<total>`, as `migration.py` computes it.
pub(crate) fn proof(api_key: &str, total: i64) -> String {
    hex(&Sha256::digest(format!("{api_key}|{total}").as_bytes()))[..16].to_owned()
}

/// The kid of the token a field holds: `""` for no field, `plaintext` for a value that is no
/// token (only a planted bug writes one).
pub(crate) fn token_kid(field: Option<&Value>) -> Result<String, BoxError> {
    Ok(match field {
        None => String::new(),
        Some(Value::Str(token)) if is_encrypted(token) => kid_of(token)?,
        Some(_) => "plaintext".to_owned(),
    })
}

fn api_key_of(account: usize) -> String {
    format!("apikey-acct-{account}-s3cr3t")
}

/// Which `flechtctl`: Python's 0.17 (`python -m flechtctl` in the reference venv) or this
/// repository's (the workspace's `flechtctl` binary, built beside this test binary).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Tool {
    Python,
    Rust,
}

fn our_flechtctl() -> PathBuf {
    let exe = std::env::current_exe().expect("own path");
    // target/<profile>/deps/migration_python-… → target/<profile>/flechtctl
    let path = exe.parent().and_then(Path::parent).expect("target dir").join("flechtctl");
    assert!(
        path.exists(),
        "no flechtctl binary at {} — build the workspace's first (`cargo build -p flechtctl`; a workspace \
         test run builds it)",
        path.display()
    );
    path
}

fn flechtctl(setup: &Setup, tool: Tool, args: &[&str]) -> Output {
    flechtctl_command(setup, tool, args).output().unwrap_or_else(|e| panic!("run {tool:?} flechtctl: {e}"))
}

fn flechtctl_command(setup: &Setup, tool: Tool, args: &[&str]) -> Command {
    let mut command = match tool {
        Tool::Python => {
            let mut c = Command::new(&setup.python);
            c.args(["-m", "flechtctl"]).env("PYTHONUTF8", "1").env("PYTHONDONTWRITEBYTECODE", "1");
            c
        }
        Tool::Rust => Command::new(our_flechtctl()),
    };
    command.args(args).current_dir(&setup.logs);
    command
}

/// Runs a `flechtctl` command that must succeed; returns its stdout (one trailing newline off).
fn flechtctl_ok(setup: &Setup, tool: Tool, args: &[&str]) -> String {
    succeeded(tool, args, flechtctl(setup, tool, args))
}

fn succeeded(tool: Tool, args: &[&str], out: Output) -> String {
    assert!(
        out.status.success(),
        "secrets: {tool:?} flechtctl {args:?}: {}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8").trim_end_matches('\n').to_owned()
}

fn field(record: &RawRecord, name: &str) -> Option<Value> {
    wire::decode_value(record.value.as_deref()).ok()?.get(name).cloned()
}

fn key_of(record: &RawRecord) -> String {
    String::from_utf8_lossy(record.key.as_deref().unwrap_or_default()).into_owned()
}

/// Every changelog record's `ledger` must be a `flenc:` token sealed for scope `ledger`; returns
/// the records per kid, and the last token per key.
fn check_state_tokens(
    what: &str,
    changelog: &[RawRecord],
    procs: &[&Proc],
) -> (BTreeMap<String, usize>, BTreeMap<String, String>) {
    let mut kids = BTreeMap::new();
    let mut last = BTreeMap::new();
    let mut violations = Vec::new();
    for r in changelog.iter().filter(|r| !wire::is_tombstone(r.value.as_deref())) {
        let at = format!("{}@{}/{}", key_of(r), r.partition, r.offset);
        match field(r, "ledger") {
            Some(Value::Str(token)) if is_encrypted(&token) => {
                let scope = read_header(&token).ok().and_then(|h| h.get("flenc_scope").cloned());
                if scope != Some(Value::Str("ledger".to_owned())) {
                    violations.push(format!("{at}: a ledger token sealed for scope {scope:?}"));
                }
                *kids.entry(kid_of(&token).unwrap_or_else(|e| format!("({e})"))).or_insert(0) += 1;
                last.insert(key_of(r), token);
            }
            other => violations.push(format!("{at}: the ledger is no token: {other:?}")),
        }
    }
    if !violations.is_empty() {
        fail("secrets", &format!("{what}: the changelog holds a ledger that is not a token"), &violations, procs);
    }
    (kids, last)
}

/// The bytes of every record of `topics` must hold none of [`PLAINTEXTS`].
fn check_no_plaintext(topics: &[&str], procs: &[&Proc]) -> usize {
    let mut records = 0;
    let mut violations = Vec::new();
    for topic in topics {
        for r in block(read_topic(&*kafka(), "migration-reader", topic)).expect("read topic") {
            records += 1;
            let bytes = r.value.as_deref().unwrap_or_default();
            for plaintext in PLAINTEXTS {
                if bytes.windows(plaintext.len()).any(|w| w == plaintext.as_bytes()) {
                    violations.push(format!("{topic} {}/{}: holds {plaintext:?} in plaintext", r.partition, r.offset));
                }
            }
        }
    }
    if !violations.is_empty() {
        fail("secrets", "a topic holds a secret in plaintext", &violations, procs);
    }
    records
}

/// One output as the checks see it.
struct Out {
    i: i64,
    seen: i64,
    total: i64,
    proof: String,
    implementation: String,
    state_kid: String,
    config_kid: String,
}

fn outputs_by_key(outputs: &[RawRecord], procs: &[&Proc]) -> BTreeMap<String, Vec<Out>> {
    let mut by_key: BTreeMap<String, Vec<(i32, Out)>> = BTreeMap::new();
    for r in outputs {
        let v = Event::wrap(wire::decode_value(r.value.as_deref()).expect("an output decodes"));
        let get = |a: &Attribute<String>| v.get(a).ok().flatten().unwrap_or_default();
        let out = Out {
            i: v.get(&I).ok().flatten().unwrap_or(-1),
            seen: v.get(&SEEN).ok().flatten().unwrap_or(-1),
            total: v.get(&TOTAL).ok().flatten().unwrap_or(-1),
            proof: get(&PROOF),
            implementation: get(&IMPL),
            state_kid: get(&STATE_KID),
            config_kid: get(&CONFIG_KID),
        };
        by_key.entry(key_of(r)).or_default().push((r.partition, out));
    }
    let mut violations = Vec::new();
    let by_key = by_key
        .into_iter()
        .map(|(key, outs)| {
            let partitions: std::collections::BTreeSet<i32> = outs.iter().map(|o| o.0).collect();
            if partitions.len() > 1 {
                violations.push(format!("{key}: outputs in partitions {partitions:?}"));
            }
            (key, outs.into_iter().map(|o| o.1).collect())
        })
        .collect();
    if !violations.is_empty() {
        fail("secrets", "a key's outputs are spread over partitions", &violations, procs);
    }
    by_key
}

/// The replicas of the scenario, and the ones it stopped (kept for their logs).
struct Fleet<'s> {
    setup: &'s Setup,
    app: String,
    input: String,
    output: String,
    configs: String,
    keyring: String,
    /// Rounds fed so far: round r is input `r·ACCOUNTS + a` under `acct-a`, for every account.
    rounds: usize,
    started: usize,
    retired: Vec<Proc>,
}

impl Fleet<'_> {
    fn python(&mut self) -> Proc {
        self.started += 1;
        let name = format!("py-{}", self.started);
        Proc::python(
            &name,
            &self.setup.python,
            "tests/python/migration.py",
            &[
                "secrets",
                "--bootstrap",
                &bootstrap(),
                "--app",
                &self.app,
                "--client",
                &name,
                "--input",
                &self.input,
                "--output",
                &self.output,
                "--configs",
                &self.configs,
                "--keyring",
                &self.keyring,
            ],
            &self.setup.logs,
        )
    }

    fn rust(&mut self, keyring: &str) -> Proc {
        self.started += 1;
        let name = format!("rs-{}", self.started);
        Proc::rust(
            &name,
            &["secrets", &self.app, &name, &self.input, &self.output, &self.configs, keyring],
            &self.setup.logs,
        )
    }

    /// Feeds one round and waits until `procs` committed it.
    fn round(&mut self, procs: &mut [&mut Proc]) {
        let values: Vec<(String, String)> = (0..ACCOUNTS)
            .map(|a| (format!("acct-{a}"), format!(r#"{{"i":{}}}"#, self.rounds * ACCOUNTS + a)))
            .collect();
        let records: Vec<(Option<&str>, Option<&[u8]>)> =
            values.iter().map(|(k, v)| (Some(k.as_str()), Some(v.as_bytes()))).collect();
        produce(&self.input, &records);
        self.rounds += 1;
        let want = (self.rounds * ACCOUNTS) as i64;
        wait_until(&format!("round {} to be committed", self.rounds), PHASE_MAX, || {
            procs.iter_mut().for_each(|p| p.alive());
            committed(&self.app, &self.input, PARTITIONS) == want
        });
    }

    /// Waits until `members` all hold tasks, all PARTITIONS of them between them.
    fn settled(&self, members: &mut [&mut Proc]) {
        wait_until("a settled group", PHASE_MAX, || {
            members.iter_mut().for_each(|m| m.alive());
            let held: Vec<usize> = members.iter().map(|m| tasks_held(m)).collect();
            held.iter().all(|&n| n > 0) && held.iter().sum::<usize>() == PARTITIONS as usize
        });
    }

    /// A rolling restart of the pair: each replica in turn stopped and started again (reading the
    /// keyring file as it is now), the group settled and a round processed after each.
    fn roll(&mut self, py: &mut Proc, rs: &mut Proc) {
        py.stop();
        let fresh = self.python();
        self.retired.push(std::mem::replace(py, fresh));
        self.settled(&mut [py, rs]);
        self.round(&mut [py, rs]);
        rs.stop();
        let keyring = self.keyring.clone();
        let fresh = self.rust(&keyring);
        self.retired.push(std::mem::replace(rs, fresh));
        self.settled(&mut [py, rs]);
        self.round(&mut [py, rs]);
    }

    fn procs<'a>(&'a self, live: &[&'a Proc]) -> Vec<&'a Proc> {
        self.retired.iter().chain(live.iter().copied()).collect()
    }
}

fn read(topic: &str) -> Vec<RawRecord> {
    block(read_topic(&*kafka(), "migration-reader", topic)).expect("read topic")
}

/// Re-seals every config's API key under the keyring's primary, half with Python's `flechtctl
/// reencrypt`, half with ours, and writes the configs back (the other fields as they were).
/// Returns how many each tool re-sealed.
fn reseal_configs(setup: &Setup, configs: &str, keyring: &str) -> (usize, usize) {
    let mut last: BTreeMap<String, RawRecord> = BTreeMap::new();
    for r in read(configs) {
        last.insert(key_of(&r), r);
    }
    // One process per token, all at once (Python's takes most of a second to start).
    let mut running = Vec::new();
    for (n, (key, record)) in last.iter().enumerate() {
        let map = wire::decode_value(record.value.as_deref()).expect("a config decodes");
        let Some(Value::Str(token)) = map.get("api_key").cloned() else { panic!("config {key}: no api_key token") };
        let tool = if n % 2 == 0 { Tool::Python } else { Tool::Rust };
        let args = ["reencrypt", "-k", keyring, "--scope", "vendor", &token];
        let child = flechtctl_command(setup, tool, &args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("run {tool:?} flechtctl: {e}"));
        running.push((key, map, tool, child));
    }
    let mut written = Vec::new();
    let (mut by_python, mut by_rust) = (0, 0);
    for (key, mut map, tool, child) in running {
        let out = child.wait_with_output().expect("flechtctl reencrypt");
        let resealed = succeeded(tool, &["reencrypt"], out);
        assert_eq!(
            kid_of(&resealed).ok().as_deref(),
            Some(NEW_KID),
            "config {key}: {tool:?} re-sealed under another key"
        );
        match tool {
            Tool::Python => by_python += 1,
            Tool::Rust => by_rust += 1,
        }
        map.insert("api_key".to_owned(), Value::Str(resealed));
        written.push((key.clone(), Event::wrap(map).encode().expect("encode")));
    }
    let records: Vec<(Option<&str>, Option<&[u8]>)> =
        written.iter().map(|(k, v)| (Some(k.as_str()), Some(v.as_slice()))).collect();
    produce(configs, &records);
    (by_python, by_rust)
}

/// A Python ledger with a sealed config field and sealed state, taken over by the Rust one and
/// back (clean stops), then a key rotation while a Python and a Rust replica share the tasks.
///
/// 1. Python's `flechtctl keyring new` makes the keyring file (one oct key, `k-2026`); Python's
///    codec seals the configs' API keys (`migration.py secret-configs`).
/// 2. Python, Rust, Python in turn, a round each: every account's ledger token is opened by
///    the implementation that did not seal it, both ways; after each phase every changelog record
///    is a token.
/// 3. A Python and a Rust replica share the tasks. Rotation: Python's `flechtctl keyring add`
///    (`k-2027`, not the primary yet) and a rolling restart, so every replica can open what the new
///    key seals before any seals with it; our `flechtctl keyring primary k-2027` and a rolling
///    restart; a round, so every ledger is sealed again under the new key (lazily, by the
///    stage's own write); the configs' API keys re-sealed (`flechtctl reencrypt`, half with each
///    tool) and written back to the config topic, and rounds until every replica read them; the
///    gate (the last ledger of every key and the last config of every account name `k-2027`);
///    Python's `flechtctl keyring remove k-2026` and a rolling restart.
/// 4. Every output counts its key 1..n with the right running total and a proof over the
///    decrypted API key and total; the last round read only `k-2027` tokens; no topic holds a
///    plaintext; the last ledgers open to their totals; the old keyring, in both
///    implementations, refuses the new tokens by name (an unknown key), and a Rust replica given
///    it fails on its first input with that error.
///
/// Pins: SEC-02 (both implementations read the keyring file either `flechtctl` made or edited),
/// SEC-10 and SEC-11 (config and state tokens sealed by one implementation's codec open in the
/// other's, both ways, and an unknown kid is a decrypt error that names it, in both), SEC-31
/// (re-sealing with either `flechtctl` moves a token to the primary and keeps its plaintext: the
/// proofs over the re-sealed API keys stay right), CFG-20 (the running replicas drain the
/// re-sealed configs), TRX-31 (each side restores the ledgers the other wrote: the totals go on).
pub(crate) fn secrets(setup: Setup) -> String {
    let started = Instant::now();
    let p = &setup.prefix;
    let (input, output, configs, app) = (format!("{p}-in"), format!("{p}-out"), format!("{p}-cfg"), format!("{p}-app"));
    let changelog = format!("{app}-changelog");
    // One config partition: the configs written back must land where the originals are.
    create_topics(&[
        (&input, PARTITIONS, false),
        (&output, PARTITIONS, false),
        (&configs, 1, true),
        (&changelog, PARTITIONS, true),
    ]);
    let keyring = setup.logs.join("app.keyring").display().to_string();
    let old_keyring = setup.logs.join("app-2026.keyring").display().to_string();
    flechtctl_ok(&setup, Tool::Python, &["keyring", "new", &keyring, "--kid", OLD_KID]);
    std::fs::copy(&keyring, &old_keyring).expect("copy the keyring");
    let writer = Command::new(&setup.python)
        .arg(crate::repo().join("tests/python/migration.py"))
        .args(["--log-level", "WARNING", "secret-configs", "--bootstrap", &bootstrap(), "--topic", &configs])
        .args(["--keyring", &keyring, "--accounts", &ACCOUNTS.to_string()])
        .output()
        .expect("run migration.py secret-configs");
    assert!(writer.status.success(), "secret-configs: {}", String::from_utf8_lossy(&writer.stderr));

    let mut fleet = Fleet {
        setup: &setup,
        app: app.clone(),
        input,
        output: output.clone(),
        configs: configs.clone(),
        keyring: keyring.clone(),
        rounds: 0,
        started: 0,
        retired: Vec::new(),
    };

    // Python, Rust, Python: each opens the ledger tokens the other sealed.
    let mut phase_kids = Vec::new();
    let mut phase = |fleet: &mut Fleet, mut replica: Proc| {
        fleet.round(&mut [&mut replica]);
        let (kids, _) =
            check_state_tokens(&format!("after {}", replica.name), &read(&changelog), &fleet.procs(&[&replica]));
        phase_kids.push(kids.into_iter().map(|(kid, n)| format!("{kid} {n}")).collect::<Vec<_>>().join(", "));
        replica
    };
    let mut py = fleet.python();
    py = phase(&mut fleet, py);
    py.stop();
    fleet.retired.push(py);
    let mut rs = fleet.rust(&keyring);
    rs = phase(&mut fleet, rs);
    rs.stop();
    fleet.retired.push(rs);
    let py = fleet.python();
    let mut py = phase(&mut fleet, py);
    // The Python replica runs on, joined by a Rust one.
    let mut rs = fleet.rust(&keyring);
    fleet.settled(&mut [&mut py, &mut rs]);
    fleet.round(&mut [&mut py, &mut rs]);
    let before_rotation = fleet.rounds;
    let handed_over = started.elapsed();

    // 1. The new key, not the primary yet: every replica learns to open it first.
    flechtctl_ok(&setup, Tool::Python, &["keyring", "add", &keyring, "--kid", NEW_KID]);
    fleet.roll(&mut py, &mut rs);
    // 2. The new key becomes the primary; each ledger written from then on is sealed under it.
    flechtctl_ok(&setup, Tool::Rust, &["keyring", "primary", &keyring, NEW_KID]);
    fleet.roll(&mut py, &mut rs);
    fleet.round(&mut [&mut py, &mut rs]);
    // 3. Re-seal the configs; the replicas drain them.
    let (resealed_py, resealed_rs) = reseal_configs(&setup, &configs, &keyring);
    let resealed_at = fleet.rounds;
    let new_configs_read = |fleet: &Fleet| {
        let by_key = outputs_by_key(&read(&output), &fleet.procs(&[]));
        by_key.values().all(|outs| outs.last().is_some_and(|o| o.config_kid == NEW_KID))
    };
    let mut tries = 0;
    loop {
        // Each round read the configs as the replicas' stores held them then.
        fleet.round(&mut [&mut py, &mut rs]);
        tries += 1;
        if new_configs_read(&fleet) {
            break;
        }
        assert!(tries < 10, "secrets: the replicas did not read the re-sealed configs in {tries} rounds");
    }
    let drained_at = fleet.rounds;
    // The gate: nothing names the old key any more.
    let procs = fleet.procs(&[&py, &rs]);
    let (_, last_ledgers) = check_state_tokens("before removing the old key", &read(&changelog), &procs);
    let mut config_kids: BTreeMap<String, String> = BTreeMap::new();
    for r in read(&configs) {
        let kid = match field(&r, "api_key") {
            Some(Value::Str(token)) => kid_of(&token).unwrap_or_else(|e| format!("({e})")),
            other => format!("no token: {other:?}"),
        };
        config_kids.insert(key_of(&r), kid);
    }
    let stale: Vec<String> = last_ledgers
        .iter()
        .map(|(k, t)| (k, kid_of(t).unwrap_or_default()))
        .chain(config_kids.iter().map(|(k, kid)| (k, kid.clone())))
        .filter(|(_, kid)| kid != NEW_KID)
        .map(|(k, kid)| format!("{k}: {kid}"))
        .collect();
    if !stale.is_empty() {
        fail("secrets", "a last ledger or config still names the old key at the gate", &stale, &procs);
    }
    drop(procs);
    // 4. The old key goes.
    flechtctl_ok(&setup, Tool::Python, &["keyring", "remove", &keyring, OLD_KID]);
    fleet.roll(&mut py, &mut rs);
    py.stop();
    rs.stop();
    let rotated = started.elapsed();
    // A Rust replica given the old keyring, and one more input (checked below, once it failed; a
    // replica that opened it would write an output too many).
    let stale = fleet.rust(&old_keyring);
    produce(&fleet.input, &[(Some("acct-0"), Some(&br#"{"i":0}"#[..]))]);

    // The outputs: every key 1..n, each total and proof right.
    let procs = fleet.procs(&[&py, &rs]);
    let outputs = read(&output);
    let by_key = outputs_by_key(&outputs, &procs);
    let mut violations = Vec::new();
    let (mut py_read_rust, mut rust_read_py) = (0, 0);
    let mut state_reads: BTreeMap<String, usize> = BTreeMap::new();
    for a in 0..ACCOUNTS {
        let key = format!("acct-{a}");
        let outs = by_key.get(&key).map(Vec::as_slice).unwrap_or_default();
        if outs.len() != fleet.rounds {
            violations.push(format!("{key}: {} outputs for {} inputs", outs.len(), fleet.rounds));
        }
        let mut total = 0;
        for (j, (o, previous)) in outs.iter().zip(std::iter::once(None).chain(outs.iter().map(Some))).enumerate() {
            let i = (j * ACCOUNTS + a) as i64;
            total += i;
            if (o.i, o.seen, o.total) != (i, j as i64 + 1, total) || o.proof != proof(&api_key_of(a), total) {
                violations.push(format!(
                    "{key} output {}: i {} seen {} total {} proof {} by {}; expected i {i} seen {} total {total} \
                     proof {}",
                    j + 1,
                    o.i,
                    o.seen,
                    o.total,
                    o.proof,
                    o.implementation,
                    j + 1,
                    proof(&api_key_of(a), total)
                ));
            }
            // The ledger read in round j was sealed in round j - 1: under the old key up to the
            // first round of the primary's roll-out (the round after the Python restart), under
            // either while it rolls out, under the new key from the round after it. The configs
            // read are the old ones before the re-seal, the new ones from the round every
            // replica had drained them.
            let primary_rollout = before_rotation + 2;
            let expected_state_kid = match j {
                0 => Some(""),
                j if j <= primary_rollout => Some(OLD_KID),
                j if j > primary_rollout + 1 => Some(NEW_KID),
                _ => None,
            };
            let expected_config_kid = match j {
                j if j < resealed_at => Some(OLD_KID),
                j if j + 1 >= drained_at => Some(NEW_KID),
                _ => None,
            };
            let fits = |got: &str, want: Option<&str>| match want {
                Some(want) => got == want,
                None => got == OLD_KID || got == NEW_KID,
            };
            let config_went_back = previous.is_some_and(|p| p.config_kid == NEW_KID && o.config_kid == OLD_KID);
            if !fits(&o.state_kid, expected_state_kid) || !fits(&o.config_kid, expected_config_kid) || config_went_back
            {
                violations.push(format!(
                    "{key} output {}: read a ledger of {:?} and a config of {:?}; expected {expected_state_kid:?} and \
                     {expected_config_kid:?} (None: either key; a config never goes back to the old key)",
                    j + 1,
                    o.state_kid,
                    o.config_kid
                ));
            }
            if !o.state_kid.is_empty() {
                *state_reads.entry(o.implementation.clone()).or_insert(0) += 1;
            }
            match (previous.map(|p| p.implementation.as_str()), o.implementation.as_str()) {
                (Some("python"), "rust") => rust_read_py += 1,
                (Some("rust"), "python") => py_read_rust += 1,
                _ => {}
            }
        }
    }
    if !violations.is_empty() {
        fail("secrets", "the outputs do not count, total and prove every key", &violations, &procs);
    }
    assert!(
        rust_read_py >= ACCOUNTS && py_read_rust >= ACCOUNTS,
        "secrets: Rust opened {rust_read_py} ledgers Python sealed and Python {py_read_rust} of Rust's; at least \
         {ACCOUNTS} each expected (every account handed over both ways)"
    );

    // The changelog and the configs: tokens only, under the new key at the end, no plaintext.
    let (kids, last_ledgers) = check_state_tokens("at the end", &read(&changelog), &procs);
    let records = check_no_plaintext(&[&changelog, &configs, &output], &procs);
    let final_keyring = Keyring::from_json(&std::fs::read_to_string(&keyring).expect("keyring")).expect("keyring");
    assert_eq!(final_keyring.kids().collect::<Vec<_>>(), [NEW_KID], "secrets: the final keyring's kids");
    let mut expected_totals = BTreeMap::new();
    for (key, outs) in &by_key {
        expected_totals.insert(key.clone(), outs.last().map(|o| o.total).unwrap_or_default());
    }
    for (key, token) in &last_ledgers {
        let opened = final_keyring.decrypt(token, "ledger").expect("the last ledger opens with the final keyring");
        let text = format!("\"ledger:{key}:{}\"", expected_totals[key]);
        assert_eq!(opened.as_bytes(), text.as_bytes(), "secrets: the last ledger of {key}");
    }

    // The old keyring refuses the new tokens, by name: in ours, in Python's flechtctl, and in a
    // Rust replica given it.
    let new_token = last_ledgers.values().next().expect("a ledger").clone();
    let old = Keyring::from_json(&std::fs::read_to_string(&old_keyring).expect("old keyring")).expect("old keyring");
    match old.decrypt(&new_token, "ledger") {
        Err(SecretError::Decrypt { kid, cause: Some(Refusal::UnknownKey { .. }), .. }) if kid == NEW_KID => {}
        other => {
            panic!("secrets: the old keyring opened a new token or failed otherwise: {:?}", other.map(|_| "opened"))
        }
    }
    let refused = flechtctl(&setup, Tool::Python, &["decrypt", "-k", &old_keyring, "--scope", "ledger", &new_token]);
    let message = String::from_utf8_lossy(&refused.stderr).trim().to_owned();
    assert!(
        !refused.status.success()
            && message.contains(&format!("cannot decrypt secret value; scope='ledger'; kid='{NEW_KID}'")),
        "secrets: Python's flechtctl with the old keyring: {} {message}",
        refused.status
    );
    wait_until("the replica with the old keyring to fail", PHASE_MAX, || {
        stale.last(|l| l.strip_prefix("crashed: ").map(str::to_owned)).is_some()
    });
    let crash = stale.last(|l| l.strip_prefix("crashed: ").map(str::to_owned)).unwrap_or_default();
    assert!(
        crash.contains(&format!("kid='{NEW_KID}'")) && crash.contains("cannot decrypt secret value"),
        "secrets: the replica with the old keyring failed otherwise: {crash} ({})",
        stale.context()
    );
    format!(
        "secrets: {} outputs over {ACCOUNTS} accounts, every key 1..n with its totals and proofs; Rust opened {rust_read_py} \
         ledger tokens Python sealed, Python {py_read_rust} of Rust's (state tokens read: {state_reads:?}); changelog \
         tokens per kid after the Python, Rust and Python phases {phase_kids:?}, at the end {kids:?}; configs \
         re-sealed {resealed_py} by Python's flechtctl and {resealed_rs} by ours; {records} records without a \
         plaintext; the old keyring refuses the new tokens ({message:?}; a Rust replica: {crash:?}); {} rounds, \
         handed over in {:.0} s, rotated by {:.0} s, {:.0} s in all",
        outputs.len(),
        fleet.rounds,
        handed_over.as_secs_f64(),
        rotated.as_secs_f64(),
        started.elapsed().as_secs_f64()
    )
}
