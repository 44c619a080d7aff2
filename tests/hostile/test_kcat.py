"""The raw Kafka path with a real external client: kcat (Debian's package) writes valid ``SubmitJob``
envelopes, one per compression codec an external producer may use, and a garbage line onto the intents
topic; the jobs are admitted and run, the garbage is dead-lettered, and kcat reads the dead letter back
with its reason. (Without a snappy/lz4/zstd codec library in the consumers, the first such record would
stop the queue manager's consumer: aiokafka raises ``UnsupportedCodecError`` from its fetch.)"""

from __future__ import annotations

import asyncio
import shutil

import orjson
import pytest

from schemas.decisions import JobAdmitted
from schemas.topics import INTENTS_TOPIC, dlq_topic
from tests.e2e.builders import job_spec
from tests.e2e.system import System
from tests.hostile.builders import namespace_of, submit_envelope

pytestmark = [pytest.mark.e2e,
              pytest.mark.skipif(shutil.which("kcat") is None,
                                 reason="kcat is not installed (Debian: apt-get install -y kcat)")]

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
GARBAGE = "this is not an envelope {\"type\": \"SubmitJob\""


async def _kcat(*args: str, stdin: bytes | None = None, limit_s: float = 30.0) -> bytes:
    kcat = shutil.which("kcat")
    assert kcat is not None
    process = await asyncio.create_subprocess_exec(
        kcat, *args, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    try:
        async with asyncio.timeout(limit_s):
            out, err = await process.communicate(stdin)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise
    assert process.returncode == 0, err.decode(errors="replace")
    return out


async def test_kcat_writes_a_job_and_garbage_onto_the_intents_topic(system: System) -> None:
    bootstrap = system.settings.bootstrap
    jobs = []
    for codec in CODECS:
        job_id, envelope = submit_envelope(job_spec(f"kcat-{codec}", duration_s=0.3))
        jobs.append(job_id)
        line = f"{job_id}\t{orjson.dumps(envelope).decode()}\n".encode()
        await _kcat("-P", "-b", bootstrap, "-t", INTENTS_TOPIC, "-K", "\t", "-z", codec, stdin=line)
    await _kcat("-P", "-b", bootstrap, "-t", INTENTS_TOPIC, "-K", "\t", stdin=f"garbage-1\t{GARBAGE}\n".encode())

    for job_id in jobs:
        [admitted] = await system.log.wait_for(JobAdmitted, job_id=job_id, within=30)
        assert admitted.namespace == namespace_of("team-a")
        assert (await system.api.wait_state(job_id, "succeeded", "failed", within=60))["state"] == "succeeded"

    letters: list[dict[str, object]] = []
    async with asyncio.timeout(30):
        while not letters:
            out = await _kcat("-C", "-b", bootstrap, "-t", dlq_topic(INTENTS_TOPIC), "-o", "beginning", "-e", "-J",
                              "-q")
            letters = [orjson.loads(line) for line in out.splitlines() if line.strip()]
            await asyncio.sleep(0.2)
    [letter] = letters
    headers = letter["headers"]
    assert isinstance(headers, list)
    header = dict(zip(headers[::2], headers[1::2], strict=True))
    assert (letter["key"], letter["payload"]) == ("garbage-1", GARBAGE)
    assert header["muster-dlq-reason"] == "malformed" and header["muster-dlq-topic"] == INTENTS_TOPIC
