"""Generate the JSON Schema files of the wire contract into ``schemas/json``; ``--check`` reports drift.

    python -m schemas.generate          # rewrite the files
    python -m schemas.generate --check  # exit 1 if the files differ from the models
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import orjson

from schemas.config import MusterConfig
from schemas.envelope import Message, RawEnvelope
from schemas.jobspec import JobSpec
from schemas.topics import TOPICS

JSON_DIR = Path(__file__).parent / "json"


def _envelope_schema(cls: type[Message], topic: str) -> dict[str, Any]:
    envelope = RawEnvelope.model_json_schema()
    payload = cls.model_json_schema()
    defs = {**envelope.pop("$defs", {}), **payload.pop("$defs", {})}
    props = envelope["properties"]
    props["type"] = {"const": cls.TYPE, "title": "Type", "type": "string"}
    props["schema_version"] = {"const": cls.VERSION, "title": "Schema Version", "type": "integer"}
    props["payload"] = payload
    envelope["title"] = f"{cls.TYPE} v{cls.VERSION} on {topic}"
    envelope["description"] = (cls.__doc__ or "").strip() or f"{cls.TYPE} message"
    if defs:
        envelope["$defs"] = defs
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **envelope}


def generate() -> dict[str, bytes]:
    """Relative file path -> file content, for every public message and document."""
    files: dict[str, dict[str, Any]] = {
        "envelope.json": RawEnvelope.model_json_schema(),
        "jobspec.json": JobSpec.model_json_schema(),
        "cluster-config.json": MusterConfig.model_json_schema(),
        "topics.json": {"topics": [t.document() for t in TOPICS.values()]},
    }
    for topic in TOPICS.values():
        for cls in topic.messages:
            files[f"{topic.name}/{cls.TYPE}.v{cls.VERSION}.json"] = _envelope_schema(cls, topic.name)
    return {name: orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"
            for name, doc in files.items()}


def drift(directory: Path = JSON_DIR) -> list[str]:
    """Files that are missing, stale or unexpected compared with the models."""
    wanted = generate()
    problems = [f"stale or missing: {name}" for name, content in wanted.items()
                if not (directory / name).is_file() or (directory / name).read_bytes() != content]
    present = {str(p.relative_to(directory)) for p in directory.rglob("*.json")} if directory.exists() else set()
    problems += [f"unexpected: {name}" for name in sorted(present - wanted.keys())]
    return problems


def write(directory: Path = JSON_DIR) -> int:
    wanted = generate()
    for name, content in wanted.items():
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    for path in directory.rglob("*.json"):
        if str(path.relative_to(directory)) not in wanted:
            path.unlink()
    return len(wanted)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="only report drift; exit 1 if any")
    args = parser.parse_args(argv)
    if args.check:
        problems = drift()
        for p in problems:
            print(p)
        if problems:
            print("JSON Schema drift: run `python -m schemas.generate`", file=sys.stderr)
        return 1 if problems else 0
    print(f"wrote {write()} schema files to {JSON_DIR}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
