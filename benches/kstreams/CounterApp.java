// The counting transformer on Kafka Streams 4.4: the JVM side of benches/eos_side_by_side.rs
// (issue 38) and of the restore comparison (issue 35). Built and started by scripts/kstreams:
//
//     scripts/kstreams build
//     scripts/kstreams run --bootstrap 127.0.0.1:9092 --input counter-input --output counter-output \
//         --app counter [--client pod-0] [--guarantee eos|alos] [--settings matched|defaults] \
//         [--max-poll-records 500] [--commit-interval-ms N] [--threads 1] [--state-dir DIR] \
//         [--partitions N]
//
// Per input record, the same work as benches/python/counter_app.py and the Rust stage of the
// bench: the state of its key (a RocksDB key-value store, logged to its changelog, no record
// cache: every update is written to the changelog, as ours and Python's are) holds the JSON
// object {"seen":N}; N += 1 (from 0 when absent); one output goes to --output under the same key,
// whose value is the input's JSON object with "seen" added (a tombstone input counts, and its
// output carries only "seen"). Keys are UTF-8 strings; values are encoded as canonical JSON
// (sorted keys, no spaces), so the output bytes equal the other two implementations' for the
// bench's inputs. Exactly-once is Kafka Streams' exactly_once_v2 (one transactional producer per
// stream thread, KIP-447).
//
// --settings matched (the default) sets what the Rust stage runs with, where Kafka Streams'
// defaults differ: max.poll.records 500 (its default 1000); commit.interval.ms 10 (its defaults:
// 100 ms exactly-once, 30 000 ms at-least-once): our stage has no interval, it commits each
// batch as soon as the previous commit returned, every 10-30 ms on the bench's broker, and 10 ms
// is the nearest Kafka Streams comes to that (at 0 it commits after every record it processes:
// 72 records/s measured); producer compression zstd (none); linger.ms 5 (Kafka Streams sets
// 100); max.partition.fetch.bytes 64 KiB (1 MiB) and fetch.max.bytes 1 000 000 (52 428 800) as
// our stage's fetch limits; read_committed at-least-once too (our consumers always read
// committed); session.timeout.ms 10 000 (45 000), ours: Kafka Streams does not leave the group
// when it closes, so a restarted instance waits for its predecessor's session to expire. Not matched: batch.size (the Java producer allocates that much per partition
// batch; librdkafka's equal-named setting only caps a batch), the threads (one stream thread,
// its default; our stage runs a 2-thread runtime). --settings defaults leaves all of these to
// Kafka Streams. --commit-interval-ms and --max-poll-records override either.
//
// Lines on stdout for the bench: `RUN <unix ns>` just before KafkaStreams.start(), `TASKS <n>
// <unix ns>` when the instance first reaches RUNNING (every task restored and processing),
// `RESTORED <records> <unix ns> <unix ns>` when the last state restoration under way ends (the
// changelog records restored since the start, the first restoration's start and this end), and
// `STOPPED <unix ns>` after a clean close. It runs until its stdin closes (then closes cleanly,
// committing what it processed) or it is killed.
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import java.io.IOException;
import java.io.InputStream;
import java.time.Duration;
import java.time.Instant;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.Serializer;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.processor.StateRestoreListener;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.Stores;

public final class CounterApp {
    static final String STORE = "counts";

    /** Canonical JSON objects: parsed into maps, written with sorted keys and no spaces. */
    static final ObjectMapper JSON =
            new ObjectMapper().configure(SerializationFeature.ORDER_MAP_ENTRIES_BY_KEYS, true);

    static final class JsonSerde implements Serde<Map<String, Object>> {
        @Override
        public Serializer<Map<String, Object>> serializer() {
            return (topic, value) -> {
                if (value == null) {
                    return null;
                }
                try {
                    return JSON.writeValueAsBytes(value);
                } catch (IOException e) {
                    throw new IllegalStateException("encode", e);
                }
            };
        }

        @Override
        @SuppressWarnings("unchecked")
        public Deserializer<Map<String, Object>> deserializer() {
            return (topic, bytes) -> {
                if (bytes == null) {
                    return null;
                }
                try {
                    return JSON.readValue(bytes, LinkedHashMap.class);
                } catch (IOException e) {
                    throw new IllegalStateException("decode", e);
                }
            };
        }
    }

    /** The counter: the same transform as the Rust stage's and counter_app.py's. */
    static final class Counter implements Processor<String, Map<String, Object>, String, Map<String, Object>> {
        private ProcessorContext<String, Map<String, Object>> context;
        private KeyValueStore<String, Map<String, Object>> store;

        @Override
        public void init(ProcessorContext<String, Map<String, Object>> context) {
            this.context = context;
            this.store = context.getStateStore(STORE);
        }

        @Override
        public void process(Record<String, Map<String, Object>> record) {
            Map<String, Object> state = store.get(record.key());
            long seen = (state == null ? 0L : ((Number) state.get("seen")).longValue()) + 1;
            Map<String, Object> value = record.value() == null ? new LinkedHashMap<>() : new LinkedHashMap<>(record.value());
            value.put("seen", seen);
            context.forward(record.withValue(value));
            Map<String, Object> next = state == null ? new LinkedHashMap<>() : new LinkedHashMap<>(state);
            next.put("seen", seen);
            store.put(record.key(), next);
        }
    }

    /** Prints `RESTORED` when no restoration is under way any more. */
    static final class Restores implements StateRestoreListener {
        private int active;
        private long records;
        private long firstStart;

        @Override
        public synchronized void onRestoreStart(TopicPartition partition, String store, long start, long end) {
            if (firstStart == 0) {
                firstStart = unixNanos();
            }
            active++;
        }

        @Override
        public void onBatchRestored(TopicPartition partition, String store, long batchEnd, long restored) {
        }

        @Override
        public synchronized void onRestoreEnd(TopicPartition partition, String store, long restored) {
            records += restored;
            if (--active == 0) {
                System.out.println("RESTORED " + records + " " + firstStart + " " + unixNanos());
            }
        }
    }

    static long unixNanos() {
        Instant now = Instant.now();
        return now.getEpochSecond() * 1_000_000_000L + now.getNano();
    }

    static Map<String, String> flags(String[] argv) {
        Map<String, String> flags = new HashMap<>();
        for (int i = 0; i < argv.length; i++) {
            if (!argv[i].startsWith("--")) {
                throw new IllegalArgumentException("unexpected argument " + argv[i]);
            }
            if (i + 1 >= argv.length) {
                throw new IllegalArgumentException(argv[i] + " needs a value");
            }
            flags.put(argv[i], argv[++i]);
        }
        return flags;
    }

    static String need(Map<String, String> flags, String name) {
        String value = flags.get(name);
        if (value == null) {
            throw new IllegalArgumentException(name + " is required");
        }
        return value;
    }

    static Properties config(Map<String, String> flags) {
        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, need(flags, "--app"));
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, need(flags, "--bootstrap"));
        p.put(StreamsConfig.CLIENT_ID_CONFIG, flags.getOrDefault("--client", "bench-pod-0"));
        p.put(StreamsConfig.STATE_DIR_CONFIG, need(flags, "--state-dir"));
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, Integer.parseInt(flags.getOrDefault("--threads", "1")));
        String guarantee = flags.getOrDefault("--guarantee", "eos");
        boolean eos;
        switch (guarantee) {
            case "eos" -> eos = true;
            case "alos" -> eos = false;
            default -> throw new IllegalArgumentException("--guarantee eos|alos, not " + guarantee);
        }
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, eos ? StreamsConfig.EXACTLY_ONCE_V2 : StreamsConfig.AT_LEAST_ONCE);
        String settings = flags.getOrDefault("--settings", "matched");
        switch (settings) {
            case "matched" -> {
                p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 10);
                p.put(StreamsConfig.consumerPrefix(ConsumerConfig.MAX_POLL_RECORDS_CONFIG), 500);
                p.put(StreamsConfig.consumerPrefix(ConsumerConfig.MAX_PARTITION_FETCH_BYTES_CONFIG), 64 << 10);
                p.put(StreamsConfig.consumerPrefix(ConsumerConfig.FETCH_MAX_BYTES_CONFIG), 1_000_000);
                p.put(StreamsConfig.consumerPrefix(ConsumerConfig.ISOLATION_LEVEL_CONFIG), "read_committed");
                p.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), 10_000);
                p.put(StreamsConfig.producerPrefix(ProducerConfig.COMPRESSION_TYPE_CONFIG), "zstd");
                p.put(StreamsConfig.producerPrefix(ProducerConfig.LINGER_MS_CONFIG), 5);
            }
            case "defaults" -> { }
            default -> throw new IllegalArgumentException("--settings matched|defaults, not " + settings);
        }
        if (flags.containsKey("--commit-interval-ms")) {
            p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, Integer.parseInt(flags.get("--commit-interval-ms")));
        }
        if (flags.containsKey("--max-poll-records")) {
            p.put(StreamsConfig.consumerPrefix(ConsumerConfig.MAX_POLL_RECORDS_CONFIG),
                    Integer.parseInt(flags.get("--max-poll-records")));
        }
        return p;
    }

    public static void main(String[] argv) throws Exception {
        Map<String, String> flags = flags(argv);
        Serde<Map<String, Object>> json = new JsonSerde();
        StreamsBuilder builder = new StreamsBuilder();
        builder.addStateStore(Stores.keyValueStoreBuilder(
                Stores.persistentKeyValueStore(STORE), Serdes.String(), json));
        builder.stream(need(flags, "--input"), Consumed.with(Serdes.String(), json))
                .process(Counter::new, STORE)
                .to(need(flags, "--output"), Produced.with(Serdes.String(), json));
        KafkaStreams streams = new KafkaStreams(builder.build(), config(flags));

        streams.setGlobalStateRestoreListener(new Restores());
        AtomicBoolean announced = new AtomicBoolean();
        streams.setStateListener((now, before) -> {
            if (now == KafkaStreams.State.RUNNING && announced.compareAndSet(false, true)) {
                int tasks = streams.metadataForLocalThreads().stream()
                        .mapToInt(t -> t.activeTasks().size()).sum();
                System.out.println("TASKS " + tasks + " " + unixNanos());
            }
        });
        streams.setUncaughtExceptionHandler(e -> {
            System.err.println("the stage failed: " + e);
            e.printStackTrace();
            Runtime.getRuntime().halt(1);
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });

        System.out.println("RUN " + unixNanos());
        streams.start();
        // Until stdin closes: then a clean close (the open transaction committed).
        InputStream in = System.in;
        byte[] sink = new byte[4096];
        while (in.read(sink) >= 0) {
            // discard
        }
        streams.close(Duration.ofSeconds(60));
        System.out.println("STOPPED " + unixNanos());
        System.exit(0);
    }
}
