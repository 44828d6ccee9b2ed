"""Reads, with Python's codecs, a record the Rust codecs wrote (tests/secrets_python.rs).

    python secrets_codec_read.py CASES.json

CASES: {"keyring": <JWK Set text>, "record": {<wire object>}, "fields": [[name, codec, inner], ...]}
where `codec` and `inner` are Python expressions over flechtwerk's codecs. Prints one JSON object:
for each field, {"ok": true, "value": inner.encode(codec.decode(wire))} or {"ok": false, "type":
..., "message": ...}, and the secret events Python's observer saw while decoding.
"""
import json
import sys

from flechtwerk.attribute import ANY, BOOL, DATE, DICT, FLOAT, INT, LIST, RECORD, SET, STR, TUPLE
from flechtwerk.observer import Observer
from flechtwerk.secrets import ENCRYPTED, SIGNED, Keyring
from flechtwerk.testing import installed_keyring

NAMES = dict(ANY=ANY, BOOL=BOOL, DATE=DATE, DICT=DICT, FLOAT=FLOAT, INT=INT, LIST=LIST, RECORD=RECORD,
             SET=SET, STR=STR, TUPLE=TUPLE, ENCRYPTED=ENCRYPTED, SIGNED=SIGNED)


class Events(Observer):
    def __init__(self) -> None:
        self.events: list[list[str]] = []

    def secret_decrypted(self, scope: str, kid: str) -> None:
        self.events.append(["secret_decrypted", scope, kid])

    def secret_verified(self, scope: str, kid: str) -> None:
        self.events.append(["secret_verified", scope, kid])


def main() -> None:
    cases = json.loads(open(sys.argv[1], encoding="utf-8").read())
    keyring = Keyring.from_json(cases["keyring"])
    events = Events()
    out = {}
    with installed_keyring(keyring, observer=events):
        for name, codec, inner in cases["fields"]:
            codec, inner = eval(codec, NAMES), eval(inner, NAMES)
            events.events.clear()
            try:
                value = inner.encode(codec.decode(cases["record"][name]))
                out[name] = {"ok": True, "value": value, "events": list(events.events)}
            except Exception as e:  # noqa: BLE001 - reported to the Rust side
                out[name] = {"ok": False, "type": type(e).__name__, "message": str(e)}
    print(json.dumps(out, ensure_ascii=False, sort_keys=True))


if __name__ == "__main__":
    main()
