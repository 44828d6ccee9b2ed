"""The Python side of tests/secrets_python.rs: flechtctl 0.17.0 reads what the Rust secrets core
wrote — keyring files (plain and password-protected), `flenc:` tokens, `flsig:` signatures — and
reports, case by case, what it made of them.

    eval "$(scripts/python-ref | grep '^PYTHON_REF=')"
    "$PYTHON_REF" tests/python/secrets_read.py CASES.json

CASES.json: {"keyrings": {name: JWK Set text}, "files": [text], "protected": [{"text", "password"}],
"tokens": [{"keyring", "token", "scope"}], "signatures": [{"keyring", "token", "scope"}]}.
Prints one JSON object with the same lists, each case answered by {"ok": true, "value": ...} (the
keyring's `to_json()`, or the payload as text) or {"ok": false, "type": <exception class>,
"message": str(exc)}.
"""
import json
import sys

from flechtctl import Keyring, decrypt_keyring
from flechtctl.tokens import decrypt_bytes, verify_bytes


def outcome(fn, *args, **kwargs) -> dict:
    try:
        value = fn(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 - every refusal is an answer
        return {"ok": False, "type": type(e).__name__, "message": str(e)}
    if isinstance(value, Keyring):
        value = value.to_json()
    elif isinstance(value, bytes):
        value = value.decode("utf-8")
    return {"ok": True, "value": value}


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as f:
        cases = json.load(f)
    keyrings = {name: Keyring.from_json(text) for name, text in cases["keyrings"].items()}
    out = {
        "files": [outcome(Keyring.from_json, text) for text in cases["files"]],
        "protected": [outcome(decrypt_keyring, c["text"], c["password"]) for c in cases["protected"]],
        "tokens": [outcome(decrypt_bytes, keyrings[c["keyring"]], c["token"], scope=c["scope"]) for c in cases["tokens"]],
        "signatures": [outcome(verify_bytes, keyrings[c["keyring"]], c["token"], scope=c["scope"]) for c in cases["signatures"]],
    }
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
