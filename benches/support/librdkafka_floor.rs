//! The floor of librdkafka itself (`--only floor`, `floor-eos2`): the counter's wire work driven
//! through librdkafka's C API directly, with neither our adapter nor the engine.
//!
//! One consumer in the application's group (the adapter's settings: range, read_committed, the
//! stage's fetch bounds) reads batches with `rd_kafka_consume_batch_queue` (up to
//! `max_poll_records` per call, no per-message poll); per input it produces the output record
//! (the input's bytes with `,"seen":N` spliced in) and the changelog record `{"seen":N}`, to the
//! input's partition of each (counts in a `HashMap`, no JSON parse or encode, no state store);
//! then `send_offsets_to_transaction` and `commit_transaction`. `floor`: one transactional
//! producer per input partition, each batch's partitions committed on threads of their own at
//! once (the per-task shape); `floor-eos2`: one producer, one transaction per batch for every
//! partition (the per-instance shape); `floor-dr`: `floor` with a delivery report callback (see
//! [`delivered`]), which the others go without. The producers have the adapter's settings
//! (idempotent, zstd, murmur2, 20 ms retry backoff). Exactly-once only; no rebalance handling:
//! it runs alone.

use std::collections::HashMap;
use std::ffi::{CStr, CString};
use std::os::raw::{c_char, c_void};
use std::sync::atomic::{AtomicBool, Ordering};

use rdkafka::bindings as rd;

/// An owned librdkafka object (`$raw`), freed by `$free` when dropped.
macro_rules! owned {
    ($(#[$doc:meta])* $name:ident($raw:ty), $free:path) => {
        $(#[$doc])*
        struct $name(*mut $raw);

        // SAFETY: librdkafka's handles, topic handles and group metadata are thread-safe (its
        // documentation says so of every call used here); each producer is used by one thread
        // at a time.
        unsafe impl Send for $name {}
        // SAFETY: as above.
        unsafe impl Sync for $name {}

        impl Drop for $name {
            fn drop(&mut self) {
                // SAFETY: made by librdkafka, freed once, here (a topic handle before its client:
                // `TxProducer` declares its client last).
                unsafe { $free(self.0) }
            }
        }
    };
}

owned!(
    /// A client handle.
    Handle(rd::rd_kafka_t),
    rd::rd_kafka_destroy
);
owned!(
    /// A topic handle of one client.
    Topic(rd::rd_kafka_topic_t),
    rd::rd_kafka_topic_destroy
);
owned!(
    /// The consumer's group metadata, for `send_offsets_to_transaction`.
    Group(rd::rd_kafka_consumer_group_metadata_t),
    rd::rd_kafka_consumer_group_metadata_destroy
);

fn cstring(s: &str) -> CString {
    CString::new(s).expect("no NUL in a setting")
}

/// `floor-dr`'s delivery report callback: reads what a client that awaits each record's
/// delivery reads (its error and offset) and keeps the greatest offset, as the adapter keeps a
/// changelog position. A failed delivery aborts the child (a panic cannot unwind out of a C
/// callback): the floor runs alone on a healthy broker.
unsafe extern "C" fn delivered(_: *mut rd::rd_kafka_t, message: *const rd::rd_kafka_message_t, _: *mut c_void) {
    // SAFETY: librdkafka hands a message valid for the callback's duration.
    let message = unsafe { &*message };
    assert!(message.err == rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR, "delivery: {:?}", message.err);
    DELIVERED.fetch_max(message.offset, Ordering::Relaxed);
}

/// What [`delivered`] keeps (read by no one: the callback's work is the figure).
static DELIVERED: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);

/// A client; `reports`: with a delivery report callback (served by the flush inside each
/// `rd_kafka_commit_transaction`, and by `rd_kafka_poll` when the queue is full).
fn new_client(kind: rd::rd_kafka_type_t, settings: &[(&str, String)], reports: bool) -> Handle {
    let mut errstr = [0 as c_char; 512];
    // SAFETY: plain librdkafka configuration calls; the conf is consumed by rd_kafka_new on
    // success (and leaked on a failure that panics anyway).
    unsafe {
        let conf = rd::rd_kafka_conf_new();
        if reports {
            rd::rd_kafka_conf_set_dr_msg_cb(conf, Some(delivered));
        }
        for (key, value) in settings {
            let (k, v) = (cstring(key), cstring(value));
            let r = rd::rd_kafka_conf_set(conf, k.as_ptr(), v.as_ptr(), errstr.as_mut_ptr(), errstr.len());
            assert!(
                r == rd::rd_kafka_conf_res_t::RD_KAFKA_CONF_OK,
                "{key}={value}: {}",
                CStr::from_ptr(errstr.as_ptr()).to_string_lossy()
            );
        }
        let rk = rd::rd_kafka_new(kind, conf, errstr.as_mut_ptr(), errstr.len());
        assert!(!rk.is_null(), "rd_kafka_new: {}", CStr::from_ptr(errstr.as_ptr()).to_string_lossy());
        Handle(rk)
    }
}

/// Panics with librdkafka's message when `error` is one.
fn check(error: *mut rd::rd_kafka_error_t, what: &str) {
    if !error.is_null() {
        // SAFETY: a non-null error returned by librdkafka, destroyed once after reading it.
        let message = unsafe {
            let m = CStr::from_ptr(rd::rd_kafka_error_string(error)).to_string_lossy().into_owned();
            rd::rd_kafka_error_destroy(error);
            m
        };
        panic!("{what}: {message}");
    }
}

fn topic(client: &Handle, name: &str) -> Topic {
    let name = cstring(name);
    // SAFETY: a topic handle of a live client, without a topic config.
    let t = unsafe { rd::rd_kafka_topic_new(client.0, name.as_ptr(), std::ptr::null_mut()) };
    assert!(!t.is_null(), "rd_kafka_topic_new");
    Topic(t)
}

/// A transactional producer with its output and changelog topic handles.
struct TxProducer {
    output: Topic,
    changelog: Topic,
    client: Handle,
}

/// One input, as the batch handed it out: (partition, offset, key, value).
type Input<'a> = (i32, i64, &'a [u8], &'a [u8]);

impl TxProducer {
    fn new(bootstrap: &str, transactional_id: &str, output: &str, changelog: &str, reports: bool) -> TxProducer {
        let client = new_client(
            rd::rd_kafka_type_t::RD_KAFKA_PRODUCER,
            &[
                ("bootstrap.servers", bootstrap.to_owned()),
                ("client.id", "bench-pod-0".to_owned()),
                ("enable.idempotence", "true".to_owned()),
                ("partitioner", "murmur2_random".to_owned()),
                ("compression.type", "zstd".to_owned()),
                ("transactional.id", transactional_id.to_owned()),
                ("retry.backoff.ms", "20".to_owned()),
            ],
            reports,
        );
        // SAFETY: a live producer handle.
        check(unsafe { rd::rd_kafka_init_transactions(client.0, 60_000) }, "init_transactions");
        TxProducer { output: topic(&client, output), changelog: topic(&client, changelog), client }
    }

    /// One transaction: `inputs` counted and written, then `offsets` (topic, partition, next
    /// offset) sent with the group's metadata, then the commit.
    fn transact(
        &self,
        inputs: &[Input<'_>],
        seen: &mut HashMap<Vec<u8>, i64>,
        offsets: &[(&str, i32, i64)],
        group: &Group,
    ) {
        // SAFETY: librdkafka calls on live handles; every payload is copied (RD_KAFKA_MSG_F_COPY)
        // before `rd_kafka_produce` returns; the offsets list is destroyed after use.
        unsafe {
            check(rd::rd_kafka_begin_transaction(self.client.0), "begin_transaction");
            let mut value = Vec::with_capacity(256);
            for &(partition, _, key, input) in inputs {
                let count = seen.entry(key.to_vec()).or_insert(0);
                *count += 1;
                value.clear();
                value.extend_from_slice(&input[..input.len().saturating_sub(1)]); // the closing brace
                value.extend_from_slice(format!(",\"seen\":{count}}}").as_bytes());
                let state = format!("{{\"seen\":{count}}}");
                for (topic, bytes) in [(&self.output, &value[..]), (&self.changelog, state.as_bytes())] {
                    loop {
                        let r = rd::rd_kafka_produce(
                            topic.0,
                            partition,
                            rd::RD_KAFKA_MSG_F_COPY,
                            bytes.as_ptr() as *mut c_void,
                            bytes.len(),
                            key.as_ptr() as *const c_void,
                            key.len(),
                            std::ptr::null_mut(),
                        );
                        if r == 0 {
                            break;
                        }
                        // A full queue: serve the delivery reports and try again.
                        rd::rd_kafka_poll(self.client.0, 10);
                    }
                }
            }
            let list = rd::rd_kafka_topic_partition_list_new(offsets.len() as i32);
            for &(topic, partition, next) in offsets {
                let name = cstring(topic);
                let entry = rd::rd_kafka_topic_partition_list_add(list, name.as_ptr(), partition);
                (*entry).offset = next;
            }
            let sent = rd::rd_kafka_send_offsets_to_transaction(self.client.0, list, group.0, 60_000);
            rd::rd_kafka_topic_partition_list_destroy(list);
            check(sent, "send_offsets_to_transaction");
            check(rd::rd_kafka_commit_transaction(self.client.0, 60_000), "commit_transaction");
        }
    }
}

/// What the floor is told to do (from the child's flags).
pub(crate) struct Floor<'a> {
    pub(crate) bootstrap: &'a str,
    pub(crate) app: &'a str,
    pub(crate) input: &'a str,
    pub(crate) output: &'a str,
    pub(crate) changelog: &'a str,
    pub(crate) partitions: u32,
    pub(crate) max_poll_records: usize,
    pub(crate) per_instance: bool,
    /// `floor-dr`: a delivery report per record (see [`delivered`]).
    pub(crate) reports: bool,
}

/// Runs the floor until `stop` is set; prints `TASKS <n> <ns>` when the first records arrive
/// (the moment its partitions are assigned and fetched).
pub(crate) fn run(floor: &Floor<'_>, stop: &AtomicBool, now_ns: impl Fn() -> u128) {
    let Floor { bootstrap, app, input, output, changelog, partitions, max_poll_records, per_instance, reports } =
        *floor;
    let producers: Vec<TxProducer> = if per_instance {
        vec![TxProducer::new(bootstrap, &format!("{app}-floor-instance"), output, changelog, reports)]
    } else {
        (0..partitions)
            .map(|p| TxProducer::new(bootstrap, &format!("{app}-floor-{p}"), output, changelog, reports))
            .collect()
    };
    let buffered = max_poll_records.saturating_mul(2).max(100);
    let consumer = new_client(
        rd::rd_kafka_type_t::RD_KAFKA_CONSUMER,
        &[
            ("bootstrap.servers", bootstrap.to_owned()),
            ("client.id", "bench-pod-0".to_owned()),
            ("group.id", app.to_owned()),
            ("group.protocol", "classic".to_owned()),
            ("partition.assignment.strategy", "range".to_owned()),
            ("isolation.level", "read_committed".to_owned()),
            ("enable.auto.commit", "false".to_owned()),
            ("enable.partition.eof", "false".to_owned()),
            ("auto.offset.reset", "earliest".to_owned()),
            ("fetch.max.bytes", "1000000".to_owned()),
            ("max.partition.fetch.bytes", (64 << 10).to_string()),
            ("queued.max.messages.kbytes", "2048".to_owned()),
            ("queued.min.messages", buffered.to_string()),
            ("fetch.queue.backoff.ms", "2".to_owned()),
        ],
        false,
    );
    let mut messages: Vec<*mut rd::rd_kafka_message_t> = vec![std::ptr::null_mut(); max_poll_records];
    let mut seen: Vec<HashMap<Vec<u8>, i64>> = (0..partitions).map(|_| HashMap::new()).collect();
    let mut announced = false;
    // SAFETY: librdkafka calls on the live consumer; each message is read while it lives and
    // destroyed once, after the transaction that used its bytes.
    unsafe {
        let list = rd::rd_kafka_topic_partition_list_new(1);
        let name = cstring(input);
        rd::rd_kafka_topic_partition_list_add(list, name.as_ptr(), -1);
        let err = rd::rd_kafka_subscribe(consumer.0, list);
        rd::rd_kafka_topic_partition_list_destroy(list);
        assert!(err == rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR, "subscribe: {err:?}");
        rd::rd_kafka_poll_set_consumer(consumer.0);
        let queue = rd::rd_kafka_queue_get_consumer(consumer.0);
        while !stop.load(Ordering::Relaxed) {
            let n = rd::rd_kafka_consume_batch_queue(queue, 100, messages.as_mut_ptr(), messages.len());
            assert!(n >= 0, "consume_batch_queue");
            let batch = &messages[..n as usize];
            let mut inputs: Vec<Input<'_>> = Vec::with_capacity(batch.len());
            for &m in batch {
                let m = &*m;
                assert!(m.err == rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR, "consume: {:?}", m.err);
                let key = std::slice::from_raw_parts(m.key as *const u8, m.key_len);
                let value = std::slice::from_raw_parts(m.payload as *const u8, m.len);
                inputs.push((m.partition, m.offset, key, value));
            }
            if !inputs.is_empty() {
                if !announced {
                    println!("TASKS {partitions} {}", now_ns());
                    announced = true;
                }
                let group = Group(rd::rd_kafka_consumer_group_metadata(consumer.0));
                let mut by_partition: Vec<Vec<Input<'_>>> = (0..partitions).map(|_| Vec::new()).collect();
                for i in inputs {
                    by_partition[i.0 as usize].push(i);
                }
                if per_instance {
                    let offsets: Vec<(&str, i32, i64)> =
                        by_partition.iter().filter_map(|b| b.last().map(|&(p, o, _, _)| (input, p, o + 1))).collect();
                    // One producer, so one count map: keys never span partitions of one input.
                    let all: Vec<Input<'_>> = by_partition.concat();
                    producers[0].transact(&all, &mut seen[0], &offsets, &group);
                } else {
                    std::thread::scope(|s| {
                        for ((b, producer), seen) in by_partition.iter().zip(&producers).zip(seen.iter_mut()) {
                            let Some(&(p, o, _, _)) = b.last() else { continue };
                            let group = &group;
                            s.spawn(move || producer.transact(b, seen, &[(input, p, o + 1)], group));
                        }
                    });
                }
            }
            for &m in batch {
                rd::rd_kafka_message_destroy(m);
            }
        }
        rd::rd_kafka_queue_destroy(queue);
        rd::rd_kafka_consumer_close(consumer.0);
    }
    drop(producers);
    drop(consumer);
}
