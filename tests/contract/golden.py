"""The golden corpus: one envelope of every message type as it was released, under ``golden/``.

Each file is written once, when its type is first released, and never rewritten: every later version of
Muster must decode it, on its own topic, with the same meaning (``test_golden_corpus``). A new message type
gets its file with ``python -m tests.contract.golden`` (it writes only the types that have none, from
``tests.builders.messages.example_messages``); a change that cannot decode an old file is a breaking wire
change, which the wire policy (``docs/architecture.md``, "Changing a message") does not allow.
"""

from __future__ import annotations

import json
from pathlib import Path

from schemas.codec import encode
from schemas.envelope import Message, make_envelope
from schemas.topics import TOPIC_OF
from tests.builders.clock import T0

GOLDEN = Path(__file__).resolve().parent / "golden"


def golden_path(message: type[Message]) -> Path:
    return GOLDEN / f"{message.TYPE}.v{message.VERSION}.json"


def write_missing() -> list[Path]:
    """Write the golden file of every example message type that has none; the files written."""
    from tests.builders.messages import example_messages

    written = []
    for message in example_messages():
        path = golden_path(type(message))
        if path.exists():
            continue
        envelope = make_envelope(message, "golden", occurred_at=T0, event_id=f"golden-{message.TYPE.lower()}")
        record = {"topic": TOPIC_OF[message.TYPE], "key": message.key(), "value": json.loads(encode(envelope))}
        path.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        written.append(path)
    return written


if __name__ == "__main__":
    for done in write_missing():
        print(f"wrote {done}")
