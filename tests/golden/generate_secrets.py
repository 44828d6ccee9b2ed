#!/usr/bin/env python3
# Golden vectors for field-level secrets (issue 36): runs the Python reference, flechtctl 0.17.0
# (keyrings, flenc:/flsig: tokens) and flechtwerk[secrets] 0.17.0 (the ENCRYPTED/SIGNED codecs),
# and records what they do in tests/golden/secrets_vectors.json. The format these vectors pin is
# written up in docs/secrets-format.md.
#
# How to run (the reference lives in a venv OUTSIDE the repo, made by scripts/python-ref, which
# installs flechtwerk[mqtt,secrets]==0.17.0 and flechtctl==0.17.0):
#
#   eval "$(scripts/python-ref | grep '^PYTHON_REF=')"
#   "$PYTHON_REF" tests/golden/generate_secrets.py          # writes secrets_vectors.json
#   "$PYTHON_REF" tests/golden/generate_secrets.py --check  # regenerates in memory and diffs
#
# Takes ~3 s. Only flechtwerk and flechtctl are pinned: joserfc (flechtctl asks for ~=1.7) and
# cryptography float, and their versions are recorded under "meta"; if --check reports a
# difference after the venv was rebuilt, look at those first (header member order, error texts of
# the chained causes).
#
# Determinism. Every key is fixed (below). The only randomness in the format is the AES-GCM IV,
# the ephemeral X25519 key of an ECDH-ES token and the PBES2 salt of a protected keyring; joserfc
# draws them from `secrets.token_bytes` and `OKPKey.generate_key`, which this script replaces by
# a seeded generator before anything is minted. The wire format is unchanged by that (the tokens
# are what Python writes given those random bytes), so re-running gives identical bytes and
# `--check` can diff. A Rust encoder draws fresh randomness and will never reproduce these tokens:
# compare by decrypting, not by bytes (Ed25519 signatures are deterministic and do compare).
#
# Conventions in secrets_vectors.json:
#   * raw bytes are lowercase hex ("*_hex"); JSON payloads are given both as the value and as the
#     exact UTF-8 text that was encrypted or signed ("payload": canonical JSON text)
#   * errors are {"type": <exception class>, "message": str(exc)}, plus "cause" for a chained
#     __cause__ (the joserfc cause is there for humans: a port matches "type", and the message of
#     the top-level error where the doc says so)
#   * "ok" is true when the call returned, then "value" is what it returned
#   * keyrings are referenced by name from "keyrings" (their exact JSON text is under "json")
import os
import sys

if os.environ.get("PYTHONHASHSEED") != "0":
    os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, "PYTHONHASHSEED": "0"})

import base64
import contextlib
import hashlib
import io
import json
import random
import secrets
from importlib.metadata import version
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from joserfc import jwe, jws
from joserfc.jwk import OctKey, OKPKey

import flechtctl
from flechtctl import (
    Ed25519Key, Keyring, X25519Key, decrypt, decrypt_bytes, decrypt_keyring, encrypt, encrypt_bytes,
    encrypt_keyring, is_encrypted, is_encrypted_keyring, is_signed, kid_of, read_header, reencrypt,
    sign, signer_of, verify,
)
from flechtctl import cli, tokens

OUT = Path(__file__).with_name("secrets_vectors.json")


# --------------------------------------------------------------------------- determinism

class _Drbg:
    """A seeded byte source standing in for the OS's (see the header): SHA-256 in counter mode."""

    def __init__(self, seed: bytes) -> None:
        self.seed = seed
        self.counter = 0

    def bytes(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            out += hashlib.sha256(self.seed + self.counter.to_bytes(8, "big")).digest()
            self.counter += 1
        return out[:n]


_DRBG = _Drbg(b"flechtwerk secrets golden vectors")
_original_okp_generate = OKPKey.generate_key.__func__


def _token_bytes(n: int | None = None) -> bytes:
    return _DRBG.bytes(32 if n is None else n)


def _generate_okp(cls, crv="Ed25519", parameters=None, private=True, auto_kid=False):
    if crv != "X25519":
        return _original_okp_generate(cls, crv, parameters, private, auto_kid)
    # The same construction joserfc's own generate_key ends in (so the `epk` member order matches
    # what an unpatched joserfc writes: crv, x, kty), with the private key from the seeded source.
    from joserfc._rfc8037.okp_key import _wrap_key
    return _wrap_key(cls, X25519PrivateKey.from_private_bytes(_DRBG.bytes(32)), private, auto_kid, parameters)


secrets.token_bytes = _token_bytes
OKPKey.generate_key = classmethod(_generate_okp)

# joserfc's SecurityWarnings (EdDSA, p2c < 1000) fire when probing what a reader refuses; the
# protected-keyring vectors record the ones a reader emits (`warnings`), the rest are noise here.
import warnings  # noqa: E402

from joserfc.errors import SecurityWarning  # noqa: E402

warnings.simplefilter("ignore", SecurityWarning)


# --------------------------------------------------------------------------- helpers

def b64u(b: bytes) -> str:
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode("ascii")


def unb64u(s: str) -> bytes:
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def err(e: BaseException) -> dict:
    d: dict = {"type": type(e).__name__, "message": str(e)}
    if e.__cause__ is not None:
        d["cause"] = err(e.__cause__)
    return d


def outcome(fn, *args, **kwargs) -> dict:
    try:
        return {"ok": True, "value": fn(*args, **kwargs)}
    except Exception as e:  # noqa: BLE001 - recording every failure is the point
        return {"ok": False, "error": err(e)}


def header_of(token: str) -> dict:
    compact = token.split(":", 2)[2]
    return json.loads(unb64u(compact.split(".")[0]))


def segments(token: str) -> list[str]:
    return token.split(":", 2)[2].split(".")


def with_segments(token: str, parts: list[str]) -> str:
    scheme, envelope, _ = token.split(":", 2)
    return f"{scheme}:{envelope}:" + ".".join(parts)


def flip(segment: str, index: int = 0) -> str:
    """The segment with one bit of its decoded bytes flipped, re-encoded."""
    raw = bytearray(unb64u(segment))
    raw[index] ^= 0x01
    return b64u(bytes(raw))


def seed(label: str) -> bytes:
    return hashlib.sha256(b"flechtwerk secrets vector key: " + label.encode()).digest()


def x25519(label: str) -> X25519Key:
    d = seed(label)
    return X25519Key(public=X25519PrivateKey.from_private_bytes(d).public_key().public_bytes_raw(), private=d)


def ed25519(label: str) -> Ed25519Key:
    d = seed(label)
    return Ed25519Key(public=Ed25519PrivateKey.from_private_bytes(d).public_key().public_bytes_raw(), private=d)


def public_only(key):
    return type(key)(public=key.public)


def mint_jwe(protected: dict, payload: bytes, key, algorithms: list[str]) -> str:
    """A token with a header flechtctl never writes, minted by joserfc itself (to probe what the reader accepts)."""
    from joserfc.registry import HeaderParameter
    registry = jwe.JWERegistry(
        header_registry={"flenc_scope": HeaderParameter("scope", lambda v: None, False)},
        algorithms=algorithms, strict_check_header=False,
    )
    return tokens.PREFIX + jwe.encrypt_compact(protected, payload, key, registry=registry)


def mint_jws(protected: dict, payload: bytes, key, algorithms: list[str]) -> str:
    from joserfc.registry import HeaderParameter
    registry = jws.JWSRegistry(
        header_registry={"flenc_scope": HeaderParameter("scope", lambda v: None, False)},
        algorithms=algorithms, strict_check_header=False,
    )
    return tokens.SIGNATURE_PREFIX + jws.serialize_compact(protected, payload, key, registry=registry)


# --------------------------------------------------------------------------- key material

OCT = {kid: seed(kid) for kid in ("oct-2026-01", "oct-2026-02", "oct-scoped")}
OCT["test-key"] = bytes(range(32))  # flechtwerk.testing.fixture_keyring's key
REC = {kid: x25519(kid) for kid in ("rec-api", "rec-other")}
SIG = {kid: ed25519(kid) for kid in ("sig-api", "sig-other")}

KEYRINGS: dict[str, Keyring] = {}
KEYRING_NOTES: dict[str, str] = {}


def keyring(name: str, note: str, kr: Keyring) -> Keyring:
    KEYRINGS[name] = kr
    KEYRING_NOTES[name] = note
    return kr


def build_keyrings() -> None:
    keyring("oct", "one unbound oct key, primary", Keyring.of({"oct-2026-01": OCT["oct-2026-01"]}, primary="oct-2026-01"))
    keyring("oct-rotated", "the old key kept for reading, a new primary",
            Keyring.of({k: OCT[k] for k in ("oct-2026-01", "oct-2026-02")}, primary="oct-2026-02"))
    keyring("oct-old-only", "only the key oct-rotated's new primary replaced",
            Keyring.of({"oct-2026-01": OCT["oct-2026-01"]}, primary="oct-2026-01"))
    keyring("oct-scoped", "an unbound primary plus an oct key bound to scope 'db' and its sealing key for it",
            Keyring.of({k: OCT[k] for k in ("oct-2026-01", "oct-scoped")}, primary="oct-2026-01",
                       primaries={"db": "oct-scoped"}, scopes={"oct-scoped": {"db"}}))
    keyring("oct-scoped-unbound", "oct-scoped's keys with no binding on oct-scoped (writes what the bound reader must refuse)",
            Keyring.of({k: OCT[k] for k in ("oct-2026-01", "oct-scoped")}, primary="oct-scoped"))
    keyring("full", "every kind: an unbound oct primary, X25519 recipients sealing 'api' and 'other', Ed25519 signers for them",
            Keyring.of(
                {"oct-2026-01": OCT["oct-2026-01"]}, primary="oct-2026-01",
                primaries={"api": "rec-api", "other": "rec-other"},
                recipients=dict(REC),
                scopes={"rec-api": {"api"}, "rec-other": {"other"}, "sig-api": {"api"}, "sig-other": {"other", "api2"}},
                signers=dict(SIG),
                signing={"api": "sig-api", "other": "sig-other", "api2": "sig-other"},
            ))
    keyring("writer", "what a writer holds: the recipients' public halves only, and the signers' private halves",
            Keyring.of(
                {"oct-2026-01": OCT["oct-2026-01"]}, primary="oct-2026-01",
                primaries={"api": "rec-api", "other": "rec-other"},
                recipients={k: public_only(v) for k, v in REC.items()},
                scopes={"rec-api": {"api"}, "rec-other": {"other"}, "sig-api": {"api"}},
                signers={"sig-api": SIG["sig-api"]},
                signing={"api": "sig-api"},
            ))
    keyring("verifier", "what a reader of signatures holds: the signers' public halves only",
            Keyring.of({"oct-2026-01": OCT["oct-2026-01"]}, primary="oct-2026-01",
                       scopes={"sig-api": {"api"}, "sig-other": {"other"}},
                       signers={k: public_only(v) for k, v in SIG.items()}))
    keyring("recipient-primary", "an X25519 recipient bound to 'api' as the primary itself, no oct key",
            Keyring.of({}, primary="rec-api", recipients={"rec-api": REC["rec-api"]}, scopes={"rec-api": {"api"}}))
    keyring("non-ascii", "a kid and a scope outside ASCII: the header escapes them (\\uXXXX), the keyring file too",
            Keyring.of({"schlüssel-1": OCT["oct-2026-02"]}, primary="schlüssel-1"))
    keyring("python-fixture", "flechtwerk.testing.fixture_keyring()", Keyring.of({"test-key": OCT["test-key"]}, primary="test-key"))
    import flechtwerk.testing as fwt
    keyring("python-fixture-asymmetric", "flechtwerk.testing.fixture_asymmetric_keyring()", fwt.fixture_asymmetric_keyring())
    keyring("python-fixture-asymmetric-writer", "flechtwerk.testing.fixture_asymmetric_keyring(recipient_private=False)",
            fwt.fixture_asymmetric_keyring(recipient_private=False))


def gen_keys() -> dict:
    return {
        "oct": {kid: key.hex() for kid, key in OCT.items()},
        "x25519": {kid: {"private_hex": k.private.hex(), "public_hex": k.public.hex()} for kid, k in REC.items()},
        "ed25519": {kid: {"seed_hex": k.private.hex(), "public_hex": k.public.hex()} for kid, k in SIG.items()},
        "derivation": "sha256(b'flechtwerk secrets vector key: ' + kid) is each oct key and each private half "
                      "(test-key is bytes(range(32))); public halves are derived from them",
    }


def gen_keyrings() -> dict:
    out = {}
    for name, kr in KEYRINGS.items():
        text = kr.to_json()
        assert Keyring.from_json(text) == kr
        out[name] = {
            "note": KEYRING_NOTES[name],
            "json": text,
            "kids": kr.kids(),
            "primary": kr.primary,
            "show": run_cli(["keyring", "show", "KEYRING"], keyring_text=text),
        }
    return out


# --------------------------------------------------------------------------- CLI capture

def run_cli(argv: list[str], *, keyring_text: str | None = None, password: str | None = None,
            stdin: str | None = None) -> dict:
    """Run `flechtctl` in-process with a temp keyring file; capture exit status and output."""
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "keyring.json"
        args = []
        for a in argv:
            args.append(str(path) if a == "KEYRING" else a)
        if keyring_text is not None:
            path.write_text(keyring_text)
        if password is not None:
            (Path(tmp) / "password").write_text(password + "\n")
            args += ["--password-file", str(Path(tmp) / "password")]
        out, errout = io.StringIO(), io.StringIO()
        old_stdin = sys.stdin
        sys.stdin = io.StringIO(stdin or "")
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(errout):
                try:
                    status = cli.main(args)
                except SystemExit as e:
                    status = e.code
        finally:
            sys.stdin = old_stdin
        return {"argv": ["flechtctl", *argv], "status": status, "stdout": out.getvalue(), "stderr": errout.getvalue()}


# --------------------------------------------------------------------------- tokens

PAYLOADS = [
    "s3cret",
    "",
    "päss—wörd 🔑 \"quoted\" \\ </script>",
    17,
    -1.5,
    True,
    None,
    ["a", "b"],
    {"user": "svc", "password": "hunter2", "ports": [1, 2], "nested": {"z": 1, "a": None}},
]

READER_SCOPES = ["", "api", "db", "other"]


def gen_encrypt() -> list:
    """Tokens minted by flechtctl.encrypt under each keyring and scope, each read under every reader scope."""
    cases = [
        ("oct", ""), ("oct", "api"), ("oct", "db"),
        ("oct-scoped", ""), ("oct-scoped", "db"), ("oct-scoped", "api"),
        ("full", ""), ("full", "api"), ("full", "other"),
        ("writer", "api"), ("recipient-primary", "api"),
        ("python-fixture", ""), ("python-fixture", "api_key"), ("non-ascii", "zähler"),
        ("python-fixture-asymmetric", "api_key"),
    ]
    out = []
    for name, scope in cases:
        kr = KEYRINGS[name]
        for i, value in enumerate(PAYLOADS):
            if i > 0 and (name, scope) not in (("oct", ""), ("oct", "api"), ("full", "api")):
                break  # every payload under three configurations, one payload under the rest
            token = encrypt(kr, value, scope=scope)
            reads = {}
            for reader in (name, *(["full"] if name == "writer" else []), *(["python-fixture-asymmetric"] if name == "python-fixture-asymmetric-writer" else [])):
                for reader_scope in sorted({*READER_SCOPES, scope}):
                    reads.setdefault(reader, {})[reader_scope] = outcome(decrypt, KEYRINGS[reader], token, scope=reader_scope)
            out.append({
                "keyring": name, "scope": scope, "value": value,
                "payload": tokens.canonical_json(value).decode("utf-8"),
                "token": token, "header": header_of(token), "kid": kid_of(token),
                "decrypt": reads,
            })
    # What a seal-only writer writes, read by the full keyring that holds the private half.
    token = encrypt(KEYRINGS["python-fixture-asymmetric-writer"], "from-writer", scope="api_key")
    out.append({
        "keyring": "python-fixture-asymmetric-writer", "scope": "api_key", "value": "from-writer",
        "payload": '"from-writer"', "token": token, "header": header_of(token), "kid": kid_of(token),
        "decrypt": {
            "python-fixture-asymmetric": {s: outcome(decrypt, KEYRINGS["python-fixture-asymmetric"], token, scope=s) for s in ("", "api_key", "other")},
            "python-fixture-asymmetric-writer": {"api_key": outcome(decrypt, KEYRINGS["python-fixture-asymmetric-writer"], token, scope="api_key")},
        },
    })
    return out


def gen_ratchet() -> list:
    """The scope ratchet as a table: a token stamped with `writer` read by a codec declaring `reader`."""
    kr = KEYRINGS["oct"]
    rows = []
    for writer in ["", "api", "db"]:
        token = encrypt(kr, "v", scope=writer)
        for reader in ["", "api", "db"]:
            r = outcome(decrypt, kr, token, scope=reader)
            rows.append({"writer_scope": writer, "reader_scope": reader, "accept": r["ok"],
                         **({"error": r["error"]} if not r["ok"] else {}), "token": token})
    # A key bound to scopes: only tokens stamped with one of its scopes open, whatever the reader says.
    bound_reader = KEYRINGS["oct-scoped"]
    for writer in ["", "db", "api"]:
        token = encrypt(KEYRINGS["oct-scoped-unbound"], "v", scope=writer)  # sealed by oct-scoped, unbound
        for reader in ["", "db", "api"]:
            r = outcome(decrypt, bound_reader, token, scope=reader)
            rows.append({"writer_scope": writer, "reader_scope": reader, "key_bound_to": ["db"], "accept": r["ok"],
                         **({"error": r["error"]} if not r["ok"] else {}), "token": token})
    return rows


def gen_encrypt_errors() -> list:
    """Sealing refused before any token exists."""
    cases = [
        ("oct-scoped", "", "unscoped under a primary that is unbound works; listed as a control"),
        ("recipient-primary", "", "the primary is bound to 'api': an unscoped value cannot be sealed"),
        ("recipient-primary", "db", "scope outside the primary's binding"),
        ("full", "api2", "no sealing key configured for 'api2': the unbound primary seals it"),
    ]
    out = []
    for name, scope, note in cases:
        r = outcome(encrypt, KEYRINGS[name], "v", scope=scope)
        if r["ok"]:
            r = {"ok": True, "header": header_of(r["value"])}
        out.append({"keyring": name, "scope": scope, "note": note, **r})
    # A bound key named for a scope outside its binding cannot even be built.
    out.append({"keyring": None, "scope": "api", "note": "primaries maps a scope to a key bound elsewhere: refused at construction",
                **outcome(lambda: Keyring.of({"a": OCT["oct-2026-01"]}, primary="a", primaries={"api": "a"}, scopes={"a": {"db"}}) and None)})
    return out


def gen_malformed_tokens() -> list:
    kr = KEYRINGS["full"]
    good = encrypt(kr, "v")  # dir under oct-2026-01, unscoped
    good_scoped = encrypt(kr, "v", scope="api")  # ECDH-ES to rec-api
    s = segments(good)
    rs = segments(good_scoped)
    key = OctKey.import_key(OCT["oct-2026-01"])
    cases: list[tuple[str, str, str, str]] = []  # (name, token, reader scope, note)

    def add(name, token, scope="", note=""):
        cases.append((name, token, scope, note))

    hdr = lambda d: b64u(json.dumps(d, separators=(",", ":")).encode())  # noqa: E731
    add("control-dir", good)
    add("control-ecdh", good_scoped, "api")
    add("not-flenc", "hello", note="decrypt does not check the scheme first: the first six characters are dropped as if they were 'flenc:'")
    add("other-envelope", "flenc:jws:" + ".".join(s))
    add("no-envelope", "flenc:" + ".".join(s))
    add("empty-compact", "flenc:jwe:")
    add("one-segment", "flenc:jwe:" + s[0])
    add("four-segments", with_segments(good, s[:4]))
    add("six-segments", with_segments(good, [*s, s[4]]))
    add("header-not-base64", with_segments(good, ["!!!", *s[1:]]))
    add("header-not-json", with_segments(good, [b64u(b"not json"), *s[1:]]))
    add("header-not-object", with_segments(good, [b64u(b"[1]"), *s[1:]]))
    add("header-no-kid", with_segments(good, [hdr({"alg": "dir", "enc": "A256GCM"}), *s[1:]]))
    add("header-kid-number", with_segments(good, [hdr({"alg": "dir", "enc": "A256GCM", "kid": 7}), *s[1:]]))
    add("header-kid-empty", with_segments(good, [hdr({"alg": "dir", "enc": "A256GCM", "kid": ""}), *s[1:]]))
    add("unknown-kid", with_segments(good, [hdr({"alg": "dir", "enc": "A256GCM", "kid": "nobody"}), *s[1:]]))
    add("header-reencoded", with_segments(good, [b64u(json.dumps({"alg": "dir", "enc": "A256GCM", "kid": "oct-2026-01"}).encode()), *s[1:]]),
        note="the same header fields re-encoded with other JSON spacing: the AAD differs, the tag fails")
    add("header-padded", with_segments(good, [s[0] + "=" * (-len(s[0]) % 4 or 4), *s[1:]]),
        note="base64 padding on the header: the kid is read leniently, joserfc then refuses the segment")
    add("iv-flipped", with_segments(good, [s[0], s[1], flip(s[2]), s[3], s[4]]))
    add("ciphertext-flipped", with_segments(good, [s[0], s[1], s[2], flip(s[3]), s[4]]))
    add("tag-flipped", with_segments(good, [s[0], s[1], s[2], s[3], flip(s[4], 15)]))
    add("tag-truncated", with_segments(good, [s[0], s[1], s[2], s[3], b64u(unb64u(s[4])[:12])]))
    add("iv-short", with_segments(good, [s[0], s[1], b64u(unb64u(s[2])[:8]), s[3], s[4]]))
    add("dir-with-encrypted-key", with_segments(good, [s[0], "AAAA", *s[2:]]))
    add("ciphertext-bad-base64", with_segments(good, [s[0], s[1], s[2], s[3] + "=", s[4]]))
    add("ecdh-flipped-encrypted-key", with_segments(good_scoped, [rs[0], flip(rs[1]), *rs[2:]]), "api")
    add("ecdh-read-by-seal-only-keyring", good_scoped, "api", "the writer keyring holds only rec-api's public half")
    # Headers flechtctl never writes, minted by joserfc under the right key: what does the reader allow?
    add("alg-a128gcm", mint_jwe({"alg": "dir", "enc": "A128GCM", "kid": "x16"}, b'"v"', OctKey.import_key(OCT["oct-2026-01"][:16]), ["dir", "A128GCM"]),
        note="kid x16 is not in the keyring: unknown kid wins before the algorithm")
    add("enc-a128cbc", mint_jwe({"alg": "dir", "enc": "A128CBC-HS256", "kid": "oct-2026-01"}, b'"v"', key, ["dir", "A128CBC-HS256"]))
    add("alg-a256kw-under-oct-kid", mint_jwe({"alg": "A256KW", "enc": "A256GCM", "kid": "oct-2026-01"}, b'"v"', key, ["A256KW", "A256GCM"]))
    add("zip-def", mint_jwe({"alg": "dir", "enc": "A256GCM", "kid": "oct-2026-01", "zip": "DEF"}, b'"v"', key, ["dir", "A256GCM", "DEF"]))
    add("typ-and-cty", mint_jwe({"alg": "dir", "enc": "A256GCM", "kid": "oct-2026-01", "typ": "x", "cty": "y"}, b'"v"', key, ["dir", "A256GCM"]),
        note="registered JOSE header parameters beyond the three flechtctl writes")
    add("unregistered-header", mint_jwe({"alg": "dir", "enc": "A256GCM", "kid": "oct-2026-01", "x-extra": 1}, b'"v"', key, ["dir", "A256GCM"]))
    add("crit-flenc-scope", mint_jwe({"alg": "dir", "enc": "A256GCM", "kid": "oct-2026-01", "flenc_scope": "api", "crit": ["flenc_scope"]}, b'"v"', key, ["dir", "A256GCM"]), "api")
    add("scope-empty-string", mint_jwe({"alg": "dir", "enc": "A256GCM", "kid": "oct-2026-01", "flenc_scope": ""}, b'"v"', key, ["dir", "A256GCM"]))
    add("scope-empty-string-read-scoped", cases[-1][1], "api")
    add("scope-number", mint_jwe({"alg": "dir", "enc": "A256GCM", "kid": "oct-2026-01", "flenc_scope": 5}, b'"v"', key, ["dir", "A256GCM"]), "api")
    add("header-order-kid-first", mint_jwe({"kid": "oct-2026-01", "enc": "A256GCM", "alg": "dir"}, b'"v"', key, ["dir", "A256GCM"]),
        note="any member order in the header is fine: the AAD is the segment as received")
    add("ecdh-token-under-oct-kid", mint_jwe({"alg": "ECDH-ES+A256KW", "enc": "A256GCM", "kid": "oct-2026-01"}, b'"v"',
                                             OKPKey.import_key({"crv": "X25519", "kty": "OKP", "x": b64u(REC["rec-api"].public)}), ["ECDH-ES+A256KW", "A256GCM"]))
    add("dir-token-under-recipient-kid", mint_jwe({"alg": "dir", "enc": "A256GCM", "kid": "rec-api", "flenc_scope": "api"}, b'"v"', key, ["dir", "A256GCM"]), "api")
    add("ecdh-es-direct", mint_jwe({"alg": "ECDH-ES", "enc": "A256GCM", "kid": "rec-api", "flenc_scope": "api"}, b'"v"',
                                   OKPKey.import_key({"crv": "X25519", "kty": "OKP", "x": b64u(REC["rec-api"].public)}), ["ECDH-ES", "A256GCM"]), "api")
    add("ecdh-with-apu-apv", mint_jwe({"alg": "ECDH-ES+A256KW", "enc": "A256GCM", "kid": "rec-api", "flenc_scope": "api", "apu": b64u(b"alice"), "apv": b64u(b"bob")}, b'"v"',
                                      OKPKey.import_key({"crv": "X25519", "kty": "OKP", "x": b64u(REC["rec-api"].public)}), ["ECDH-ES+A256KW", "A256GCM"]), "api",
        note="apu/apv are optional ECDH-ES header parameters; they enter the Concat KDF")
    epk_zero = {**json.loads(unb64u(rs[0])), "epk": {"crv": "X25519", "x": b64u(bytes(32)), "kty": "OKP"}}
    add("ecdh-low-order-epk", with_segments(good_scoped, [b64u(json.dumps(epk_zero, separators=(",", ":")).encode()), *rs[1:]]), "api",
        note="an all-zero ephemeral public key: the X25519 exchange itself fails (all-zero shared secret)")
    add("payload-not-json", mint_jwe({"alg": "dir", "enc": "A256GCM", "kid": "oct-2026-01"}, b"not json", key, ["dir", "A256GCM"]),
        note="decrypt_bytes succeeds; decrypt's JSON parse fails with a plain JSONDecodeError (not a SecretError)")
    add("payload-not-utf8", mint_jwe({"alg": "dir", "enc": "A256GCM", "kid": "oct-2026-01"}, b"\xff\xfe", key, ["dir", "A256GCM"]))
    out = []
    for name, token, scope, note in cases:
        reader = "writer" if name == "ecdh-read-by-seal-only-keyring" else "full"
        entry = {"name": name, "token": token, "keyring": reader, "scope": scope,
                 "decrypt": outcome(decrypt, KEYRINGS[reader], token, scope=scope),
                 "decrypt_bytes": _hex_outcome(outcome(decrypt_bytes, KEYRINGS[reader], token, scope=scope)),
                 "kid_of": outcome(kid_of, token), "read_header": outcome(read_header, token),
                 "is_encrypted": is_encrypted(token)}
        if note:
            entry["note"] = note
        out.append(entry)
    return out


def _hex_outcome(r: dict) -> dict:
    if r["ok"]:
        return {"ok": True, "value_hex": r["value"].hex()}
    return r


def gen_limits() -> dict:
    """joserfc's size limits, probed: the largest payloads and scopes that still round-trip."""
    kr = KEYRINGS["full"]

    def largest(make, lo: int, hi: int) -> int:
        while lo < hi:  # largest n in [lo, hi] for which make(n) succeeds
            mid = (lo + hi + 1) // 2
            if make(mid):
                lo = mid
            else:
                hi = mid - 1
        return lo

    def roundtrip_payload(n: int) -> bool:
        payload = b'"' + b"a" * (n - 2) + b'"'
        try:
            return decrypt_bytes(kr, encrypt_bytes(kr, payload)) == payload
        except Exception:  # noqa: BLE001
            return False

    def encrypts(n: int) -> bool:
        try:
            encrypt_bytes(kr, b'"' + b"a" * (n - 2) + b'"')
            return True
        except Exception:  # noqa: BLE001
            return False

    def roundtrip_scope(n: int, scope_keyring: str, sign_it: bool = False) -> bool:
        scope = "s" * n
        k = Keyring.of({"oct-2026-01": OCT["oct-2026-01"]}, primary="oct-2026-01",
                       signers={"sig-api": SIG["sig-api"]}, scopes={"sig-api": {scope}}, signing={scope: "sig-api"})
        try:
            if sign_it:
                return verify(k, sign(k, "v", scope=scope), scope=scope) == "v"
            return decrypt(k, encrypt(k, "v", scope=scope), scope=scope) == "v"
        except Exception:  # noqa: BLE001
            return False

    def verify_payload(n: int) -> bool:
        payload = b'"' + b"a" * (n - 2) + b'"'
        try:
            return tokens.verify_bytes(KEYRINGS["full"], tokens.sign_bytes(KEYRINGS["full"], payload, scope="api"), scope="api") == payload
        except Exception:  # noqa: BLE001
            return False

    def signs(n: int) -> bool:
        try:
            tokens.sign_bytes(KEYRINGS["full"], b'"' + b"a" * (n - 2) + b'"', scope="api")
            return True
        except Exception:  # noqa: BLE001
            return False

    biggest = largest(roundtrip_payload, 3, 200000)
    biggest_signed = largest(verify_payload, 3, 400000)
    too_big = encrypt_bytes(kr, b'"' + b"a" * (biggest - 1) + b'"')
    return {
        "dir_max_payload_bytes": biggest,
        "dir_payload_one_more_encrypts": encrypts(biggest + 1),
        "dir_payload_one_more_decrypt": _hex_outcome(outcome(decrypt_bytes, kr, too_big))["error"],
        "dir_max_scope_chars": largest(lambda n: roundtrip_scope(n, "oct"), 1, 4000),
        "jws_max_payload_bytes": biggest_signed,
        "jws_payload_one_more_signs": signs(biggest_signed + 1),
        "jws_max_scope_chars": largest(lambda n: roundtrip_scope(n, "oct", True), 1, 4000),
        "note": "joserfc's registry caps (JWE: header segment 1024 chars, ciphertext segment 65536 chars; "
                "JWS: header segment 512 chars, payload segment 128000 chars) apply on reading only: a token "
                "one byte over is written and then refused",
    }


# --------------------------------------------------------------------------- signatures

def gen_sign() -> list:
    out = []
    cases = [("full", "api"), ("full", "other"), ("full", "api2"), ("python-fixture-asymmetric", "api_key")]
    for name, scope in cases:
        for i, value in enumerate(PAYLOADS):
            if i > 0 and (name, scope) != ("full", "api"):
                break
            token = sign(KEYRINGS[name], value, scope=scope)
            reads = {}
            readers = [name] + (["verifier"] if name == "full" else [])
            for reader in readers:
                for reader_scope in sorted({"api", "other", "api2", scope}):
                    reads.setdefault(reader, {})[reader_scope] = outcome(verify, KEYRINGS[reader], token, scope=reader_scope)
            out.append({"keyring": name, "scope": scope, "value": value,
                        "payload": tokens.canonical_json(value).decode("utf-8"), "token": token,
                        "header": header_of(token), "signer": signer_of(token), "verify": reads})
    return out


def gen_sign_errors() -> list:
    out = []
    for name, scope, note in [
        ("full", "", "a signature needs a scope"),
        ("full", "db", "no signing key for the scope"),
        ("verifier", "api", "a public-only signer cannot sign"),
        ("oct", "api", "no signing key at all"),
    ]:
        out.append({"keyring": name, "scope": scope, "note": note, **outcome(sign, KEYRINGS[name], "v", scope=scope)})
    return out


def gen_malformed_signatures() -> list:
    kr = KEYRINGS["full"]
    good = sign(kr, "v", scope="api")
    s = segments(good)
    priv = OKPKey.import_key({"crv": "Ed25519", "kty": "OKP", "x": b64u(SIG["sig-api"].public), "d": b64u(SIG["sig-api"].private)})
    hdr = lambda d: b64u(json.dumps(d, separators=(",", ":")).encode())  # noqa: E731
    cases = [
        ("control", good, "api", ""),
        ("read-unscoped", good, "", "verify needs a scope"),
        ("scope-mismatch", good, "other", ""),
        ("not-flsig", "flenc:jwe:" + ".".join(s), "api", "verify does not check the scheme first"),
        ("other-envelope", "flsig:jwe:" + ".".join(s), "api", ""),
        ("payload-changed", with_segments(good, [s[0], b64u(b'"w"'), s[2]]), "api", ""),
        ("signature-flipped", with_segments(good, [s[0], s[1], flip(s[2])]), "api", ""),
        ("signature-not-base64", with_segments(good, [s[0], s[1], s[2] + "="]), "api", ""),
        ("two-segments", with_segments(good, s[:2]), "api", ""),
        ("unknown-signer", with_segments(good, [hdr({"alg": "Ed25519", "flenc_scope": "api", "kid": "nobody"}), s[1], s[2]]), "api", ""),
        ("alg-eddsa", mint_jws({"alg": "EdDSA", "flenc_scope": "api", "kid": "sig-api"}, b'"v"', priv, ["EdDSA"]), "api",
         "the deprecated polymorphic name: refused, only 'Ed25519' is allowed"),
        ("no-scope", mint_jws({"alg": "Ed25519", "kid": "sig-api"}, b'"v"', priv, ["Ed25519"]), "api", ""),
        ("b64-false", mint_jws({"alg": "Ed25519", "flenc_scope": "api", "kid": "sig-api", "b64": False, "crit": ["b64"]}, b'"v"', priv, ["Ed25519"]), "api",
         "RFC 7797 unencoded payload"),
        ("typ-header", mint_jws({"alg": "Ed25519", "flenc_scope": "api", "kid": "sig-api", "typ": "x"}, b'"v"', priv, ["Ed25519"]), "api", ""),
        ("unregistered-header", mint_jws({"alg": "Ed25519", "flenc_scope": "api", "kid": "sig-api", "x-extra": 1}, b'"v"', priv, ["Ed25519"]), "api", ""),
        ("signer-bound-elsewhere", mint_jws({"alg": "Ed25519", "flenc_scope": "db", "kid": "sig-api"}, b'"v"', priv, ["Ed25519"]), "db",
         "a valid signature by sig-api over scope 'db', which sig-api is not bound to"),
        ("payload-not-json", mint_jws({"alg": "Ed25519", "flenc_scope": "api", "kid": "sig-api"}, b"not json", priv, ["Ed25519"]), "api", ""),
    ]
    out = []
    for name, token, scope, note in cases:
        entry = {"name": name, "token": token, "keyring": "full", "scope": scope,
                 "verify": outcome(verify, kr, token, scope=scope), "signer_of": outcome(signer_of, token),
                 "is_signed": is_signed(token)}
        if note:
            entry["note"] = note
        out.append(entry)
    return out


# --------------------------------------------------------------------------- reencrypt

def gen_reencrypt() -> list:
    out = []
    old = encrypt(KEYRINGS["oct-old-only"], {"k": "v"})
    for name, token, scope, note in [
        ("rotate-to-new-primary", old, "", "sealed under oct-2026-01, re-sealed under the new primary oct-2026-02"),
        ("promote-unscoped", old, "db", "oct-rotated has no binding: the unscoped token is promoted to scope 'db'"),
        ("cannot-strip-scope", encrypt(KEYRINGS["oct-rotated"], "v", scope="db"), "", "an unscoped reencrypt reads a scoped token: refused"),
        ("dir-to-recipient", encrypt(KEYRINGS["full"], "v", scope=""), "api", "from dir (oct primary) to ECDH-ES (rec-api seals 'api')"),
    ]:
        reader = "full" if name == "dir-to-recipient" else "oct-rotated"
        r = outcome(reencrypt, KEYRINGS[reader], token, scope=scope)
        entry = {"name": name, "keyring": reader, "token": token, "scope": scope, "note": note}
        if r["ok"]:
            entry.update(ok=True, reencrypted=r["value"], header=header_of(r["value"]),
                         payload_preserved=decrypt_bytes(KEYRINGS[reader], r["value"], scope=scope).hex())
        else:
            entry.update(ok=False, error=r["error"])
        out.append(entry)
    return out


# --------------------------------------------------------------------------- keyring documents

def jwks(*keys, **top) -> str:
    return json.dumps({"keys": list(keys), **top})


K1 = b64u(OCT["oct-2026-01"])
K2 = b64u(OCT["oct-2026-02"])
OCT1 = {"kty": "oct", "kid": "a", "k": K1}
X_API = {"kty": "OKP", "crv": "X25519", "kid": "x", "x": b64u(REC["rec-api"].public), "d": b64u(REC["rec-api"].private), "flenc_scopes": ["api"]}
ED_API = {"kty": "OKP", "crv": "Ed25519", "kid": "e", "x": b64u(SIG["sig-api"].public), "d": b64u(SIG["sig-api"].private), "flenc_scopes": ["api"]}


def gen_keyring_documents() -> list:
    """Keyring JSON documents, accepted or refused by Keyring.from_json."""
    std = base64.b64encode(OCT["oct-2026-01"]).decode()
    last_bits = K1[:-1] + chr(ord(K1[-1]) + 1)  # same bytes, different unused trailing bits
    assert unb64u(last_bits) == OCT["oct-2026-01"] or True
    docs = [
        ("minimal", jwks(OCT1, primary="a"), "accepted"),
        ("unknown-members-ignored", jwks({**OCT1, "use": "enc", "alg": "A256GCM", "key_ops": ["encrypt"], "extra": 1}, primary="a", extra={"x": 1}), "accepted"),
        ("k-padded", jwks({**OCT1, "k": base64.urlsafe_b64encode(OCT["oct-2026-01"]).decode()}, primary="a"), "accepted: padding is tolerated"),
        ("k-standard-alphabet", jwks({**OCT1, "k": std.rstrip("=")}, primary="a"), "accepted when it has '+' or '/': both alphabets are read"),
        ("k-nonzero-trailing-bits", jwks({**OCT1, "k": last_bits}, primary="a"), "accepted: unused trailing bits are ignored"),
        ("k-whitespace", jwks({**OCT1, "k": K1[:10] + " " + K1[10:]}, primary="a"), ""),
        ("k-44-chars", jwks({**OCT1, "k": K1 + "A"}, primary="a"), "decodes (33 bytes), then the length is refused"),
        ("k-length-1-mod-4", jwks({**OCT1, "k": K1 + "AA"}, primary="a"), ""),
        ("k-bad-character", jwks({**OCT1, "k": K1[:-1] + "*"}, primary="a"), ""),
        ("k-16-bytes", jwks({**OCT1, "k": b64u(OCT["oct-2026-01"][:16])}, primary="a"), ""),
        ("k-missing", jwks({"kty": "oct", "kid": "a"}, primary="a"), ""),
        ("k-number", jwks({**OCT1, "k": 5}, primary="a"), ""),
        ("k-null", jwks({**OCT1, "k": None}, primary="a"), ""),
        ("not-json", "{keys", ""),
        ("empty-text", "", ""),
        ("not-object", "[]", ""),
        ("keys-not-list", json.dumps({"keys": {}, "primary": "a"}), ""),
        ("keys-missing", json.dumps({"primary": "a"}), ""),
        ("keys-empty", jwks(primary="a"), ""),
        ("primary-missing", jwks(OCT1), ""),
        ("primary-unknown", jwks(OCT1, primary="b"), ""),
        ("primary-number", jwks(OCT1, primary=1), ""),
        ("primary-null", jwks(OCT1, primary=None), ""),
        ("jwk-not-object", jwks("a", primary="a"), ""),
        ("kty-missing", jwks({"kid": "a", "k": K1}, primary="a"), ""),
        ("kty-rsa", jwks({**OCT1, "kty": "RSA"}, primary="a"), ""),
        ("kty-lowercase-okp", jwks({**X_API, "kty": "okp"}, primary="x"), ""),
        ("kid-missing", jwks({"kty": "oct", "k": K1}, primary="a"), ""),
        ("kid-empty", jwks({**OCT1, "kid": ""}, primary=""), ""),
        ("kid-number", jwks({**OCT1, "kid": 1}, primary=1), ""),
        ("kid-duplicate", jwks(OCT1, {**OCT1, "k": K2}, primary="a"), ""),
        ("kid-duplicate-bad-material", jwks(OCT1, {**OCT1, "k": "*"}, primary="a"), "the duplicate is reported, not the material"),
        ("kid-duplicate-across-kinds", jwks(OCT1, {**ED_API, "kid": "a"}, primary="a"), ""),
        ("scopes-not-list", jwks({**OCT1, "flenc_scopes": "api"}, primary="a"), ""),
        ("scopes-empty", jwks({**OCT1, "flenc_scopes": []}, primary="a"), ""),
        ("scopes-empty-name", jwks({**OCT1, "flenc_scopes": [""]}, primary="a"), ""),
        ("scopes-number", jwks({**OCT1, "flenc_scopes": [1]}, primary="a"), ""),
        ("scopes-duplicates", jwks({**OCT1, "flenc_scopes": ["api", "api"]}, primary="a"), "accepted: a set"),
        ("oct-bound", jwks({**OCT1, "flenc_scopes": ["db"]}, primary="a"), "accepted, and the primary then cannot seal unscoped"),
        ("x25519", jwks(OCT1, X_API, primary="a", flenc_primaries={"api": "x"}), "accepted"),
        ("x25519-public-only", jwks(OCT1, {k: v for k, v in X_API.items() if k != "d"}, primary="a", flenc_primaries={"api": "x"}), "accepted"),
        ("x25519-unbound", jwks(OCT1, {k: v for k, v in X_API.items() if k != "flenc_scopes"}, primary="a"), ""),
        ("x25519-primary", jwks(X_API, primary="x"), "accepted: a recipient may be the primary"),
        ("x25519-mismatched-halves", jwks(OCT1, {**X_API, "d": b64u(REC["rec-other"].private)}, primary="a", flenc_primaries={"api": "x"}),
         "accepted here: the halves are only checked when the key is used"),
        ("okp-crv-missing", jwks(OCT1, {k: v for k, v in X_API.items() if k != "crv"}, primary="a"), ""),
        ("okp-crv-p256", jwks(OCT1, {**X_API, "crv": "P-256"}, primary="a"), ""),
        ("okp-crv-x448", jwks(OCT1, {**X_API, "crv": "X448"}, primary="a"), ""),
        ("okp-x-missing", jwks(OCT1, {k: v for k, v in X_API.items() if k != "x"}, primary="a"), ""),
        ("okp-x-31-bytes", jwks(OCT1, {**X_API, "x": b64u(REC["rec-api"].public[:31])}, primary="a"), ""),
        ("okp-d-33-bytes", jwks(OCT1, {**X_API, "d": b64u(REC["rec-api"].private + b"\0")}, primary="a"), ""),
        ("okp-d-bad-base64", jwks(OCT1, {**X_API, "d": "*"}, primary="a"), ""),
        ("ed25519", jwks(OCT1, ED_API, primary="a", flenc_signing={"api": "e"}), "accepted"),
        ("ed25519-primary", jwks(OCT1, ED_API, primary="e"), "a signing key cannot be the primary"),
        ("ed25519-only", jwks(ED_API, primary="e"), ""),
        ("ed25519-unbound", jwks(OCT1, {k: v for k, v in ED_API.items() if k != "flenc_scopes"}, primary="a"), ""),
        ("primaries-not-object", jwks(OCT1, X_API, primary="a", flenc_primaries=["x"]), ""),
        ("primaries-kid-number", jwks(OCT1, X_API, primary="a", flenc_primaries={"api": 1}), ""),
        ("primaries-empty-scope", jwks(OCT1, X_API, primary="a", flenc_primaries={"": "a"}), ""),
        ("primaries-unknown-kid", jwks(OCT1, X_API, primary="a", flenc_primaries={"api": "nobody"}), ""),
        ("primaries-signer", jwks(OCT1, ED_API, primary="a", flenc_primaries={"api": "e"}), ""),
        ("primaries-outside-binding", jwks(OCT1, X_API, primary="a", flenc_primaries={"db": "x"}), ""),
        ("primaries-unbound-oct", jwks(OCT1, {**OCT1, "kid": "b", "k": K2}, primary="a", flenc_primaries={"db": "b"}), "accepted"),
        ("signing-not-object", jwks(OCT1, ED_API, primary="a", flenc_signing="e"), ""),
        ("signing-oct", jwks(OCT1, ED_API, primary="a", flenc_signing={"api": "a"}), ""),
        ("signing-public-only", jwks(OCT1, {k: v for k, v in ED_API.items() if k != "d"}, primary="a", flenc_signing={"api": "e"}), ""),
        ("signing-outside-binding", jwks(OCT1, ED_API, primary="a", flenc_signing={"db": "e"}), ""),
        ("signing-empty-scope", jwks(OCT1, ED_API, primary="a", flenc_signing={"": "e"}), ""),
        ("protected-document", encrypt_keyring(KEYRINGS["oct"], "correct horse battery"), "a password-protected file given to from_json"),
    ]
    out = []
    for name, text, note in docs:
        r = outcome(Keyring.from_json, text)
        entry = {"name": name, "json": text, "accepted": r["ok"]}
        if r["ok"]:
            kr = r["value"]
            entry["canonical_json"] = kr.to_json()
        else:
            entry["error"] = r["error"]
        if note:
            entry["note"] = note
        out.append(entry)
    # Mismatched X25519 halves: loads, then fails on use.
    kr = Keyring.from_json(jwks(OCT1, {**X_API, "d": b64u(REC["rec-other"].private)}, primary="a", flenc_primaries={"api": "x"}))
    sealed = encrypt(Keyring.from_json(jwks(OCT1, {k: v for k, v in X_API.items() if k != "d"}, primary="a", flenc_primaries={"api": "x"})), "v", scope="api")
    out.append({"name": "x25519-mismatched-halves-in-use", "json": kr.to_json(), "accepted": True,
                "encrypt": outcome(encrypt, kr, "v", scope="api"), "decrypt_token": sealed,
                "decrypt": outcome(decrypt, kr, sealed, scope="api"),
                "note": "the mismatch surfaces as KeyringError (not a SecretError) on sealing and on opening"})
    return out


PASSWORD = "correct horse battery staple"


def gen_protected_keyrings() -> list:
    out = []
    for name in ("oct", "full"):
        text = encrypt_keyring(KEYRINGS[name], PASSWORD)
        out.append({"name": f"{name}-protected", "keyring": name, "password": PASSWORD, "text": text + "\n",
                    "header": json.loads(unb64u(text.split(".")[0])), "is_encrypted_keyring": is_encrypted_keyring(text + "\n"),
                    "plain_json": KEYRINGS[name].to_json(),
                    "open": _kr_outcome(outcome(decrypt_keyring, text + "\n", PASSWORD)),
                    "show": run_cli(["keyring", "show", "KEYRING"], keyring_text=text + "\n", password=PASSWORD)})
    text = out[0]["text"]
    s = text.strip().split(".")
    raw_pw = OctKey.import_key(PASSWORD.encode())
    doc = KEYRINGS["oct"].to_json().encode()

    def pbes2(header: dict, payload: bytes = doc, password: bytes = PASSWORD.encode()) -> str:
        return jwe.encrypt_compact(header, payload, OctKey.import_key(password),
                                   registry=jwe.JWERegistry(algorithms=[header["alg"], header["enc"]], strict_check_header=False))

    base = {"alg": "PBES2-HS512+A256KW", "cty": "jwk-set+json", "enc": "A256GCM"}
    cases = [
        ("wrong-password", text, "correct horse battery stapler", ""),
        ("short-password", text, "short", "under 14 UTF-8 bytes: refused before any PBKDF2"),
        ("short-password-on-write", None, "13-bytes-long", "encrypt_keyring refuses it too"),
        ("password-14-bytes", pbes2({**base, "p2c": 1000}, password=b"14-bytes-long!"), "14-bytes-long!", "the shortest password accepted"),
        ("tampered-ciphertext", ".".join([*s[:3], flip(s[3]), s[4]]), PASSWORD, ""),
        ("tampered-header", ".".join([b64u(json.dumps({**json.loads(unb64u(s[0])), "p2c": 210001}, separators=(",", ":")).encode()), *s[1:]]), PASSWORD, ""),
        ("p2c-1000", pbes2({**base, "p2c": 1000}), PASSWORD, "any iteration count joserfc accepts opens"),
        ("p2c-300000", pbes2({**base, "p2c": 300000}), PASSWORD, "joserfc's ceiling, inclusive"),
        ("p2c-300001", None, PASSWORD, "over joserfc's ceiling (minted by hand: joserfc will not write it)"),
        ("p2c-999", pbes2({**base, "p2c": 999}), PASSWORD, "below 1000: joserfc warns (SecurityWarning) and opens"),
        ("alg-pbes2-hs256", pbes2({**base, "alg": "PBES2-HS256+A128KW", "p2c": 1000}), PASSWORD, ""),
        ("enc-a128gcm", pbes2({**base, "enc": "A128GCM", "p2c": 1000}), PASSWORD, ""),
        ("no-cty", pbes2({"alg": "PBES2-HS512+A256KW", "enc": "A256GCM", "p2c": 1000}), PASSWORD,
         "not recognised as protected; from_json then fails on the JSON"),
        ("salt-8-bytes", pbes2({**base, "p2c": 1000, "p2s": b64u(b"8bytes!!")}), PASSWORD, "any salt length opens"),
        ("inner-not-keyring", pbes2({**base, "p2c": 1000}, payload=b'{"keys":[]}'), PASSWORD, "opens, then the keyring is refused"),
        ("unknown-header", pbes2({**base, "p2c": 1000, "x-extra": 1}), PASSWORD, ""),
    ]
    # p2c over the ceiling: take a p2c-1000 document and edit the header (the tag then fails too, but
    # joserfc refuses the header first).
    over = pbes2({**base, "p2c": 1000}).split(".")
    over_text = ".".join([b64u(json.dumps({**json.loads(unb64u(over[0])), "p2c": 300001}, separators=(",", ":")).encode()), *over[1:]])
    for name, doc_text, password, note in cases:
        if name == "p2c-300001":
            doc_text = over_text
        entry: dict = {"name": name, "password": password}
        if doc_text is None:
            entry["encrypt_keyring"] = outcome(lambda: encrypt_keyring(KEYRINGS["oct"], password) and None)
        else:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                entry.update(text=doc_text, is_encrypted_keyring=is_encrypted_keyring(doc_text),
                             open=_kr_outcome(outcome(decrypt_keyring, doc_text, password)),
                             from_json=_kr_outcome(outcome(Keyring.from_json, doc_text)))
            if caught:
                entry["warnings"] = sorted({f"{type(w.message).__name__}: {w.message}" for w in caught})
        if note:
            entry["note"] = note
        out.append(entry)
    return out


def _kr_outcome(r: dict) -> dict:
    if r["ok"]:
        return {"ok": True, "json": r["value"].to_json()}
    return r


def gen_is_encrypted_keyring() -> list:
    prot = encrypt_keyring(KEYRINGS["oct"], PASSWORD)
    cases = [KEYRINGS["oct"].to_json(), prot, prot + "\n", "  " + prot + "\n\n", "a.b.c.d.e", "", "flenc:jwe:x.y.z.w.v",
             encrypt(KEYRINGS["oct"], "v").split(":", 2)[2], ".".join([b64u(b'{"cty":"jwk-set+json"}'), "", "", "", ""])]
    return [{"text": t, "is_encrypted_keyring": is_encrypted_keyring(t)} for t in cases]


# --------------------------------------------------------------------------- CLI

def gen_cli() -> list:
    token = encrypt(KEYRINGS["full"], "s3cret", scope="api")
    signed = sign(KEYRINGS["full"], {"order": 17}, scope="api")
    full = KEYRINGS["full"].to_json()
    runs = [
        run_cli(["inspect", token]),
        run_cli(["inspect", signed]),
        run_cli(["inspect", "not a token"]),
        run_cli(["decrypt", "-k", "KEYRING", "--scope", "api", token], keyring_text=full),
        run_cli(["decrypt", "-k", "KEYRING", "--scope", "api", "--string", token], keyring_text=full),
        run_cli(["decrypt", "-k", "KEYRING", token], keyring_text=full),
        run_cli(["verify", "-k", "KEYRING", "--scope", "api", signed], keyring_text=full),
        run_cli(["sign", "-k", "KEYRING", "--scope", "api", '{"order": 17}'], keyring_text=full),
        run_cli(["sign", "-k", "KEYRING", "--scope", "api", "--string", "plain text"], keyring_text=full),
        run_cli(["encrypt", "-k", "KEYRING", "not json"], keyring_text=full),
        run_cli(["keyring", "export", "KEYRING", "rec-api"], keyring_text=full),
        run_cli(["keyring", "export", "KEYRING", "oct-2026-01"], keyring_text=full),
        run_cli(["keyring", "export", "KEYRING", "nobody"], keyring_text=full),
        run_cli(["keyring", "show", "KEYRING"], keyring_text=encrypt_keyring(KEYRINGS["oct"], PASSWORD)),
        run_cli(["keyring", "remove", "KEYRING", "oct-2026-01"], keyring_text=full),
    ]
    return runs


# --------------------------------------------------------------------------- flechtwerk's codecs

def gen_codecs() -> list:
    from flechtwerk.attribute import ANY, BYTES, DICT, INT, LIST, STR
    from flechtwerk.keyring import KeyringNotInstalledError  # noqa: F401 - the class the no-keyring case raises
    from flechtwerk.observer import Observer
    from flechtwerk.secrets import ENCRYPTED, SIGNED
    from flechtwerk.testing import installed_keyring

    class Events(Observer):
        def __init__(self) -> None:
            self.events: list = []

        def secret_decrypted(self, scope, kid):
            self.events.append(["secret_decrypted", scope, kid])

        def secret_plaintext_read(self, scope):
            self.events.append(["secret_plaintext_read", scope])

        def secret_verified(self, scope, kid):
            self.events.append(["secret_verified", scope, kid])

        def secret_unsigned_read(self, scope):
            self.events.append(["secret_unsigned_read", scope])

    codecs = [
        ("ENCRYPTED(STR)", ENCRYPTED(STR), "s3cret", ["plain"]),
        ("ENCRYPTED(STR, scope='api_key')", ENCRYPTED(STR, scope="api_key"), "s3cret", []),
        ("ENCRYPTED(STR, read_plaintext=True)", ENCRYPTED(STR, read_plaintext=True), "s3cret", ["plain"]),
        ("ENCRYPTED(STR, scope='api_key', read_plaintext=True)", ENCRYPTED(STR, scope="api_key", read_plaintext=True), "s3cret", ["plain"]),
        ("ENCRYPTED(INT)", ENCRYPTED(INT), 17, [17]),
        ("ENCRYPTED(BYTES)", ENCRYPTED(BYTES), b"\x00\xffraw", []),
        ("ENCRYPTED(LIST(STR))", ENCRYPTED(LIST(STR)), ["a", "b"], [["a", "b"]]),
        ("LIST(ENCRYPTED(STR))", LIST(ENCRYPTED(STR)), ["a", "b"], []),
        ("ENCRYPTED(DICT(ANY))", ENCRYPTED(DICT(ANY)), {"z": 1, "a": [True, None], "ü": "x"}, []),
        ("SIGNED(STR, scope='api_key')", SIGNED(STR, scope="api_key"), "signed", ["unsigned"]),
        ("ENCRYPTED(SIGNED(STR, scope='api_key'), scope='api_key')", ENCRYPTED(SIGNED(STR, scope="api_key"), scope="api_key"), "both", []),
    ]
    import logging

    class Capture(logging.Handler):
        def __init__(self) -> None:
            super().__init__(logging.DEBUG)
            self.lines: list = []

        def emit(self, record: logging.LogRecord) -> None:
            self.lines.append([record.levelname, record.name, record.getMessage()])

    capture = Capture()
    secrets_log = logging.getLogger("flechtwerk.secrets")
    secrets_log.addHandler(capture)
    secrets_log.propagate = False
    out = []
    kr = KEYRINGS["python-fixture-asymmetric"]
    for name, codec, value, plain_inputs in codecs:
        events = Events()
        with installed_keyring(kr, events):
            wire = codec.encode(value)
            back = codec.decode(wire)
            entry = {"codec": name, "keyring": "python-fixture-asymmetric", "value": _jsonable(value), "wire": wire,
                     "decoded": _jsonable(back), "events": list(events.events)}
            if isinstance(wire, str) and ":" in wire:
                entry["header"] = header_of(wire)
            events.events.clear()
            entry["plaintext_reads"] = []
            for raw in plain_inputs:
                r = outcome(codec.decode, raw)
                if r["ok"]:
                    r["value"] = _jsonable(r["value"])
                entry["plaintext_reads"].append({"wire": raw, **r, "events": list(events.events), "log": list(capture.lines)})
                events.events.clear()
                capture.lines.clear()
        out.append(entry)
    # Without a keyring: encoding, and decoding a token, raise the not-installed error; plaintext still does its thing.
    with installed_keyring(kr):
        token = ENCRYPTED(STR).encode("v")
    from flechtwerk.keyring import _override_secret_runtime, _restore_secret_runtime
    previous = _override_secret_runtime(None, None)
    try:
        out.append({"codec": "ENCRYPTED(STR)", "keyring": None,
                    "encode": outcome(lambda: ENCRYPTED(STR).encode("v")),
                    "decode_token": token, "decode": outcome(ENCRYPTED(STR).decode, token),
                    "decode_plaintext": outcome(ENCRYPTED(STR).decode, "plain"),
                    "decode_other_envelope": outcome(ENCRYPTED(STR).decode, "flenc:v2:xyz")})
    finally:
        _restore_secret_runtime(previous)
    # Decoding a token minted under another scope, through the codec (SEC-12 with the codec's error texts).
    with installed_keyring(kr):
        scoped = ENCRYPTED(STR, scope="api_key").encode("v")
        out.append({"codec": "ENCRYPTED(STR)", "keyring": "python-fixture-asymmetric", "decode_token": scoped,
                    "decode": outcome(ENCRYPTED(STR).decode, scoped),
                    "decode_as_other_scope": outcome(ENCRYPTED(STR, scope="other").decode, scoped)})
    return out


def _jsonable(v):
    if isinstance(v, bytes):
        return {"bytes_hex": v.hex()}
    return v


# --------------------------------------------------------------------------- main

def build() -> dict:
    global _DRBG
    _DRBG = _Drbg(b"flechtwerk secrets golden vectors")
    KEYRINGS.clear()
    KEYRING_NOTES.clear()
    build_keyrings()
    data = {
        "meta": {
            "generator": "tests/golden/generate_secrets.py",
            "python": sys.version.split()[0],
            "flechtctl": version("flechtctl"),
            "flechtwerk": version("flechtwerk"),
            "joserfc": version("joserfc"),
            "cryptography": version("cryptography"),
            "randomness": "seeded (see the generator's header): tokens compare by decryption, not by bytes",
            "error_classes": {
                name: [c.__name__ for c in getattr(flechtctl, name).__mro__[1:-2]]
                for name in ("KeyringError", "UnknownKeyError", "SecretError", "SecretFormatError", "SecretDecryptError",
                             "PlaintextSecretError", "SecretSignatureError", "UnsignedSecretError")
            },
        },
        "keys": gen_keys(),
        "keyrings": gen_keyrings(),
        "encrypt": gen_encrypt(),
        "ratchet": gen_ratchet(),
        "encrypt_errors": gen_encrypt_errors(),
        "malformed_tokens": gen_malformed_tokens(),
        "sign": gen_sign(),
        "sign_errors": gen_sign_errors(),
        "malformed_signatures": gen_malformed_signatures(),
        "reencrypt": gen_reencrypt(),
        "keyring_documents": gen_keyring_documents(),
        "protected_keyrings": gen_protected_keyrings(),
        "is_encrypted_keyring": gen_is_encrypted_keyring(),
        "limits": gen_limits(),
        "cli": gen_cli(),
        "codecs": gen_codecs(),
    }
    return data


def render(data: dict) -> str:
    return json.dumps(data, ensure_ascii=True, indent=1, sort_keys=False) + "\n"


if __name__ == "__main__":
    text = render(build())
    if "--check" in sys.argv:
        same = OUT.exists() and OUT.read_text() == text
        print("secrets_vectors.json up to date" if same else "secrets_vectors.json DIFFERS")
        sys.exit(0 if same else 1)
    OUT.write_text(text)
    print(f"wrote {OUT} ({len(text)} bytes)")
