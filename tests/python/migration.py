"""The Python side of tests/migration_python/: Python flechtwerk 0.17.0 as a config-topic
writer, a config-store reader and a topic reader, each through the package's own code.

    eval "$(scripts/python-ref | grep '^PYTHON_REF=')"
    "$PYTHON_REF" tests/python/migration.py forward --bootstrap B --app A --client C --input I --output O
    "$PYTHON_REF" tests/python/migration.py extractor --bootstrap B --app A --client C --configs T --output O
    "$PYTHON_REF" tests/python/migration.py mqtt-bridge --bootstrap B --mqtt HOST:PORT --app A --client C \
        --configs T --output O
    "$PYTHON_REF" tests/python/migration.py secrets --bootstrap B --app A --client C --input I --output O \
        --configs T --keyring FILE
    "$PYTHON_REF" tests/python/migration.py secret-configs --bootstrap B --topic T --keyring FILE --accounts N
    "$PYTHON_REF" tests/python/migration.py config-store --bootstrap B --topic T [--topic T2]
    "$PYTHON_REF" tests/python/migration.py read --bootstrap B --topic T

- `forward` runs a transformer (exactly-once, like any 0.17 stage) that forwards every input to
  `--output` under its key: `Message(key=msg.key, topic=output, value=msg.value)`, so a value is
  re-encoded as canonical JSON and a tombstone stays a tombstone. Pointed at a compacted topic it
  is a config-topic writer. Runs until SIGTERM or SIGINT (then stops cleanly, exit 0), as
  benches/python/counter_app.py does.
- `extractor` runs the paging extractor of the extractor cut-over (token-sharded, exactly-once
  pages, like any 0.17 extractor; until SIGTERM or SIGINT, then a clean stop). Each config
  `{"feed": k, "items": n, "account": "acct-<k mod 4>"}` (key `feed-k`) is a source of n items; one poll
  emits one page: the next `PAGE_ITEMS` items after the feed's cursor to `--output` under the
  config's key, `{"feed": k, "seq": n, "impl": "python"}`, then the new cursor. The feeds of an
  account share one state (`extract_state_key` returns the account of the config as written):
  `{"cursors": {"feed-k": n, ...}}`. Configs are enriched on their way into the store: the
  account becomes `directory:<account>`, which the state key must not see (CFG-30). The Rust
  child `extractor` of tests/migration_python/ is the same stage (its cut-over and rolling
  scenarios).
- `mqtt-bridge` runs an MQTT → Kafka bridge (`MqttExtractor`, drain limit 50, a cycle every
  200 ms; until SIGTERM or SIGINT, then a clean stop): every MQTT message `{"seq": n}` on a
  config's filter becomes `{"seq": n, "impl": "python"}` on `--output` under the MQTT topic as
  its key. The MQTT
  session is the client id's, the shared-subscription group the app's. The bridge of
  tests/mqtt_rdkafka.rs's Python cut-over (its Rust child `serve`) is the same stage.
- `secrets` runs the ledger of the secrets scenario (a transformer, exactly-once; until SIGTERM or
  SIGINT, then a clean stop) with the application keyring read from `--keyring` (a flechtctl
  keyring file, given as `Flechtwerk.of(keyring=...)`). Each input `{"i": i}` under an account's
  key joins the account's config from `--configs`, whose `api_key` is `ENCRYPTED(STR,
  scope="vendor")`; the account's state holds `seen` and `ledger`, an `ENCRYPTED(STR,
  scope="ledger")` text `ledger:<key>:<total>` (the running sum of the inputs' `i`). The output
  under the same key is `{"i", "seen", "total", "proof", "impl": "python", "state_kid",
  "config_kid"}`: `proof` the first 16 hex digits of SHA-256 over `<api_key>|<total>` (so the
  decrypted config and state show from outside, the plaintexts do not), the kids those of the
  state and config tokens read (`""` for no state). The Rust child `secrets` of
  tests/migration_python/ is the same stage.
- `secret-configs` writes one config per account (`acct-0` ... `acct-<N-1>`), `{"account": key,
  "api_key": ENCRYPTED("apikey-<key>-s3cr3t")}`, sealed by Python's codec under `--keyring`'s
  primary, to the config topic `--topic`, and exits.
- `config-store` bootstraps a `ConfigStore` from the topics with the package's
  `bootstrap_config_store` (what a transformer or extractor runs at startup: compaction by wire
  key across the topics, tombstone forms, strict decoding with the default raising policy, no
  enrichment) and prints it as JSON: `{"entries": {key: value_hex}, "nbytes": n, "survivors": n}`,
  the values being the store's bytes (`encode_json` of each surviving config).
- `read` reads a topic from the beginning to its end (read_committed, the package's `read_to_end`)
  and decodes every record with the package's `parse_message` (strict; the default policy
  raises on an undecodable record) and prints JSON: `{"records": [{"partition", "offset", "key",
  "value_hex" (encode_json of the decoded Event; null for a tombstone), "timestamp_ms"}]}`.
"""
import argparse
import asyncio
import faulthandler
import io
import json
import logging
import signal
import sys

from aiokafka import AIOKafkaConsumer

from datetime import timedelta

from flechtwerk import (Config, Event, Extractor, Flechtwerk, IncomingMessage, Message, MqttBrokerConfig, State,
                        Transformer)
from flechtwerk.attribute import DICT, INT, STR, Attribute
from flechtwerk.configs import ConfigStore, bootstrap_config_store
from flechtwerk.kafka import encode_json, parse_message, read_to_end, topic_partitions


def forwarder(input_topic: str, output_topic: str) -> Transformer:
    async def forward(msg: IncomingMessage, state):
        yield Message(key=msg.key, topic=output_topic, value=msg.value)

    return Transformer.of(input_topics=[input_topic], transform=forward)


async def serve_forward(args: argparse.Namespace) -> None:
    app = Flechtwerk.of(
        application_id=args.app,
        bootstrap_servers=args.bootstrap,
        client_id=args.client,
        stage=forwarder(args.input, args.output),
    )
    await serve(app)


FEED = Attribute("feed", INT)
ITEMS = Attribute("items", INT)
SEQ = Attribute("seq", INT)
IMPL = Attribute("impl", STR)
ACCOUNT = Attribute("account", STR)
CURSORS = Attribute("cursors", DICT(INT))
PAGE_ITEMS = 5
"""Items per page, one page per poll (tests/migration_python/main.rs: `PAGE_ITEMS`)."""
ITEM_PAUSE_S = 0.01
"""A pause after each item, so that a page's transaction stays open long enough to be killed in."""


def pager(configs_topic: str, output_topic: str) -> Extractor:
    async def poll(config: Config, state: State):
        feed, items = config[FEED], config[ITEMS]
        key = f"feed-{feed}"
        cursors = dict(state.get(CURSORS, {}))
        cursor = cursors.get(key, 0)
        last = min(cursor + PAGE_ITEMS, items)
        if last <= cursor:
            return
        for seq in range(cursor + 1, last + 1):
            yield Message(key=key, topic=output_topic, value=Event({FEED: feed, SEQ: seq, IMPL: "python"}))
            await asyncio.sleep(ITEM_PAUSE_S)
        cursors[key] = last
        new_state = State(state)
        new_state[CURSORS] = cursors
        yield new_state

    def state_key(msg: IncomingMessage) -> str:
        return msg.value.get(ACCOUNT) or msg.key

    async def enrich(config: Config) -> Config:
        enriched = Config(config)
        if config.get(ACCOUNT) is not None:
            enriched[ACCOUNT] = f"directory:{config[ACCOUNT]}"
        return enriched

    return Extractor.of(config_topics=[configs_topic], poll=poll, extract_state_key=state_key,
                        enrich_config=enrich)


async def serve_extractor(args: argparse.Namespace) -> None:
    app = Flechtwerk.of(
        application_id=args.app,
        bootstrap_servers=args.bootstrap,
        client_id=args.client,
        poll_interval=timedelta(milliseconds=100),
        stage=pager(args.configs, args.output),
    )
    await serve(app)


I = Attribute("i", INT)
SEEN = Attribute("seen", INT)
TOTAL = Attribute("total", INT)
PROOF = Attribute("proof", STR)
STATE_KID = Attribute("state_kid", STR)
CONFIG_KID = Attribute("config_kid", STR)


def secret_attributes():
    # Imported here: the other commands must not need the secrets extra.
    from flechtwerk.secrets import ENCRYPTED
    return (Attribute("api_key", ENCRYPTED(STR, scope="vendor")),
            Attribute("ledger", ENCRYPTED(STR, scope="ledger")))


def load_keyring(path: str):
    from flechtwerk.secrets import Keyring
    with open(path, encoding="utf-8") as f:
        return Keyring.from_json(f.read())


def proof(api_key: str, total: int) -> str:
    import hashlib
    return hashlib.sha256(f"{api_key}|{total}".encode()).hexdigest()[:16]


def ledger(input_topic: str, output_topic: str, configs_topic: str) -> Transformer:
    from flechtwerk.secrets import kid_of
    api_key_attr, ledger_attr = secret_attributes()
    stage: Transformer

    async def transform(msg: IncomingMessage, state: State):
        config = stage.configs.get(msg.key)
        if config is None:
            raise LookupError(f"no config for {msg.key!r}")
        api_key = config[api_key_attr]  # decrypts the config's token (whoever sealed it)
        seen = state.get(SEEN, 0) + 1
        previous = state.get(ledger_attr)  # decrypts the state's token (whoever wrote it)
        total = msg.value[I]
        if previous is not None:
            prefix = f"ledger:{msg.key}:"
            if not previous.startswith(prefix):
                raise ValueError(f"the ledger of {msg.key!r} belongs to another key")
            total += int(previous[len(prefix):])
        state_token = state.raw.get("ledger")
        yield Message(key=msg.key, topic=output_topic, value=Event({
            I: msg.value[I], SEEN: seen, TOTAL: total, PROOF: proof(api_key, total), IMPL: "python",
            STATE_KID: "" if state_token is None else kid_of(state_token),
            CONFIG_KID: kid_of(config.raw["api_key"]),
        }))
        new_state = State(state)
        new_state[SEEN] = seen
        new_state[ledger_attr] = f"ledger:{msg.key}:{total}"
        yield new_state

    stage = Transformer.of(input_topics=[input_topic], transform=transform)
    stage.config_topics = [configs_topic]
    return stage


async def serve_secrets(args: argparse.Namespace) -> None:
    app = Flechtwerk.of(
        application_id=args.app,
        bootstrap_servers=args.bootstrap,
        client_id=args.client,
        keyring=load_keyring(args.keyring),
        stage=ledger(args.input, args.output, args.configs),
    )
    await serve(app)


async def secret_configs(args: argparse.Namespace) -> None:
    from aiokafka import AIOKafkaProducer
    from flechtwerk.secrets import install_keyring
    install_keyring(load_keyring(args.keyring))
    api_key_attr, _ = secret_attributes()
    producer = AIOKafkaProducer(bootstrap_servers=args.bootstrap, enable_idempotence=True)
    await producer.start()
    try:
        for n in range(args.accounts):
            key = f"acct-{n}"
            config = Config({ACCOUNT: key, api_key_attr: f"apikey-{key}-s3cr3t"})
            await producer.send_and_wait(args.topic, key=key.encode(), value=encode_json(config))
    finally:
        await producer.stop()


async def serve(app: Flechtwerk) -> None:
    task = asyncio.current_task()
    assert task is not None
    stop = asyncio.Event()

    def on_signal() -> None:
        stop.set()
        task.cancel()

    def dump_tasks() -> None:
        # SIGUSR1 (tests/migration_python/process.rs sends it when a clean stop is late): every
        # asyncio task's stack and every thread's, so a stop that hangs says where.
        log = logging.getLogger("migration")
        for t in asyncio.all_tasks():
            stack = io.StringIO()
            t.print_stack(file=stack)
            log.warning("task %r:\n%s", t.get_name(), stack.getvalue())
        faulthandler.dump_traceback(all_threads=True)

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal)
    loop.add_signal_handler(signal.SIGUSR1, dump_tasks)
    try:
        await app.run()
    except asyncio.CancelledError:
        if not stop.is_set():
            raise
        logging.getLogger("migration").info("stopped by signal; clean shutdown done")


async def serve_mqtt_bridge(args: argparse.Namespace) -> None:
    from flechtwerk.mqtt import MqttExtractor  # needs paho (flechtwerk[mqtt])

    def relay(config: Config, topic: str, payload) -> Message:
        return Message(key=topic, topic=args.output, value=Event({SEQ: payload[SEQ], IMPL: "python"}))

    host, port = args.mqtt.rsplit(":", 1)
    app = Flechtwerk.of(
        application_id=args.app,
        bootstrap_servers=args.bootstrap,
        client_id=args.client,
        mqtt=MqttBrokerConfig(broker=host, port=int(port)),
        poll_interval=timedelta(milliseconds=200),
        stage=MqttExtractor.of(config_topics=[args.configs], relay=relay, drain_limit=50),
    )
    await serve(app)


def raise_invalid(error):
    raise error


async def identity(config: Config) -> Config:
    return config


def consumer(bootstrap: str) -> AIOKafkaConsumer:
    # What the package builds for its config and restore consumers: group-less, read_committed.
    return AIOKafkaConsumer(bootstrap_servers=bootstrap, client_id="migration-reader", group_id=None,
                            isolation_level="read_committed", enable_auto_commit=False)


async def config_store(args: argparse.Namespace) -> dict:
    reader = consumer(args.bootstrap)
    await reader.start()
    try:
        store = ConfigStore()
        survivors = await bootstrap_config_store(reader, args.topic, store, identity, raise_invalid)
        return {
            "entries": {key: store._raw[key].hex() for key in store._raw},
            "nbytes": store.nbytes,
            "survivors": len(survivors),
        }
    finally:
        await reader.stop()


async def read(args: argparse.Namespace) -> dict:
    reader = consumer(args.bootstrap)
    await reader.start()
    try:
        tps = await topic_partitions(reader, [args.topic])
        if not tps:
            raise SystemExit(f"topic {args.topic} does not exist")
        records = []

        async def collect(raw) -> None:
            msg = parse_message(raw, raise_invalid)
            assert msg is not None  # the raising policy never skips
            records.append({
                "partition": raw.partition,
                "offset": raw.offset,
                "key": msg.key,
                "value_hex": None if msg.value is None else encode_json(msg.value).hex(),
                "timestamp_ms": raw.timestamp,
            })

        await read_to_end(reader, tps, collect)
        records.sort(key=lambda r: (r["partition"], r["offset"]))
        return {"records": records}
    finally:
        await reader.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    fwd = sub.add_parser("forward")
    for name in ("--bootstrap", "--app", "--client", "--input", "--output"):
        fwd.add_argument(name, required=True)
    ext = sub.add_parser("extractor")
    for name in ("--bootstrap", "--app", "--client", "--configs", "--output"):
        ext.add_argument(name, required=True)
    bridge = sub.add_parser("mqtt-bridge")
    for name in ("--bootstrap", "--mqtt", "--app", "--client", "--configs", "--output"):
        bridge.add_argument(name, required=True)
    sec = sub.add_parser("secrets")
    for name in ("--bootstrap", "--app", "--client", "--input", "--output", "--configs", "--keyring"):
        sec.add_argument(name, required=True)
    seccfg = sub.add_parser("secret-configs")
    for name in ("--bootstrap", "--topic", "--keyring"):
        seccfg.add_argument(name, required=True)
    seccfg.add_argument("--accounts", type=int, required=True)
    store = sub.add_parser("config-store")
    store.add_argument("--bootstrap", required=True)
    store.add_argument("--topic", action="append", required=True)
    rd = sub.add_parser("read")
    rd.add_argument("--bootstrap", required=True)
    rd.add_argument("--topic", required=True)
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args()
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # The commands that print no result (the stages run until SIGTERM or SIGINT); the others
    # print JSON below.
    serving = {"forward": serve_forward, "extractor": serve_extractor, "secrets": serve_secrets,
               "secret-configs": secret_configs, "mqtt-bridge": serve_mqtt_bridge}
    if args.command in serving:
        asyncio.run(serving[args.command](args))
        return 0
    result = asyncio.run(config_store(args) if args.command == "config-store" else read(args))
    json.dump(result, sys.stdout, ensure_ascii=False, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
