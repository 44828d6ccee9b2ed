#!/usr/bin/env python3
# Golden-vector generator: runs the *Python reference implementation* of
# flechtwerk and records what it does, byte for byte, so the Rust port can be
# checked against it (tests/golden/vectors.json).
#
# How to run (the reference lives in a venv OUTSIDE the repo, made by scripts/python-ref):
#
#   eval "$(scripts/python-ref | grep '^PYTHON_REF=')"
#   "$PYTHON_REF" tests/golden/generate.py          # writes
#   "$PYTHON_REF" tests/golden/generate.py --check  # verifies
#
# Why 3.13.0 and not 3.12.1: flechtwerk 0.17.0 does not even import on CPython
# 3.12.1 — `Codec[str](...)` (a frozen, slots=True generic dataclass) hits the
# 3.12.1 typing/dataclass bug "TypeError: super(type, obj): obj must be an
# instance or subtype of type" when typing sets __orig_class__. 3.13.0 works.
#
# Output: tests/golden/vectors.json (next to this script). Deterministic: every
# random input comes from a fixed seed; re-running produces identical bytes
# (checked by `--check`, which regenerates in memory and diffs).
#
# Conventions in vectors.json:
#   * raw bytes are lowercase hex strings ("*_hex"); null = absent (Kafka null)
#   * errors are {"type": <exception class>, "message": str(exc), ...}, with
#     "cause" for a chained __cause__, and extra structured fields for
#     UnicodeDecodeError (start/end/reason) and JSONDecodeError (msg/pos/lineno/colno)
#   * "stage" says where a canonical_json failure happened: "decode" (the strict
#     value decoder, kafka.decode_record) or "encode" (kafka.encode_json)
#
# Versions recorded under "meta". Results depend on CPython 3.13.0 (datetime
# fromisoformat grammar, float repr, json module) — do not regenerate with a
# different interpreter without reviewing the diff.
import os
import sys

# Pin str hashing so set iteration order (and e.g. the operand order in a
# "'<' not supported between instances of ..." message) is reproducible.
if os.environ.get("PYTHONHASHSEED") != "0":
    os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, "PYTHONHASHSEED": "0"})

import asyncio
import base64
import json
import random
import struct
from datetime import date, datetime, time, timedelta, timezone
from importlib.metadata import version
from pathlib import Path
from zoneinfo import ZoneInfo

from aiokafka.partitioner import murmur2 as aiokafka_murmur2

import flechtwerk
from flechtwerk.attribute import (
    ANY, BOOL, BYTES, DATE, DATETIME, DICT, FLOAT, INT, LIST, RECORD, SET, STR, TIME, TUPLE, ZONE_INFO,
    Attribute, Record,
)
from flechtwerk.configs import ConfigStore, bootstrap_config_store, drain_config_updates
from flechtwerk.extractor import token_for
from flechtwerk.kafka import (
    datetime_to_millis, decode_key, decode_record, encode_json, encode_value, is_tombstone,
    millis_to_datetime, parse_message,
)
from flechtwerk.state import deserialize, serialize
from flechtwerk.state import ChangelogStateStore
from flechtwerk.testing import (
    FakeKafkaConsumer, FakeKafkaProducer, InMemoryStateStore, RecordingObserver, make_record,
)
from flechtwerk.transformer import Task, Transformer, TransformerRunner
from flechtwerk.types import Config, Event, InvalidMessageError, Message, State
from aiokafka import ConsumerRecord, TopicPartition

OUT = Path(__file__).with_name("vectors.json")


# --------------------------------------------------------------------------- helpers

def hx(b: bytes | None) -> str | None:
    return None if b is None else b.hex()


def err(e: BaseException) -> dict:
    d: dict = {"type": type(e).__name__, "message": str(e)}
    if isinstance(e, UnicodeDecodeError):
        d.update(encoding=e.encoding, start=e.start, end=e.end, reason=e.reason)
    if isinstance(e, UnicodeEncodeError):
        d.update(encoding=e.encoding, start=e.start, end=e.end, reason=e.reason)
    if isinstance(e, json.JSONDecodeError):
        d.update(msg=e.msg, pos=e.pos, lineno=e.lineno, colno=e.colno)
    if e.__cause__ is not None:
        d["cause"] = err(e.__cause__)
    return d


def text_or_none(b: bytes) -> str | None:
    """Readable form of bytes when they are valid UTF-8 (for humans only)."""
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return None


# --------------------------------------------------------------------------- a. canonical_json

def canonical_inputs() -> list[tuple[str, bytes]]:
    c: list[tuple[str, bytes]] = []
    add = lambda name, s: c.append((name, s.encode("utf-8") if isinstance(s, str) else s))
    add("empty_object", "{}")
    add("empty_object_spaced", "{ }")
    add("simple_sorted", '{"a":1,"b":2}')
    add("simple_unsorted", '{"b":2,"a":1}')
    add("nested_unsorted", '{"z":{"y":1,"x":{"b":[{"d":1,"c":2}],"a":null}},"a":[3,2,1]}')
    add("whitespace_laden", ' \t\n\r{ "b" : [ 1 , 2 ] ,\n\t"a" : { } , "c" : [ ] }\r\n ')
    add("duplicate_keys_last_wins", '{"a":1,"b":2,"a":3}')
    add("duplicate_keys_nested", '{"o":{"k":"first","k":"second"}}')
    add("true_false_null", '{"t":true,"f":false,"n":null}')
    add("empty_containers", '{"o":{},"l":[],"s":"","ol":[{}],"lo":{"x":[]}}')
    add("unicode_keys_utf16_vs_codepoint", '{"\U0001F600":1,"\uffff":2,"\ue000":3,"\U00010000":4}')
    add("unicode_keys_escaped_form", '{"\\ud83d\\ude00":1,"\\uffff":2}')
    add("unicode_combining", '{"e\u0301":1,"\u00e9":2,"e":3}')
    add("unicode_values_raw", '{"s":"M\u00fcller \u2713 \U0001F600 \u4e2d\u6587"}')
    add("unicode_values_escaped", '{"s":"M\\u00fcller \\u2713 \\ud83d\\ude00"}')
    add("control_chars_escaped_input", '{"s":"' + "".join(f"\\u{i:04x}" for i in range(0x20)) + '"}')
    add("short_escapes", '{"s":"\\b\\f\\n\\r\\t\\"\\\\\\/"}')
    add("del_u2028_u2029", '{"s":"\\u007f\\u2028\\u2029\u0080\u00a0"}')
    add("raw_del_u2028_in_input", '{"s":"\x7f\u2028\u2029"}')
    add("backslash_and_quote_keys", '{"a\\"b":1,"a\\\\b":2}')
    add("raw_control_char_in_string", '{"s":"a\x01b"}')
    add("raw_newline_in_string", '{"s":"a\nb"}')
    add("raw_tab_in_string", '{"s":"a\tb"}')
    add("lone_high_surrogate_escape", '{"s":"\\ud800"}')
    add("lone_low_surrogate_escape", '{"s":"\\udc00"}')
    add("lone_surrogate_in_key", '{"\\ud800":1}')
    add("reversed_surrogate_pair", '{"s":"\\ude00\\ud83d"}')
    add("valid_surrogate_pair_escape", '{"s":"\\ud83d\\ude00"}')
    add("uppercase_hex_escape", '{"s":"\\u00E9\\u00e9"}')
    for f in ["0.1", "1.0", "-0.0", "0.0", "1e16", "1e15", "1E16", "123456789012345680.0", "1e-4", "1e-5",
              "0.0001", "0.00001", "5e-324", "2.5e-7", "1.7976931348623157e308", "100.0", "1e22", "1e21",
              "1e2", "1E+2", "1.5e300", "9007199254740993.0", "3.141592653589793238462643383279",
              "0.30000000000000004", "1e-400", "2e-324", "1.0e0", "12345678901234567.0", "1234567890123456.0",
              "-1.5", "0.5e-6"]:
        add(f"float_{f}", '{"x":' + f + '}')
    add("float_1E400_inf", '{"x":1E400}')
    add("float_neg_1e400_inf", '{"x":-1e400}')
    add("float_2e308_inf", '{"x":2e308}')
    for i in ["0", "-0", "1", "-1", "9223372036854775807", "-9223372036854775808", "18446744073709551615",
              "18446744073709551616", "-18446744073709551617", "123456789012345678901234567890",
              "-123456789012345678901234567890"]:
        add(f"int_{i}", '{"x":' + i + '}')
    add("int_4300_digits", '{"x":' + "9" * 4300 + '}')
    add("int_4301_digits", '{"x":' + "9" * 4301 + '}')
    add("nan_literal", '{"x":NaN}')
    add("infinity_literal", '{"x":Infinity}')
    add("neg_infinity_literal", '{"x":-Infinity}')
    add("nan_nested", '{"a":[1,{"b":NaN}]}')
    add("nan_lowercase", '{"x":nan}')
    add("leading_zero", '{"x":01}')
    add("plus_sign", '{"x":+1}')
    add("trailing_dot", '{"x":1.}')
    add("leading_dot", '{"x":.5}')
    add("hex_number", '{"x":0x10}')
    add("trailing_comma_object", '{"a":1,}')
    add("trailing_comma_array", '{"a":[1,]}')
    add("single_quotes", "{'a':1}")
    add("unquoted_key", '{a:1}')
    add("comment", '{"a":1 /* c */}')
    add("trailing_garbage", '{"a":1}x')
    add("two_objects", '{}{}')
    add("nul_escape", '{"\\u0000":"\\u0000"}')
    add("nested_depth_100", '{"x":' + "[" * 100 + "]" * 100 + '}')
    # Depth limits are CPython artefacts (Record.wrap's recursive ANY walk hits the
    # 1000-frame recursion limit at ~497 levels from a shallow stack; json.loads at
    # ~10000). RecursionError is NOT a ValueError: it escapes on_invalid_message.
    add("nested_depth_400", '{"x":' + "[" * 400 + "]" * 400 + '}')
    add("nested_depth_600", '{"x":' + "[" * 600 + "]" * 600 + '}')
    add("nested_depth_1000", '{"x":' + "[" * 1000 + "]" * 1000 + '}')
    add("nested_depth_100000", '{"x":' + "[" * 100000 + "]" * 100000 + '}')
    add("array_top_level", "[1,2,3]")
    add("scalar_top_level", "42")
    add("string_top_level", '"s"')
    add("null_top_level", "null")
    add("many_keys_sort", "{" + ",".join(f'"{k}":{i}' for i, k in enumerate(
        ["b", "a", "B", "A", "aa", "a0", "_", "~", "\u00e4", "\u00c4", "10", "9", "", " "])) + "}")
    add("big_mixed", '{"id":"x-1","ts":"2024-06-15T14:30:45Z","vals":[1,2.5,-3e-7,true,null,"s"],'
                     '"meta":{"k\u00e9y":{"z":0,"a":-0.0}}}')
    return c


def gen_canonical_json() -> list[dict]:
    out = []
    for name, raw in canonical_inputs():
        case: dict = {"name": name, "input_hex": raw.hex()}
        if len(raw) < 300:
            case["input_text"] = text_or_none(raw)
        try:
            rec = decode_record(raw, Event)
        except RecursionError as e:  # not a ValueError: escapes the invalid-message hook
            case["error"] = {**err(e), "stage": "decode"}
            out.append(case)
            continue
        except ValueError as e:
            case["error"] = {**err(e), "stage": "decode"}
            out.append(case)
            continue
        try:
            b = encode_json(rec)
        except (ValueError, RecursionError) as e:
            case["error"] = {**err(e), "stage": "encode"}
        else:
            case["ok"] = b.hex()
            if len(b) < 300:
                case["ok_text"] = b.decode("utf-8")
        out.append(case)
    return out


# --------------------------------------------------------------------------- float_repr

def gen_float_repr() -> list[dict]:
    """float → the JSON text Python's encoder writes (float.__repr__)."""
    rng = random.Random(20240615)
    vals: list[float] = [0.0, -0.0, 1.0, -1.0, 0.1, 0.2, 0.3, 1 / 3, 2 / 3, 100.0, 1e15, 1e16, 1e17, 9999999999999998.0,
                         1e-4, 1e-5, 0.0001234, 0.00001234, 5e-324, 2.2250738585072014e-308,
                         1.7976931348623157e308, 1e22, 1e23, 123456789012345680.0, 2.5e-7, 4.35, 0.1 + 0.2,
                         9007199254740992.0, 9007199254740993.0, 1.5, 12345.678, 1e300, 1e-300, 299792458.0]
    for _ in range(150):
        vals.append(struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0])
    for _ in range(50):
        vals.append(round(rng.uniform(-1e6, 1e6), rng.randint(0, 8)))
    for e in range(-25, 26):
        vals.append(float(f"1e{e}"))
        vals.append(float(f"1.2345e{e}"))
    out = []
    for v in vals:
        if v != v or v in (float("inf"), float("-inf")):
            continue
        bits = struct.pack(">d", v).hex()
        out.append({"bits_hex": bits, "json": json.dumps(v, allow_nan=False)})
    return out


# --------------------------------------------------------------------------- b. value_decode

def gen_value_decode() -> list[dict]:
    inputs: list[tuple[str, bytes | None]] = [
        ("absent_none", None),
        ("empty_bytes", b""),
        ("empty_object", b"{}"),
        ("empty_object_spaced", b"{ }"),
        ("empty_object_padded", b" {} "),
        ("int_scalar", b"42"),
        ("array", b"[1,2,3]"),
        ("string_scalar", b'"s"'),
        ("null_json", b"null"),
        ("true_json", b"true"),
        ("cesu8_surrogate_in_string", b'"\xed\xa0\x80"'),
        ("cesu8_surrogate_in_object", b'{"a":"\xed\xa0\x80"}'),
        ("cesu8_surrogate_pair", b'{"a":"\xed\xa0\xbd\xed\xb8\x80"}'),
        ("invalid_utf8_ff", b'{"a":"\xff"}'),
        ("invalid_utf8_truncated", b'{"a":"\xe2\x82"}'),
        ("invalid_utf8_truncated_at_end", b'{"a":1}\xe2\x82'),
        ("overlong_slash", b'{"a":"\xc0\xaf"}'),
        ("overlong_nul", b'{"a":"\xc0\x80"}'),
        ("above_10ffff", b'{"a":"\xf4\x90\x80\x80"}'),
        ("utf16le_bom_object", "{}".encode("utf-16")),
        ("utf16le_no_bom", "{}".encode("utf-16-le")),
        ("utf8_bom_object", b"\xef\xbb\xbf{}"),
        ("utf8_bom_object_with_data", b'\xef\xbb\xbf{"a":1}'),
        ("trailing_garbage", b'{"a":1} x'),
        ("trailing_nul", b'{"a":1}\x00'),
        ("leading_nul", b'\x00{"a":1}'),
        ("truncated_json", b'{"a":'),
        ("not_json", b"{not json"),
        ("whitespace_only", b"   "),
        ("lone_surrogate_escape", b'{"s":"\\ud800"}'),
        ("valid_surrogate_pair_escape", b'{"s":"\\ud83d\\ude00"}'),
        ("nan_value", b'{"x":NaN}'),
        ("infinity_value", b'{"x":Infinity}'),
        ("float_overflow_value", b'{"x":1E400}'),
        ("int_4301_digits", b'{"x":' + b"1" * 4301 + b"}"),
        ("valid_nested", b'{"b":{"d":1,"c":[true,null]},"a":"\xc3\xbc"}'),
        ("nul_in_string_escape", b'{"a":"\\u0000"}'),
        ("raw_control_char", b'{"a":"\x1f"}'),
        ("raw_del_char", b'{"a":"\x7f"}'),
        ("nonbreaking_space_outside", b'\xc2\xa0{}'),
        ("vertical_tab_outside", b'\x0b{}'),
        ("formfeed_outside", b'\x0c{}'),
    ]
    out = []
    seen: list[dict] = []

    def on_invalid(error: InvalidMessageError):
        seen.append({"part": error.part, "error": err(error)})
        return None  # skip — lets us observe without raising

    for name, raw in inputs:
        seen.clear()
        case: dict = {"name": name, "value_hex": hx(raw), "is_tombstone": is_tombstone(raw)}
        rec = make_record(key=b"k", value=raw, topic="t", partition=0, offset=7)
        try:
            msg = parse_message(rec, on_invalid)
        except BaseException as e:  # non-ValueError escapes the hook (e.g. RecursionError)
            case["result"] = "uncaught"
            case["error"] = err(e)
            out.append(case)
            continue
        if msg is None:
            case["result"] = "invalid"
            assert len(seen) == 1
            case["part"] = seen[0]["part"]
            case["error"] = seen[0]["error"]
        elif msg.value is None:
            case["result"] = "tombstone"
        else:
            case["result"] = "ok"
            try:
                case["reencoded_hex"] = encode_json(msg.value).hex()
            except ValueError as e:
                case["reencode_error"] = err(e)
        out.append(case)
    return out


# --------------------------------------------------------------------------- c. key_decode

def gen_key_decode() -> list[dict]:
    inputs: list[tuple[str, bytes | None]] = [
        ("absent", None), ("empty", b""), ("ascii", b"tenant/channel"), ("utf8", "\u00fctf-8 \u2713".encode()),
        ("non_bmp", "\U0001F600".encode()), ("ff_fe", b"\xff\xfe"), ("ff", b"\xff"), ("nul_byte", b"a\x00b"),
        ("only_nul", b"\x00"), ("overlong_slash", b"\xc0\xaf"), ("overlong_nul", b"\xc0\x80"),
        ("overlong_3byte", b"\xe0\x80\xaf"), ("overlong_4byte", b"\xf0\x80\x80\xaf"),
        ("cesu8_surrogate", b"\xed\xa0\x80"), ("cesu8_pair", b"\xed\xa0\xbd\xed\xb8\x80"),
        ("above_10ffff", b"\xf4\x90\x80\x80"), ("f5_byte", b"\xf5\x80\x80\x80"),
        ("truncated_2byte", b"a\xc3"), ("truncated_3byte", b"\xe2\x82"), ("lone_continuation", b"\x80"),
        ("utf8_bom", b"\xef\xbb\xbfk"), ("json_quoted", b'"k"'), ("latin1_umlaut", b"M\xfcller"),
        ("valid_then_invalid", b"abc\xffdef"), ("max_codepoint", "\U0010FFFF".encode()),
        ("noncharacter_fffe", "\ufffe".encode()), ("replacement_char", "\ufffd".encode()),
    ]
    out = []
    for name, raw in inputs:
        case: dict = {"name": name, "key_hex": hx(raw)}
        try:
            k = decode_key(raw)
            case["ok"] = k
            case["ok_hex"] = k.encode("utf-8").hex()
        except ValueError as e:
            case["error"] = err(e)
        # and as the mediated key decoder sees it (parse_message, skipping handler)
        seen = []
        rec = make_record(key=raw, value=b"{}", topic="t", partition=1, offset=2)
        msg = parse_message(rec, lambda e: seen.append(e.part))
        case["parse_message"] = "skipped" if msg is None else "ok"
        case["hook_parts"] = seen
        out.append(case)
    return out


# --------------------------------------------------------------------------- d. is_tombstone

def gen_is_tombstone() -> list[dict]:
    inputs = [None, b"", b"{}", b"{ }", b"null", b" {}", b"{} ", b"{}\n", b"[]", b"0", b'""', b"{\"a\":1}",
              b"\x00", b"\xef\xbb\xbf{}"]
    out = [{"value_hex": hx(v), "is_tombstone": is_tombstone(v)} for v in inputs]
    # str forms (test doubles may carry str): recorded for completeness
    out += [{"value_str": s, "is_tombstone": is_tombstone(s)} for s in ["", "{}", "{ }", "null"]]
    return out


# --------------------------------------------------------------------------- e. token_for / murmur2

M32 = 0xFFFFFFFF


def java_murmur2(data: bytes) -> int:
    """Independent port of org.apache.kafka.common.utils.Utils.murmur2 (signed int32 result)."""
    def i32(x: int) -> int:
        x &= M32
        return x - (1 << 32) if x & 0x80000000 else x

    length = len(data)
    seed = 0x9747B28C
    m = 0x5BD1E995
    r = 24
    h = (seed ^ length) & M32
    for i in range(length // 4):
        i4 = i * 4
        k = data[i4] | (data[i4 + 1] << 8) | (data[i4 + 2] << 16) | (data[i4 + 3] << 24)
        k = (k * m) & M32
        k ^= k >> r  # >>> on the unsigned view
        k = (k * m) & M32
        h = (h * m) & M32
        h ^= k
    rem = length % 4
    base = length & ~3
    if rem == 3:
        h ^= data[base + 2] << 16
    if rem >= 2:
        h ^= data[base + 1] << 8
    if rem >= 1:
        h ^= data[base]
        h = (h * m) & M32
    h ^= h >> 13
    h = (h * m) & M32
    h ^= h >> 15
    return i32(h)


KAFKA_MURMUR2_VECTORS = [
    # From Apache Kafka's own unit test UtilsTest.testMurmur2
    # (clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.java, apache/kafka;
    # the same six pairs are cited by kafka_ex at commit 8ab0994919752cd4870e771221ba934a6a539a67, L66-L78).
    ("21", -973932308),
    ("foobar", -790332482),
    ("a-little-bit-long-string", -985981536),
    ("a-little-bit-longer-string", -1486304829),
    ("lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    ("abc", 479470107),
]


def gen_token_for() -> dict:
    rng = random.Random(42)
    keys: list[str] = ["tenant/channel", "a", "key42", "\u00fctf-8 \u2713", "x" * 100, "", "21", "foobar",
                       "\U0001F600", "\u00e9", "e\u0301", "\x00", "tenant-0001/ch-17", " "]
    base = "abcdefghijklmnopqrstuvwxyz0123456789ABCD"  # 40 chars
    keys += [base[:n] for n in range(0, 41)]
    alphabet = ["a", "Z", "0", "/", "-", "\u00fc", "\u00df", "\u2713", "\u4e2d", "\U0001F600", "\u0301", "\uffff",
                "\U0010FFFF", " ", "\t"]
    for _ in range(40):
        keys.append("".join(rng.choice(alphabet) for _ in range(rng.randint(1, 24))))
    seen = set()
    uniq = [k for k in keys if not (k in seen or seen.add(k))]
    ns = [1, 2, 3, 7, 8, 12, 16, 100, 1000]
    cases = []
    for k in uniq:
        data = k.encode("utf-8")
        signed = java_murmur2(data)
        unsigned = aiokafka_murmur2(data)
        assert unsigned == signed & M32, (k, signed, unsigned)
        tokens = {}
        for n in ns:
            t = token_for(k, n)
            assert t == ((signed & 0x7FFFFFFF) % n)
            tokens[str(n)] = t
        cases.append({"key": k, "key_hex": data.hex(), "murmur2_signed": signed, "murmur2_unsigned": unsigned,
                      "positive": signed & 0x7FFFFFFF, "token_for": tokens})
    kafka = []
    for s, expected in KAFKA_MURMUR2_VECTORS:
        got = java_murmur2(s.encode())
        assert got == expected, (s, got, expected)
        assert aiokafka_murmur2(s.encode()) == expected & M32
        kafka.append({"key": s, "key_hex": s.encode().hex(), "murmur2_signed": expected})
    return {
        "comment": "token_for(key, N) = (murmur2(utf8(key)) & 0x7FFFFFFF) % N. murmur2_signed = Java int "
                   "(Kafka Utils.murmur2); murmur2_unsigned = aiokafka's return value (same 32 bits). "
                   "Cross-checked in the generator against an independent Java-murmur2 port.",
        "cases": cases,
        "kafka_utils_test_murmur2": {
            "comment": "Apache Kafka UtilsTest.testMurmur2 (clients/src/test/java/org/apache/kafka/common/utils/"
                       "UtilsTest.java); found via code search, also cited by kafka_ex test at apache/kafka commit "
                       "8ab0994919752cd4870e771221ba934a6a539a67 L66-L78. Verified here against both ports.",
            "cases": kafka,
        },
    }


# --------------------------------------------------------------------------- f/g. datetime / date / time

def dt_fields(d: datetime) -> dict:
    off = d.utcoffset()
    return {"isoformat": d.isoformat(), "tzname": d.tzname(),
            "utcoffset_seconds": None if off is None else off.total_seconds(),
            "microsecond": d.microsecond}


def gen_datetime() -> dict:
    strings = [
        "2024-06-15T14:30:45.123Z", "2024-06-15T14:30:45Z", "2024-06-15T14:30:45.000Z", "2024-06-15T14:30:45+00:00",
        "2024-06-15T14:30:45-00:00", "2024-06-15T14:30:45-05:30", "2024-06-15T14:30:45+05:30:15",
        "2024-06-15T14:30:45+05:30:15.123456", "2024-06-15T14:30:45+0530", "2024-06-15T14:30:45+05",
        "2024-06-15T14:30:45", "2024-06-15 14:30:45", "2024-06-15 14:30:45.5Z", "2024-06-15X14:30:45",
        "20240615T143045", "20240615T143045Z", "20240615T143045.123+0100", "2024-06-15T1430", "2024-06-15T14",
        "2024-06-15T14:30", "2024-06-15", "20240615", "2024-W24-6", "2024W246", "2024-W24", "2024-W24-6T10:00",
        "2024-W53-1", "2020-W53-7", "2024-167",
        "2024-06-15T14:30:45.1", "2024-06-15T14:30:45.12", "2024-06-15T14:30:45.123", "2024-06-15T14:30:45.1234",
        "2024-06-15T14:30:45.12345", "2024-06-15T14:30:45.123456", "2024-06-15T14:30:45.1234567",
        "2024-06-15T14:30:45.12345678", "2024-06-15T14:30:45.123456789", "2024-06-15T14:30:45.9999999",
        "2024-06-15T14:30:45,5", "2024-06-15T14:30:45.", "2024-06-15T24:00:00", "2024-06-15T24:00",
        "2024-06-15T23:59:60", "2024-06-15T23:59:60Z", "2024-02-30T00:00:00", "2024-13-01T00:00:00",
        "0001-01-01T00:00:00", "9999-12-31T23:59:59.999999", "2024-06-15T14:30:45z", "2024-06-15t14:30:45",
        "2024-06-15T14:30:45+24:00", "2024-06-15T14:30:45+23:59", "2024-06-15T14:30:45 +01:00",
        " 2024-06-15T14:30:45", "2024-06-15T14:30:45Z ", "2024-6-15T14:30:45", "2024-06-15T14:30:45.123+01:00",
        "2024-06-15T14:30:45.000001-08:00", "+2024-06-15T14:30:45", "", "not a date",
        "2024-06-15_14:30:45", "2024-06-15\u00e914:30:45", "2024-06-15\U0001F60014:30:45", "2024-06-15114:30:45",
        "2024-06-15T14:30:45.123456Z", "2024-06-15T14:30:45+00:00:30", "2024-06-15T14:30:45-00:00:00.000001",
        "2024-06-15T14:30:45.5+00:00",
    ]
    decode = []
    for s in strings:
        case: dict = {"input": s}
        try:
            d = DATETIME.decode(s)
        except Exception as e:
            case["error"] = err(e)
        else:
            case["decoded"] = dt_fields(d)
            case["encoded"] = DATETIME.encode(d)
        decode.append(case)

    def tzspec(tz) -> dict | None:
        if tz is None:
            return None
        if tz is timezone.utc:
            return {"kind": "timezone.utc"}
        if isinstance(tz, ZoneInfo):
            return {"kind": "zoneinfo", "key": tz.key}
        name = tz.tzname(None)
        off = tz.utcoffset(None).total_seconds()
        return {"kind": "fixed", "offset_seconds": off, "name": name}

    zones = [
        ("naive", None), ("timezone.utc", timezone.utc), ("timezone(timedelta(0))", timezone(timedelta(0))),
        ("timezone(timedelta(0),'GMT')", timezone(timedelta(0), "GMT")),
        ("timezone(timedelta(0),'UTC')", timezone(timedelta(0), "UTC")),
        ("timezone(timedelta(0),'Z')", timezone(timedelta(0), "Z")),
        ("ZoneInfo('UTC')", ZoneInfo("UTC")), ("ZoneInfo('Etc/UTC')", ZoneInfo("Etc/UTC")),
        ("ZoneInfo('Europe/London')", ZoneInfo("Europe/London")),
        ("ZoneInfo('Europe/Berlin')", ZoneInfo("Europe/Berlin")),
        ("timezone(timedelta(hours=-5,minutes=-30))", timezone(timedelta(hours=-5, minutes=-30))),
        ("timezone(timedelta(hours=5,minutes=30,seconds=15))", timezone(timedelta(hours=5, minutes=30, seconds=15))),
        ("timezone(timedelta(hours=1,microseconds=5))", timezone(timedelta(hours=1, microseconds=5))),
        ("timezone(timedelta(hours=1),'UTC')", timezone(timedelta(hours=1), "UTC")),
        ("timezone(timedelta(seconds=30),'UTC')", timezone(timedelta(seconds=30), "UTC")),
        ("timezone(timedelta(seconds=30))", timezone(timedelta(seconds=30))),
    ]
    moments = [(2024, 1, 15, 14, 30, 45, 0), (2024, 6, 15, 14, 30, 45, 0), (2024, 6, 15, 14, 30, 45, 123000),
               (2024, 1, 15, 0, 0, 0, 1), (1969, 12, 31, 23, 59, 59, 999999)]
    encode = []
    for label, tz in zones:
        for (y, mo, d, h, mi, s, us) in moments:
            dt = datetime(y, mo, d, h, mi, s, us, tzinfo=tz)
            encode.append({"tz_label": label, "tz": tzspec(tz),
                           "fields": [y, mo, d, h, mi, s, us], "tzname": dt.tzname(),
                           "encoded": DATETIME.encode(dt)})
    # ANY.encode walks datetimes through DATETIME too
    return {"decode_then_encode": decode, "encode": encode}


def gen_date() -> dict:
    strings = ["2024-06-15", "20240615", "2024-W24-6", "2024W246", "2024-W24", "2024W24", "2024-167", "2024167",
               "2024-06", "2024-6-15", "0001-01-01", "9999-12-31", "2024-02-29", "2023-02-29", "2024-06-15T00:00",
               "2024-06-15 ", "", "+2024-06-15", "2020-W53-7", "2021-W53-1"]
    decode = []
    for s in strings:
        case: dict = {"input": s}
        try:
            d = DATE.decode(s)
        except Exception as e:
            case["error"] = err(e)
        else:
            case["encoded"] = DATE.encode(d)
        decode.append(case)
    encode = [{"fields": [y, m, d], "encoded": DATE.encode(date(y, m, d))}
              for (y, m, d) in [(2024, 6, 15), (1, 1, 1), (9999, 12, 31), (33, 3, 3)]]
    # DATE.encode on a datetime (datetime ⊂ date): isoformat of the datetime, NOT YYYY-MM-DD
    encode.append({"note": "DATE.encode(datetime(2024,6,15,1,2,3)) — no exact-type check",
                   "encoded": DATE.encode(datetime(2024, 6, 15, 1, 2, 3))})
    return {"decode_then_encode": decode, "encode": encode}


def gen_time() -> dict:
    strings = ["13:30:00", "13:30", "13", "1330", "133000", "13:30:00Z", "13:30:00z", "13:30:00+00:00",
               "13:30:00-00:00", "13:30:00+05:30", "13:30:00-05:30", "13:30:00+0530", "13:30:00+05",
               "13:30:00+05:30:15", "13:30:00+05:30:15.5", "13:30:00.5", "13:30:00.123", "13:30:00.123456",
               "13:30:00.1234567", "13:30:00,5", "13:30:00.000000", "13:30:00.000001Z", "24:00", "24:00:00",
               "23:59:60", "T13:30", "t13:30", "13:30:00 ", "", "1:30", "13:30:00+24:00"]
    decode = []
    for s in strings:
        case: dict = {"input": s}
        try:
            t = TIME.decode(s)
        except Exception as e:
            case["error"] = err(e)
        else:
            case["encoded"] = TIME.encode(t)
        decode.append(case)
    encode = []
    for label, tz in [("naive", None), ("timezone.utc", timezone.utc), ("ZoneInfo('UTC')", ZoneInfo("UTC")),
                      ("timezone(timedelta(hours=-5,minutes=-30))", timezone(timedelta(hours=-5, minutes=-30)))]:
        for (h, m, s, us) in [(13, 30, 0, 0), (0, 0, 0, 1), (23, 59, 59, 999999), (13, 30, 0, 500000)]:
            try:
                enc = TIME.encode(time(h, m, s, us, tzinfo=tz))
                encode.append({"tz_label": label, "fields": [h, m, s, us], "encoded": enc})
            except Exception as e:
                encode.append({"tz_label": label, "fields": [h, m, s, us], "error": err(e)})
    return {"decode_then_encode": decode, "encode": encode}


# --------------------------------------------------------------------------- h. set_encode / any_encode

def capture(fn) -> dict:
    try:
        v = fn()
    except BaseException as e:
        return {"error": err(e)}
    try:
        return {"ok_json": json.dumps(v, allow_nan=False, ensure_ascii=False, separators=(",", ":"))}
    except Exception as e:  # e.g. non-JSON leftovers
        return {"ok_repr": repr(v), "json_error": err(e)}


def gen_set_encode() -> list[dict]:
    cases = [
        ("SET(STR)", "{'z','x'}", lambda: SET(STR).encode({"z", "x"})),
        ("SET(STR)", "{'b','a','B','A','',' ','\\u00e4','\\U0001F600','\\uffff','10','9'}",
         lambda: SET(STR).encode({"b", "a", "B", "A", "", " ", "\u00e4", "\U0001F600", "\uffff", "10", "9"})),
        ("SET(STR)", "set()", lambda: SET(STR).encode(set())),
        ("SET(INT)", "{10, 9, -1, 0, 2**64, -2**63}", lambda: SET(INT).encode({10, 9, -1, 0, 2 ** 64, -2 ** 63})),
        ("SET(FLOAT)", "{1.5, -0.5, 1e16, 0.1, -1e-5}", lambda: SET(FLOAT).encode({1.5, -0.5, 1e16, 0.1, -1e-5})),
        ("SET(FLOAT)", "{1.0, 2} (int inside)", lambda: SET(FLOAT).encode({1.0, 2})),
        ("SET(INT)", "{True, 2} (bool inside)", lambda: SET(INT).encode({True, 2})),
        ("SET(STR)", "['b','a','b'] (list, duplicates)", lambda: SET(STR).encode(["b", "a", "b"])),
        ("SET(DATE)", "{date(2024,6,15), date(2023,1,1)}", lambda: SET(DATE).encode({date(2024, 6, 15), date(2023, 1, 1)})),
        ("SET(STR).decode", "['b','a','b']", lambda: sorted(SET(STR).decode(["b", "a", "b"]))),
        ("LIST(STR)", "[1,2,3]", lambda: LIST(STR).encode([1, 2, 3])),
        ("TUPLE(INT)", "(3,1,2)", lambda: TUPLE(INT).encode((3, 1, 2))),
        ("DICT(INT)", "{'b':2,'a':1}", lambda: DICT(INT).encode({"b": 2, "a": 1})),
    ]
    return [{"codec": c, "input_py": d, **capture(f)} for c, d, f in cases]


class MyStr(str):
    pass


def gen_any_encode() -> list[dict]:
    utc = timezone.utc
    rec = Record.wrap({"b": 1, "a": [1, 2]})
    cases = [
        ("None", lambda: None),
        ("{'s': {3, 1, 2}}", lambda: {"s": {3, 1, 2}}),
        ("{'t': (3, 'x', None)}", lambda: {"t": (3, "x", None)}),
        ("{'dt': datetime(2024,6,15,14,30,45,123000,utc)}", lambda: {"dt": datetime(2024, 6, 15, 14, 30, 45, 123000, utc)}),
        ("{'dt': datetime(2024,6,15,14,30,45)} naive", lambda: {"dt": datetime(2024, 6, 15, 14, 30, 45)}),
        ("{'d': date(2024,6,15)}", lambda: {"d": date(2024, 6, 15)}),
        ("{'t': time(13,30,tzinfo=utc)}", lambda: {"t": time(13, 30, tzinfo=utc)}),
        ("[{ 'nested': [set(['b','a']), (1,(2,3))] }]", lambda: [{"nested": [{"b", "a"}, (1, (2, 3))]}]),
        ("{'r': Record.wrap({'b':1,'a':[1,2]})}", lambda: {"r": rec}),
        ("{'dates': {date(2024,1,2), date(2023,5,6)}}", lambda: {"dates": {date(2024, 1, 2), date(2023, 5, 6)}}),
        ("{'mixed_set': {1, 'a'}}", lambda: {"mixed_set": {1, "a"}}),
        ("{'td': timedelta(seconds=5)}", lambda: {"td": timedelta(seconds=5)}),
        ("{'b': b'xy'}", lambda: {"b": b"xy"}),
        ("{'z': ZoneInfo('UTC')}", lambda: {"z": ZoneInfo("UTC")}),
        ("{'f': 1.5, 'i': 2**70, 'bool': True}", lambda: {"f": 1.5, "i": 2 ** 70, "bool": True}),
        ("{'k': {1: 'int key'}}", lambda: {"k": {1: "int key"}}),
        ("{'k': {MyStr('s'): 1}} (str subclass key)", lambda: {"k": {MyStr("s"): 1}}),
        ("{'nan': float('nan')}", lambda: {"nan": float("nan")}),
        ("{'fs': frozenset({1})}", lambda: {"fs": frozenset({1})}),
    ]
    out = []
    for desc, build in cases:
        case: dict = {"input_py": desc}
        try:
            v = ANY.encode(build())
            case["any_encode"] = repr(v)
        except BaseException as e:
            case["any_encode_error"] = err(e)
            out.append(case)
            continue
        # And through Record.wrap + encode_json (the wire bytes), when it is a dict
        if isinstance(v, dict):
            try:
                b = encode_json(Record.wrap(build()))
                case["wire_hex"] = b.hex()
                case["wire_text"] = b.decode("utf-8")
            except BaseException as e:
                case["wire_error"] = err(e)
        out.append(case)
    return out


# --------------------------------------------------------------------------- i. codec_errors

def gen_codec_errors() -> list[dict]:
    cases = [
        ("INT.decode(True)", lambda: INT.decode(True)),
        ("INT.encode(True)", lambda: INT.encode(True)),
        ("INT.decode(1.0)", lambda: INT.decode(1.0)),
        ("FLOAT.decode(1)", lambda: FLOAT.decode(1)),
        ("FLOAT.encode(1)", lambda: FLOAT.encode(1)),
        ("STR.decode(1)", lambda: STR.decode(1)),
        ("STR.decode(None)", lambda: STR.decode(None)),
        ("STR.encode(MyStr('x'))", lambda: STR.encode(MyStr("x"))),
        ("BOOL.decode(0)", lambda: BOOL.decode(0)),
        ("BOOL.decode('true')", lambda: BOOL.decode("true")),
        ("DICT(STR).encode({1: 'a'})", lambda: DICT(STR).encode({1: "a"})),
        ("DICT(STR).encode({MyStr('k'): 'a'})", lambda: DICT(STR).encode({MyStr("k"): "a"})),
        ("DICT(STR).encode({'k': 1})", lambda: DICT(STR).encode({"k": 1})),
        ("DICT(STR).decode({'k': 1})", lambda: DICT(STR).decode({"k": 1})),
        ("LIST(INT).decode([1, 'x'])", lambda: LIST(INT).decode([1, "x"])),
        ("LIST(INT).decode('ab')", lambda: LIST(INT).decode("ab")),
        ("DATETIME.decode(1)", lambda: DATETIME.decode(1)),
        ("DATETIME.decode('bad')", lambda: DATETIME.decode("bad")),
        ("DATETIME.encode(date(2024,6,15))", lambda: DATETIME.encode(date(2024, 6, 15))),
        ("DATE.decode('2024-02-30')", lambda: DATE.decode("2024-02-30")),
        ("TIME.decode('25:00')", lambda: TIME.decode("25:00")),
        ("TIME.encode(timedelta(1))", lambda: TIME.encode(timedelta(1))),
        ("ANY.encode(timedelta(seconds=5))", lambda: ANY.encode(timedelta(seconds=5))),
        ("ANY.encode(b'x')", lambda: ANY.encode(b"x")),
        ("BYTES.decode('QU JD')", lambda: BYTES.decode("QU JD")),
        ("BYTES.decode('QR==')", lambda: BYTES.decode("QR==")),
        ("BYTES.decode('QQ')", lambda: BYTES.decode("QQ")),
        ("BYTES.decode(1)", lambda: BYTES.decode(1)),
        ("BYTES.decode('QQ==')", lambda: BYTES.decode("QQ==")),
        ("BYTES.encode(bytearray(b'A'))", lambda: BYTES.encode(bytearray(b"A"))),
        ("ZONE_INFO.decode('europe/berlin')", lambda: ZONE_INFO.decode("europe/berlin")),
        ("ZONE_INFO.decode(1)", lambda: ZONE_INFO.decode(1)),
        ("ZONE_INFO.decode('Europe/Berlin')", lambda: ZONE_INFO.decode("Europe/Berlin").key),
        ("Attribute('c', INT, True)", lambda: Attribute("c", INT, True)),
        ("Record()[Attribute('n', INT)] = None", lambda: Record().__setitem__(Attribute("n", INT), None)),
        ("Record.wrap({'n': None})[Attribute('n', INT)]", lambda: Record.wrap({"n": None})[Attribute("n", INT)]),
        ("Record.wrap({})[Attribute('n', INT, optional=True)]",
         lambda: Record.wrap({})[Attribute("n", INT, optional=True)]),
        ("Record()['n'] (string index)", lambda: Record()["n"]),
        ("Record().raw['x'] = 1", lambda: Record().raw.__setitem__("x", 1)),
        ("del Record()[Attribute('n', INT)]", lambda: Record().__delitem__(Attribute("n", INT))),
        ("Record().pop(Attribute('n', INT))", lambda: Record().pop(Attribute("n", INT))),
        ("repr(Attribute('count', INT))", lambda: repr(Attribute("count", INT))),
        ("repr(Attribute('count', INT, optional=True))", lambda: repr(Attribute("count", INT, optional=True))),
        ("class X(Attribute) outside module", lambda: type("X", (Attribute,), {})),
        ("encode_json({'a': 1}) (raw dict)", lambda: encode_json({"a": 1})),
        ("encode_json(1)", lambda: encode_json(1)),
    ]
    out = []
    for desc, f in cases:
        try:
            v = f()
            out.append({"expr": desc, "ok_repr": repr(v)})
        except BaseException as e:
            out.append({"expr": desc, "error": err(e)})
    return out


# --------------------------------------------------------------------------- messages / errors text

def gen_message() -> dict:
    enc = []
    for desc, payload in [("str 'M\\u00fcller'", "M\u00fcller"), ("str ''", ""), ("bytes b'\\xff\\x00'", b"\xff\x00"),
                          ("Event.wrap({'b':2,'a':1})", Event.wrap({"b": 2, "a": 1})), ("Event()", Event()),
                          ("str '{\"a\":1}' (not re-encoded)", '{"a":1}'),
                          ("Event.wrap({'s':'M\\u00fcller'})", Event.wrap({"s": "M\u00fcller"}))]:
        enc.append({"payload_py": desc, "encode_json_hex": encode_json(payload).hex(),
                    "encode_value_hex": hx(encode_value(payload))})
    enc.append({"payload_py": "None (value)", "encode_value_hex": encode_value(None)})
    errors = []
    for desc, f in [
        ("Message(key=None, topic='t', value=b'')", lambda: Message(key=None, topic="t", value=b"")),
        ("Message(key=Config(), ...)", lambda: Message(key=Config(), topic="t", value=b"")),
        ("Message(value=Config())", lambda: Message(key="k", topic="t", value=Config())),
        ("Message(value=State())", lambda: Message(key="k", topic="t", value=State())),
        ("Message(key=State())", lambda: Message(key=State(), topic="t", value=None)),
        ("Message(value={'a':1})", lambda: Message(key="k", topic="t", value={"a": 1})),
        ("Message(key={'a':1})", lambda: Message(key={"a": 1}, topic="t", value=None)),
        ("Message(value=1)", lambda: Message(key="k", topic="t", value=1)),
        ("Message(key=1)", lambda: Message(key=1, topic="t", value=None)),
        ("Message(value=Record())", lambda: Message(key="k", topic="t", value=Record())),
        ("Message(value=bytearray())", lambda: Message(key="k", topic="t", value=bytearray())),
        ("Message(value=None) tombstone", lambda: Message(key="k", topic="t", value=None)),
        ("Message(value=Event(State.wrap({'a':1})))", lambda: Message(key="k", topic="t", value=Event(State.wrap({"a": 1})))),
    ]:
        try:
            m = f()
            errors.append({"expr": desc, "ok_repr": repr(m)})
        except BaseException as e:
            errors.append({"expr": desc, "error": err(e)})
    e = InvalidMessageError(part="value", topic="my-topic", partition=3, offset=4711, key=b"k", value=b"v")
    return {"encode": enc, "validation": errors,
            "invalid_message_error_str": str(e),
            "invalid_message_error_key_str": str(InvalidMessageError(part="key", topic="t", partition=0, offset=0,
                                                                     key=b"\xff", value=None))}


def gen_hook_errors() -> list[dict]:
    """TypeErrors raised by the mediated decoders for bad on_invalid_message results."""
    out = []
    rec_key = make_record(key=b"\xff", value=b"{}", topic="in", partition=2, offset=9)
    try:
        parse_message(rec_key, lambda e: Event.wrap({"id": "x"}))
    except TypeError as e:
        out.append({"case": "key failure + handler returns a Record", "error": err(e)})
    rec_val = make_record(key=b"k", value=b"{bad", topic="in", partition=2, offset=10)
    try:
        parse_message(rec_val, lambda e: {"id": "x"})
    except TypeError as e:
        out.append({"case": "value failure + handler returns a dict", "error": err(e)})
    m = parse_message(rec_val, lambda e: State.wrap({"id": "x"}))
    out.append({"case": "value failure + handler returns a State → retyped Event", "value_type": type(m.value).__name__,
                "value_hex": encode_json(m.value).hex()})
    m = parse_message(rec_val, lambda e: Record())
    out.append({"case": "value failure + handler returns empty Record (falsy) → substitution, not skip",
                "result": "skipped" if m is None else "substituted", "value_hex": None if m is None else encode_json(m.value).hex()})
    try:
        parse_message(rec_val, lambda e: (_ for _ in ()).throw(e))
    except InvalidMessageError as e:
        out.append({"case": "default raise", "error": err(e)})
    return out


# --------------------------------------------------------------------------- timestamps

def gen_timestamps() -> dict:
    rng = random.Random(7)
    to_dt = []
    ms_list = [0, 1, 999, 1000, 1704067200000, 1704067200123, 1718461845123, -1, -1000, -1001, 253402300799999,
               2 ** 41, 1718461845001, 1718461845999]
    ms_list += [rng.randint(0, 4_102_444_800_000) for _ in range(30)]
    for ms in ms_list:
        d = millis_to_datetime(ms)
        to_dt.append({"millis": ms, "isoformat": d.isoformat(), "microsecond": d.microsecond})
    to_ms = []
    utc = timezone.utc
    dts = [datetime(2024, 1, 1, tzinfo=utc), datetime(2024, 6, 15, 14, 30, 45, 123456, tzinfo=utc),
           datetime(2024, 6, 15, 14, 30, 45, 1000, tzinfo=utc), datetime(2024, 6, 15, 14, 30, 45, 999, tzinfo=utc),
           datetime(1969, 12, 31, 23, 59, 59, 999000, tzinfo=utc), datetime(1969, 12, 31, 23, 59, 59, 500, tzinfo=utc),
           datetime(1960, 1, 1, 0, 0, 0, 1500, tzinfo=utc),
           datetime(2024, 6, 15, 14, 30, 45, 123000, tzinfo=timezone(timedelta(hours=2)))]
    for _ in range(60):
        dts.append(datetime(2000, 1, 1, tzinfo=utc) + timedelta(microseconds=rng.randint(0, 50 * 365 * 86400 * 10 ** 6)))
    # Float artefacts of int(dt.timestamp() * 1000): scan whole-millisecond instants
    # and keep every one where the result is one below the exact value.
    epoch = datetime(1970, 1, 1, tzinfo=utc)
    for base in [datetime(1970, 1, 1, 0, 0, 1, tzinfo=utc), datetime(2001, 9, 9, 1, 46, 40, tzinfo=utc),
                 datetime(2024, 6, 15, 14, 30, 45, tzinfo=utc)]:
        for k in range(1000):
            d = base + timedelta(milliseconds=k)
            if datetime_to_millis(d) != (d - epoch) // timedelta(milliseconds=1):
                dts.append(d)
    mismatches = 0
    for d in dts:
        ms = datetime_to_millis(d)
        exact_us = (d - datetime(1970, 1, 1, tzinfo=utc)) // timedelta(microseconds=1)
        trunc = int(exact_us / 1000) if exact_us >= 0 else -((-exact_us) // 1000)
        floor_ = exact_us // 1000
        if ms != trunc:
            mismatches += 1
        to_ms.append({"isoformat": d.isoformat(), "epoch_micros": exact_us, "datetime_to_millis": ms,
                      "exact_trunc_toward_zero": trunc, "exact_floor": floor_})
    return {"comment": "millis_to_datetime = datetime.fromtimestamp(ms / 1000, tz=utc) (float division, "
                       "round-half-even to µs); datetime_to_millis = int(dt.timestamp() * 1000) (float product, "
                       "truncation toward zero). Naive datetimes use the host local zone in dt.timestamp().",
            "millis_to_datetime": to_dt, "datetime_to_millis": to_ms,
            "datetime_to_millis_float_artifacts": mismatches}


# --------------------------------------------------------------------------- state serialize/deserialize

def gen_state() -> list[dict]:
    out = []
    for name, raw in [("plain", b'{"b":1,"a":2}'), ("utf8_bom", b'\xef\xbb\xbf{"a":1}'),
                      ("utf16", '{"a":1}'.encode("utf-16")), ("cesu8", b'{"a":"\xed\xa0\x80"}'),
                      ("array", b"[1]"), ("scalar", b"1"), ("empty", b""), ("nan", b'{"a":NaN}'),
                      ("invalid_utf8", b'{"a":"\xff"}')]:
        case: dict = {"name": name, "bytes_hex": raw.hex()}
        try:
            s = deserialize(raw)
            case["deserialized_repr"] = repr(s)
            try:
                case["reserialized_hex"] = serialize(s).hex()
            except ValueError as e:
                case["reserialize_error"] = err(e)
        except BaseException as e:
            case["error"] = err(e)
        out.append(case)
    return out


# --------------------------------------------------------------------------- state dedup

def gen_state_dedup() -> list[dict]:
    """Does a yielded State count as a change vs the baseline? (runner: `final_state != baseline`).

    Record equality is Python dict equality on the decoded values, so 1 == 1.0 == True and
    0.0 == -0.0: such a "change" is NOT written although its bytes would differ.
    """
    pairs = [('{"a":1}', '{"a":1}'), ('{"a":1}', '{"a":1.0}'), ('{"a":1}', '{"a":true}'), ('{"a":0}', '{"a":false}'),
             ('{"a":0.0}', '{"a":-0.0}'), ('{"a":1,"b":2}', '{"b":2,"a":1}'), ('{"a":[1,2]}', '{"a":[2,1]}'),
             ('{"a":{"x":1}}', '{"a":{"x":1.0}}'), ('{}', '{}'), ('{"a":null}', '{}'), ('{"a":1}', '{"a":"1"}'),
             ('{"a":1e16}', '{"a":10000000000000000}'), ('{"a":9007199254740993}', '{"a":9007199254740992.0}')]
    out = []
    for a, b in pairs:
        sa, sb = decode_record(a.encode(), State), decode_record(b.encode(), State)
        out.append({"baseline": a, "yielded": b, "changed": sb != sa,
                    "baseline_bytes_hex": serialize(sa).hex(), "yielded_bytes_hex": serialize(sb).hex()})
    return out


# --------------------------------------------------------------------------- j. config_store

ENRICHED = Attribute("enriched", BOOL)


async def enrich_identity(c: Config) -> Config:
    return c


async def enrich_flag(c: Config) -> Config:
    c[ENRICHED] = True
    return c


def make_policy(kind: str, log: list):
    def handler(e: InvalidMessageError):
        log.append({"part": e.part, "topic": e.topic, "partition": e.partition, "offset": e.offset,
                    "cause_type": type(e.__cause__).__name__})
        if kind == "raise":
            raise e
        if kind == "skip":
            return None
        return Record.wrap({"substituted": True})
    return handler


def R(key, value, topic="cfg", partition=0, offset=0):
    k = key.encode() if isinstance(key, str) else key
    v = value.encode() if isinstance(value, str) else value
    return {"topic": topic, "partition": partition, "offset": offset, "key": k, "value": v}


CONFIG_SCENARIOS = [
    ("later_overwrites", "bootstrap", "skip", "identity", {},
     [R("k1", '{"a":1}', offset=0), R("k1", '{"a":2}', offset=1)]),
    ("empty_value_deletes", "bootstrap", "skip", "identity", {},
     [R("gone", '{"b":1}', offset=0), R("gone", b"", offset=1)]),
    ("null_value_deletes", "bootstrap", "skip", "identity", {},
     [R("gone", '{"b":1}', offset=0), R("gone", None, offset=1)]),
    ("exact_braces_delete", "bootstrap", "skip", "identity", {},
     [R("gone", '{"b":1}', offset=0), R("gone", "{}", offset=1)]),
    ("spaced_braces_do_not_delete", "bootstrap", "skip", "identity", {},
     [R("k", '{"b":1}', offset=0), R("k", "{ }", offset=1)]),
    ("null_json_is_invalid_not_tombstone", "bootstrap", "skip", "identity", {},
     [R("k", '{"b":1}', offset=0), R("k", "null", offset=1)]),
    ("two_topics_one_namespace", "bootstrap", "skip", "identity", {},
     [R("k1", '{"t":"A"}', topic="cfg-a"), R("k2", '{"t":"B"}', topic="cfg-b"), R("k1", "", topic="cfg-b", offset=1)]),
    ("enrich_applied_once_unsorted_keys_canonicalised", "bootstrap", "skip", "flag", {},
     [R("k1", '{"z":1,"a":{"y":2,"b":3}}', offset=0), R("k1", '{"z":2, "a" : {"y":[1.0,1e16],"b":"\u00fc"}}', offset=1)]),
    ("broken_superseded_value_never_read", "bootstrap", "raise", "identity", {},
     [R("k", "{not json", offset=0), R("k", '{"ok":1}', offset=1)]),
    ("broken_surviving_value_skip", "bootstrap", "skip", "identity", {},
     [R("k", '{"ok":1}', offset=0), R("k", "{not json", offset=1), R("other", '{"x":1}', offset=2)]),
    ("broken_surviving_value_substitute", "bootstrap", "substitute", "flag", {},
     [R("k", '{"ok":1}', offset=0), R("k", "[1,2]", offset=1)]),
    ("broken_surviving_value_raise", "bootstrap", "raise", "identity", {},
     [R("a", '{"ok":1}', offset=0), R("k", "{not json", offset=1)]),
    ("bad_key_superseded_still_reaches_hook", "bootstrap", "skip", "identity", {},
     [R(b"\xff\xfe", '{"a":1}', offset=0), R("k", '{"a":1}', offset=1)]),
    ("keyless_record_empty_key", "bootstrap", "skip", "identity", {},
     [R(None, '{"a":1}', offset=0)]),
    ("nan_value_crashes_at_store_put", "bootstrap", "skip", "identity", {},
     [R("k", '{"a":NaN}', offset=0)]),
    ("lone_surrogate_value_crashes_at_store_put", "bootstrap", "skip", "identity", {},
     [R("k", '{"a":"\\ud800"}', offset=0)]),
    ("infinity_value_crashes_at_store_put", "bootstrap", "skip", "identity", {},
     [R("k", '{"a":-Infinity}', offset=0)]),
    ("overflow_value_crashes_at_store_put", "bootstrap", "skip", "identity", {},
     [R("k", '{"a":[1E400]}', offset=0)]),
    ("nan_value_raise_policy_crashes_at_store_put", "bootstrap", "raise", "identity", {},
     [R("k", '{"a":NaN}', offset=0)]),
    ("surrogate_key_crashes_at_store_put_after_enrich", "bootstrap", "skip", "flag", {},
     [R("k", '{"\\udc00":1}', offset=0)]),
    ("drain_nan_value_crashes_at_store_put", "drain", "skip", "identity", {"k": '{"a":1}'},
     [R("k", '{"a":NaN}', offset=3)]),
    ("drain_overflow_value_crashes_at_store_put", "drain", "raise", "flag", {"k": '{"a":1}'},
     [R("k", '{"a":1e400}', offset=3)]),
    ("partition_interleaving", "bootstrap", "skip", "identity", {},
     [R("k", '{"p":0}', partition=0, offset=0), R("k", '{"p":1}', partition=1, offset=0),
      R("j", '{"p":1}', partition=1, offset=1), R("j", '{"p":0}', partition=0, offset=1)]),
    ("reinsert_moves_to_end", "bootstrap", "skip", "identity", {},
     [R("a", '{"n":1}', offset=0), R("b", '{"n":2}', offset=1), R("a", None, offset=2), R("a", '{"n":3}', offset=3)]),
    ("drain_apply_and_tombstone", "drain", "skip", "flag", {"k1": '{"old":1}', "gone": '{"b":1}'},
     [R("k1", '{"new":1}', offset=5), R("gone", None, offset=6)]),
    ("drain_skip_keeps_previous", "drain", "skip", "identity", {"k": '{"a":1}'},
     [R("k", "{not json", offset=3)]),
    ("drain_tombstone_with_bad_key_skipped", "drain", "skip", "identity", {"k": '{"a":1}'},
     [R(b"\xff\xfe", None, offset=3)]),
    ("drain_empty_braces_deletes", "drain", "skip", "identity", {"k": '{"a":1}'},
     [R("k", "{}", offset=3)]),
    ("drain_spaced_braces_stores_empty", "drain", "skip", "identity", {"k": '{"a":1}'},
     [R("k", "{ }", offset=3)]),
    ("drain_substitute", "drain", "substitute", "identity", {"k": '{"a":1}'},
     [R("k", b'"\xed\xa0\x80"', offset=3)]),
]


async def run_config_scenario(phase, policy, enrich_kind, initial, records):
    store = ConfigStore()
    for k, v in initial.items():
        store._put(k, decode_record(v.encode(), Config))
    hook_log: list = []
    handler = make_policy(policy, hook_log)
    enrich = enrich_flag if enrich_kind == "flag" else enrich_identity
    crs = [make_record(key=r["key"], value=r["value"], topic=r["topic"], partition=r["partition"],
                       offset=r["offset"]) for r in records]
    consumer = FakeKafkaConsumer(crs)
    result: dict = {}
    try:
        if phase == "bootstrap":
            topics = list(dict.fromkeys(r["topic"] for r in records))
            returned = await bootstrap_config_store(consumer, topics, store, enrich, handler)
            result["returned"] = [
                {"key": k, "topic": m.topic, "partition": m.partition, "offset": m.offset,
                 "value_hex": None if m.value is None else encode_json(m.value).hex()}
                for k, m in returned.items()]
        else:
            returned = await drain_config_updates(consumer, store, enrich, handler)
            result["returned"] = [
                {"key": m.key, "topic": m.topic, "partition": m.partition, "offset": m.offset,
                 "value_hex": None if m.value is None else encode_json(m.value).hex()}
                for m in returned]
    except BaseException as e:
        result["error"] = err(e)
    result["store"] = {k: v.hex() for k, v in store._raw.items()}
    result["store_order"] = list(store._raw)
    result["nbytes"] = store.nbytes
    result["hook_calls"] = hook_log
    return result


def gen_config_store() -> list[dict]:
    out = []
    for name, phase, policy, enrich, initial, records in CONFIG_SCENARIOS:
        res = asyncio.run(run_config_scenario(phase, policy, enrich, initial, records))
        out.append({
            "name": name, "phase": phase, "policy": policy, "enrich": enrich,
            "initial_store_json": initial,
            "records": [{"topic": r["topic"], "partition": r["partition"], "offset": r["offset"],
                         "key_hex": hx(r["key"]), "value_hex": hx(r["value"])} for r in records],
            **res,
        })
    return out


# --------------------------------------------------------------------------- mixed fleets: the runner

# The same records through the real `TransformerRunner.process_batch` (one task, partition 0, a
# `ChangelogStateStore` over an `InMemoryStateStore`, `FakeKafkaProducer`), so a Rust instance of
# the same application can be compared with what a Python instance writes. Four transforms, each
# ported verbatim to tests/mixed_fleet.rs:
#
#   count       n = state.get(N, 0) + 1 (N = Attribute("n", INT)); yield state with n;
#               yield Message("out", msg.key, Event({N: n}), msg.timestamp). Never reads the value.
#   forward     yield Message("out", msg.key, msg.value, msg.timestamp) (a tombstone stays one).
#   keep_value  yield State.wrap(msg.value.raw), or State() for a tombstone. Emits nothing.
#   echo_keep   yield Message("out", msg.key, Event.wrap(state.raw)) (the state this call sees),
#               then what keep_value yields.
#
# A batch that raises inside the producer transaction is aborted by Kafka: nothing of it is
# visible and no offset commits, so "visible" is empty and "committed" false whenever "error" is
# set. Each scenario starts from a fresh runner; "initial_store" is the state store (the restored
# changelog) before the first batch.

N_ATTR = Attribute("n", INT)


def mixed_transform(kind: str, seen: list):
    async def transform(msg, state):
        seen.append({
            "key": msg.key,
            "value": None if msg.value is None else repr(msg.value.raw),
            "timestamp": None if msg.timestamp is None else msg.timestamp.isoformat(),
            "state": repr(state.raw),
        })
        if kind == "count":
            n = state.get(N_ATTR, 0) + 1
            state[N_ATTR] = n
            yield state
            yield Message(topic="out", key=msg.key, value=Event({N_ATTR: n}), timestamp=msg.timestamp)
        elif kind == "forward":
            yield Message(topic="out", key=msg.key, value=msg.value, timestamp=msg.timestamp)
        elif kind in ("keep_value", "echo_keep"):
            if kind == "echo_keep":
                yield Message(topic="out", key=msg.key, value=Event.wrap(dict(state.raw)))
            yield State() if msg.value is None else State.wrap(dict(msg.value.raw))
        else:
            raise AssertionError(kind)
    return transform


def consumer_record(key, value, offset, timestamp, headers=()):
    return ConsumerRecord(
        topic="in", partition=0, offset=offset, timestamp=timestamp, timestamp_type=0, key=key, value=value,
        checksum=None, serialized_key_size=-1 if key is None else len(key),
        serialized_value_size=-1 if value is None else len(value), headers=tuple(headers),
    )


async def run_mixed_scenario(kind, policy, initial, batches):
    hook_log: list = []
    seen: list = []
    runner = TransformerRunner()
    runner.application_id = "app"
    runner.observer = RecordingObserver()
    runner.transformer = Transformer.of(input_topics=["in"], transform=mixed_transform(kind, seen),
                                        on_invalid_message=make_policy(policy, hook_log))
    inner = InMemoryStateStore()
    for k, v in initial.items():
        inner.store[k] = v
    result: dict = {"batches": []}
    offset = 0
    for batch in batches:
        producer = FakeKafkaProducer()
        store = ChangelogStateStore()
        store.inner, store.producer, store.partition, store.topic = inner, producer, 0, "app-changelog"
        store.observer = runner.observer
        runner.tasks = {0: Task(0, producer, store)}
        records = []
        for rec in batch:
            records.append(consumer_record(rec["key"], rec["value"], offset, rec["timestamp"], rec.get("headers", ())))
            offset += 1
        hook_log.clear()
        seen.clear()
        out: dict = {}
        try:
            await runner.process_batch({TopicPartition("in", 0): records})
            out["committed"] = True
        except BaseException as e:
            out["committed"] = False
            out["error"] = err(e)
        visible = out["committed"]
        out["outputs"] = [
            {"key_hex": hx(m["key"]), "value_hex": hx(m["value"]), "timestamp_ms": m["timestamp_ms"]}
            for t, m in producer.sent if t == "out" and visible]
        out["changelog"] = [
            {"key_hex": hx(m["key"]), "value_hex": hx(m["value"]), "partition": m["partition"]}
            for t, m in producer.sent if t == "app-changelog" and visible]
        out["offsets"] = [
            {"topic": tp.topic, "partition": tp.partition, "next": n, "group": g}
            for offsets, g in producer.offsets_sent for tp, n in offsets.items()] if visible else []
        out["hook_calls"] = [{"part": c["part"], "offset": c["offset"], "cause_type": c["cause_type"]}
                             for c in hook_log]
        out["transform_calls"] = list(seen)
        out["store_after"] = {k: v.hex() for k, v in inner.store.items()}
        result["batches"].append(out)
    return result


def B(key, value, timestamp=1718461845123, headers=()):
    k = key.encode() if isinstance(key, str) else key
    v = value.encode() if isinstance(value, str) else value
    return {"key": k, "value": v, "timestamp": timestamp, "headers": headers}


# (hazard, name, transform, policy, initial store {key: bytes}, batches of records)
MIXED_VALUES = [
    ("nan", b'{"x":NaN}'), ("infinity", b'{"x":Infinity}'), ("neg_infinity", b'{"x":-Infinity}'),
    ("overflow", b'{"x":1E400}'), ("neg_overflow", b'{"x":[-1e400]}'), ("lone_surrogate", b'{"s":"\\ud800"}'),
    ("lone_surrogate_in_key", b'{"\\udc00":1}'), ("reversed_pair", b'{"s":"\\udc00\\ud800"}'),
    ("underflow_control", b'{"x":1e-400}'),
]
MIXED_SCENARIOS = []
for _kind in ("count", "forward", "keep_value"):
    for _vname, _raw in MIXED_VALUES:
        MIXED_SCENARIOS.append(("non_finite_and_surrogates", f"{_kind}_{_vname}", _kind, "skip", {},
                                [[B(f"{_kind}-{_vname}", _raw)]]))
MIXED_SCENARIOS += [
    ("non_finite_and_surrogates", "count_nan_raise_policy", "count", "raise", {}, [[B("k", b'{"x":NaN}')]]),
]
DEDUP_PAIRS = [
    ("same_int", '{"a":1}', '{"a":1}'), ("int_to_float", '{"a":1}', '{"a":1.0}'),
    ("int_to_bool", '{"a":1}', '{"a":true}'), ("zero_to_false", '{"a":0}', '{"a":false}'),
    ("zero_to_neg_zero", '{"a":0.0}', '{"a":-0.0}'), ("nested_int_to_float", '{"a":{"x":1}}', '{"a":{"x":1.0}}'),
    ("float_to_int", '{"a":1e16}', '{"a":10000000000000000}'), ("changed_control", '{"a":1}', '{"a":2}'),
    ("noncanonical_baseline_same", '{"b":1, "a":2}', '{"a":2,"b":1}'),
    ("to_empty_deletes", '{"a":1}', '{}'),
]
for _name, _base, _new in DEDUP_PAIRS:
    MIXED_SCENARIOS.append(("state_dedup", f"dedup_{_name}", "echo_keep", "skip", {f"dedup-{_name}": _base.encode()},
                            [[B(f"dedup-{_name}", _new)]]))
MIXED_SCENARIOS += [
    # The unwritten change is not what the next batch sees: Python's store keeps the baseline.
    ("state_dedup", "dedup_next_batch_sees_baseline", "echo_keep", "skip", {"k": b'{"a":1}'},
     [[B("k", '{"a":1.0}')], [B("k", '{"a":2}')]]),
    # Within one batch the next record of the key sees the yielded state.
    ("state_dedup", "dedup_same_batch_sees_yielded", "echo_keep", "skip", {"k": b'{"a":1}'},
     [[B("k", '{"a":1.0}'), B("k", '{"a":2}')]]),
]
MIXED_TIMESTAMPS = [
    ("epoch_plus_1001", 1001), ("before_window_diff", 1099511627774), ("window_start", 1099511627776),
    ("window_2024", 1718461845123), ("window_last", 2147483647999), ("after_window_diff", 2147483648002),
    ("year_9999_last", 253402300799999), ("year_10000", 253402300800000), ("minus_one", -1),
]
for _name, _ms in MIXED_TIMESTAMPS:
    MIXED_SCENARIOS.append(("timestamps", f"forward_ts_{_name}", "forward", "skip", {},
                            [[B(f"ts-{_name}", b'{"a":1}', timestamp=_ms)]]))
MIXED_SCENARIOS += [
    ("tombstones_and_keys", "forward_tombstone", "forward", "skip", {}, [[B("tomb-fwd", None)]]),
    ("tombstones_and_keys", "forward_empty_value", "forward", "skip", {}, [[B("empty-fwd", b"")]]),
    ("tombstones_and_keys", "forward_braces_value", "forward", "skip", {}, [[B("braces-fwd", b"{}")]]),
    ("tombstones_and_keys", "count_tombstone", "count", "skip", {}, [[B("tomb-count", None)]]),
    ("tombstones_and_keys", "keep_value_tombstone_deletes", "keep_value", "skip", {"tomb-keep": b'{"a":1}'},
     [[B("tomb-keep", None)]]),
    ("tombstones_and_keys", "keep_value_empty_value_deletes", "keep_value", "skip", {"empty-keep": b'{"a":1}'},
     [[B("empty-keep", b"")]]),
    ("tombstones_and_keys", "count_absent_and_empty_key_share_state", "count", "skip", {},
     [[B(None, b"{}"), B(b"", b"{}")]]),
    ("tombstones_and_keys", "forward_drops_headers", "forward", "skip", {},
     [[B("hdr-fwd", b'{"a":1}', headers=(("h", b"v"), ("n", None)))]]),
    # Outputs of different state keys in one batch: Python concatenates the buckets in the order
    # their keys first appear.
    ("tombstones_and_keys", "count_bucket_order", "count", "skip", {},
     [[B("order-z", b"{}"), B("order-a", b"{}"), B("order-z", b"{}")]]),
    ("tombstones_and_keys", "count_bom_baseline", "count", "skip", {"k": b'\xef\xbb\xbf{"n":1}'}, [[B("k", b"{}")]]),
    ("tombstones_and_keys", "count_nan_baseline", "count", "skip", {"k": b'{"n":1,"x":NaN}'}, [[B("k", b"{}")]]),
]


def gen_mixed_fleet() -> list[dict]:
    out = []
    for hazard, name, kind, policy, initial, batches in MIXED_SCENARIOS:
        res = asyncio.run(run_mixed_scenario(kind, policy, initial, batches))
        out.append({
            "hazard": hazard, "name": name, "transform": kind, "policy": policy,
            "initial_store": {k: v.hex() for k, v in initial.items()},
            "batches": [
                {"records": [{"key_hex": hx(r["key"]), "value_hex": hx(r["value"]), "timestamp_ms": r["timestamp"],
                              "headers": [[h, hx(v)] for h, v in r["headers"]]} for r in batch], **got}
                for batch, got in zip(batches, res["batches"])],
        })
    return out


# --------------------------------------------------------------------------- mixed fleets: timestamps

WINDOW = (2 ** 40, 2 ** 31 * 1000)  # [2004-11-03T19:53:47.776Z, 2038-01-19T03:14:08Z)


def gen_timestamp_forward() -> dict:
    """A forwarded timestamp: millis_to_datetime, then datetime_to_millis (the runner's path).

    For every millisecond of each range: the ms where Python's output differs from its input
    ("ms>out"), and how many ms the transform sees as an inexact datetime (with examples). Then a
    seeded sample of every power-of-two band of epoch ms up to year 9999, listing only the ms
    whose output differs.
    """
    ranges = [(0, 4000), (999_999_998_000, 1_000_000_002_000), (WINDOW[0] - 1000, WINDOW[0] + 1000),
              (1_718_461_843_000, 1_718_461_847_000), (WINDOW[1] - 1000, WINDOW[1] + 1000),
              (2_524_608_000_000, 2_524_608_004_000), (7_258_118_400_000, 7_258_118_404_000),
              (253_402_300_796_000, 253_402_300_800_000)]
    epoch = datetime(1970, 1, 1, tzinfo=timezone.utc)

    def forward(ms):
        return datetime_to_millis(millis_to_datetime(ms))
    out = []
    for lo, hi in ranges:
        differs, inexact = [], []
        for ms in range(lo, hi):
            d = millis_to_datetime(ms)
            if forward(ms) != ms:
                differs.append(f"{ms}>{forward(ms)}")
            if d != epoch + timedelta(milliseconds=ms):
                inexact.append(f"{ms}>{d.isoformat()}")
        out.append({"from": lo, "to": hi, "output_differs": differs, "seen_inexact_count": len(inexact),
                    "seen_inexact_examples": inexact[:3]})
    rng = random.Random(23)
    bands = []
    for k in range(10, 48):
        lo, hi = 2 ** k, min(2 ** (k + 1), 253_402_300_800_000)
        sample = [rng.randrange(lo, hi) for _ in range(400)]
        bands.append({"from": lo, "to": hi, "sampled": len(sample),
                      "output_differs": [f"{ms}>{forward(ms)}" for ms in sample if forward(ms) != ms]})
    # Inside the window a computed timestamp (µs precision) goes out as its floor, like ours.
    sweep = []
    for _ in range(200):
        us = rng.randrange(WINDOW[0] * 1000, WINDOW[1] * 1000)
        sweep.append(f"{us}>{datetime_to_millis(epoch + timedelta(microseconds=us))}")
    try:
        millis_to_datetime(253_402_300_800_000)
        beyond = None
    except BaseException as e:
        beyond = err(e)
    return {"comment": "forwarded = int(datetime.fromtimestamp(ms / 1000, utc).timestamp() * 1000); exact inside "
                       "[2**40, 2**31 * 1000) ms. Entries are 'input>output'.",
            "window": list(WINDOW), "ranges": out, "bands": bands, "window_micros_to_millis": sweep,
            "year_10000_error": beyond}


# --------------------------------------------------------------------------- mixed fleets: client ids

async def _client_ids() -> dict:
    async def noop(msg, state):
        if False:
            yield
    stage = Transformer.of(input_topics=["in"], transform=noop)
    stage.config_topics = ["cfg"]
    app = flechtwerk.Flechtwerk.of(application_id="app", bootstrap_servers="127.0.0.1:9", client_id="pod-0",
                                   stage=stage)
    from aiokafka.admin import AIOKafkaAdminClient

    def consumer(c):
        return {"client_id": c._client._client_id, "group_id": c._group_id, "isolation_level": c._isolation_level,
                "assignors": [a.name for a in c._partition_assignment_strategy] if c._group_id else None}

    def producer(p):
        return {"client_id": p.client._client_id,
                "transactional_id": p._txn_manager.transactional_id if p._txn_manager else None}
    restore = app.create_restore_consumer()
    tasks = [app.create_task_producer(p) for p in (0, 3)]
    admin = AIOKafkaAdminClient(**app.kafka_client_kwargs)
    ids = {"application_id": "app", "client_id": "pod-0",
           "main_consumer": consumer(app.consumer), "config_consumer": consumer(app.config_consumer),
           "restore_consumer": consumer(restore),
           "task_producers": {str(p): producer(t) for p, t in zip((0, 3), tasks)},
           "admin_client_id": admin._client._client_id, "changelog_topic": app.changelog_topic}
    for c in (app.consumer, app.config_consumer, restore):
        await c.stop()
    for t in tasks:
        await t.stop()
    await admin.close()
    return ids


def gen_group_protocol() -> dict:
    """What a member tells the group: aiokafka's range metadata, and how it reads librdkafka's.

    librdkafka 2.12's range assignor (rdkafka_range_assignor.c,
    rd_kafka_assignor_get_metadata_with_empty_userdata) writes version 3: topics, empty user
    data, owned partitions, generation -1, rack id; built here by that layout.
    """
    from aiokafka.coordinator.assignors.range import RangePartitionAssignor
    from aiokafka.coordinator.protocol import ConsumerProtocol, ConsumerProtocolMemberMetadata
    ours = RangePartitionAssignor.metadata(["in"])
    v3 = (struct.pack(">hi", 3, 1) + struct.pack(">h", 2) + b"in" + struct.pack(">i", 0)
          + struct.pack(">i", 0) + struct.pack(">i", -1) + struct.pack(">h", -1))
    read = ConsumerProtocolMemberMetadata.decode(v3)
    return {"protocol_type": ConsumerProtocol.PROTOCOL_TYPE, "assignor": RangePartitionAssignor.name,
            "aiokafka_metadata_hex": ours.encode().hex(), "aiokafka_metadata_version": ours.version,
            "aiokafka_user_data_hex": ours.user_data.hex(),
            "librdkafka_v3_metadata_hex": v3.hex(),
            "aiokafka_reads_librdkafka": {"version": read.version, "subscription": list(read.subscription),
                                          "user_data_hex": read.user_data.hex()}}


def gen_client_ids() -> dict:
    return {**asyncio.run(_client_ids()), "group_protocol": gen_group_protocol()}


# --------------------------------------------------------------------------- main

def build() -> dict:
    return {
        "meta": {
            "generator": "tests/golden/generate.py",
            "python": sys.version.split()[0],
            "flechtwerk": version("flechtwerk"),
            "aiokafka": version("aiokafka"),
            "policies": {
                "config_store.enrich": {"identity": "return config unchanged",
                                        "flag": "config[Attribute('enriched', BOOL)] = True"},
                "config_store.policy": {"raise": "on_invalid re-raises", "skip": "returns None",
                                        "substitute": "returns Record.wrap({'substituted': True})"},
            },
        },
        "canonical_json": gen_canonical_json(),
        "float_repr": gen_float_repr(),
        "value_decode": gen_value_decode(),
        "key_decode": gen_key_decode(),
        "is_tombstone": gen_is_tombstone(),
        "token_for": gen_token_for(),
        "datetime": gen_datetime(),
        "date": gen_date(),
        "time": gen_time(),
        "set_encode": gen_set_encode(),
        "any_encode": gen_any_encode(),
        "codec_errors": gen_codec_errors(),
        "message": gen_message(),
        "hook_errors": gen_hook_errors(),
        "timestamps": gen_timestamps(),
        "state_deserialize": gen_state(),
        "state_dedup": gen_state_dedup(),
        "config_store": gen_config_store(),
        "mixed_fleet": gen_mixed_fleet(),
        "timestamp_forward": gen_timestamp_forward(),
        "client_ids": gen_client_ids(),
    }


def render(data: dict) -> str:
    return json.dumps(data, ensure_ascii=True, indent=1, sort_keys=False) + "\n"


if __name__ == "__main__":
    text = render(build())
    if "--check" in sys.argv:
        same = OUT.exists() and OUT.read_text() == text
        print("vectors.json up to date" if same else "vectors.json DIFFERS")
        sys.exit(0 if same else 1)
    OUT.write_text(text)
    print(f"wrote {OUT} ({len(text)} bytes)")
