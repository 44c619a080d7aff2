"""The export file ``muster log export`` writes and ``muster sim --from-file`` reads: JSON lines.

The first line describes the export::

    {"muster_log_export": 1, "as_of": "2026-11-25T17:40:00+00:00", "since": null, "topics": [...]}

(``as_of``: when the topics were read, the end of the window; ``since``: the window's start, or null
for the whole log). Every further line is one record's value as it is on the wire: an envelope, in
the order the records were read.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO

import orjson

from schemas.codec import DecodeError, decode
from schemas.envelope import Envelope
from schemas.topics import (
    CAPACITY_TOPIC,
    CONFIG_TOPIC,
    DECISIONS_TOPIC,
    DISPATCHES_TOPIC,
    INTENTS_TOPIC,
    RUNS_TOPIC,
    STATUS_TOPIC,
)

EXPORT_VERSION = 1
#: topics read from ``--since`` on (the events of the window)
WINDOW_TOPICS = (INTENTS_TOPIC, DECISIONS_TOPIC, RUNS_TOPIC, DISPATCHES_TOPIC)
#: compacted topics read whole (the latest state of every key: nodes, configuration, job states)
STATE_TOPICS = (CAPACITY_TOPIC, CONFIG_TOPIC, STATUS_TOPIC)
REPLAY_TOPICS = WINDOW_TOPICS + STATE_TOPICS


@dataclass(frozen=True, slots=True)
class LogExport:
    as_of: datetime
    since: datetime | None
    envelopes: list[Envelope]
    undecodable: int = 0


def write_export(out: IO[bytes], values: Iterable[bytes], *, as_of: datetime, since: datetime | None) -> int:
    """Write the header and every record value (tombstones skipped); returns how many records were written."""
    header = {"muster_log_export": EXPORT_VERSION, "as_of": as_of.isoformat(),
              "since": since.isoformat() if since else None, "topics": list(REPLAY_TOPICS)}
    out.write(orjson.dumps(header) + b"\n")
    count = 0
    for value in values:
        out.write(value.replace(b"\n", b"") + b"\n")  # compact JSON holds no raw newline; never split a line
        count += 1
    return count


def read_export(path: str | Path) -> LogExport:
    """Read an export; raises ``ValueError`` naming the file when it is not one."""
    p = Path(path)
    with p.open("rb") as fh:
        first = fh.readline()
        try:
            header = orjson.loads(first)
        except orjson.JSONDecodeError:
            header = None
        if not isinstance(header, dict) or header.get("muster_log_export") != EXPORT_VERSION:
            raise ValueError(f"{p}: not a Muster log export (its first line must be the export header)")
        try:
            as_of = datetime.fromisoformat(header["as_of"])
            since = datetime.fromisoformat(header["since"]) if header.get("since") else None
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{p}: bad export header: {exc}") from None
        envelopes: list[Envelope] = []
        bad = 0
        for line in fh:
            if not line.strip():
                continue
            try:
                envelopes.append(decode(line.rstrip(b"\n")))
            except DecodeError:
                bad += 1
    return LogExport(as_of, since, envelopes, bad)
