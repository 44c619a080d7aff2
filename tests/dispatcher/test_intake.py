"""What the dispatcher's consumer passes over without decoding: the types its topics carry that it ignores."""

from __future__ import annotations

import orjson
import pytest

from schemas.codec import encode
from schemas.envelope import Envelope
from schemas.topics import DECISIONS_TOPIC, RUNS_TOPIC
from services.dispatcher.dispatcher import ACTS_ON, passes_over
from tests.builders.messages import example_envelopes

INPUTS = (DECISIONS_TOPIC, RUNS_TOPIC)


@pytest.mark.parametrize(("topic", "envelope"), [(t, e) for t, e in example_envelopes() if t in INPUTS],
                         ids=lambda v: getattr(v, "type", v))
def test_every_type_of_its_topics_is_decoded_exactly_when_the_dispatcher_acts_on_it(topic: str,
                                                                                   envelope: Envelope) -> None:
    assert passes_over(topic, envelope.key().encode(), encode(envelope)) == (envelope.type not in ACTS_ON)


def test_it_acts_on_decisions_and_run_failures() -> None:
    types = {e.type for t, e in example_envelopes() if t in INPUTS}
    assert types >= ACTS_ON
    assert {"JobAdmitted", "JobPreemptionRequested", "RunFailed"} <= ACTS_ON
    assert "RunStarted" not in ACTS_ON


@pytest.mark.parametrize("value", [b"not json", b"[1, 2]", b'{"payload": {}}', b'{"type": 7}',
                                   b'{"type": "NoSuchMessage"}', None])
def test_what_does_not_parse_or_names_no_type_it_carries_is_decoded_to_be_dead_lettered(value: bytes | None) -> None:
    assert not passes_over(RUNS_TOPIC, b"job-1", value)


def test_a_type_of_another_topic_is_decoded_to_be_dead_lettered() -> None:
    decision = next(e for t, e in example_envelopes() if t == DECISIONS_TOPIC and e.type not in ACTS_ON)
    assert passes_over(DECISIONS_TOPIC, None, encode(decision))
    assert not passes_over(RUNS_TOPIC, None, encode(decision))


def test_a_topic_it_does_not_read_is_never_passed_over() -> None:
    run = next(e for t, e in example_envelopes() if t == RUNS_TOPIC and e.type not in ACTS_ON)
    assert not passes_over("muster.somewhere.v1", None, orjson.dumps({"type": run.type}))
