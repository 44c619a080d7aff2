"""Envelopes -> ledger facts: times from the messages, outcomes, GPU types."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from schemas.decisions import JobAdmitted
from schemas.envelope import Envelope
from schemas.runs import DispatchFailed
from services.quota_accountant.handlers import UNKNOWN_GPU_TYPE, apply, companion_gpus, gpu_type_of
from services.quota_accountant.ledger import Ledger
from services.spec.workload_spec import spec_from_workload
from tests.quota_accountant.builders import (
    admitted,
    at,
    failed,
    gave_up,
    scaled,
    started,
    stopped,
    succeeded,
    wrap,
)


def test_lifecycle_uses_observed_times_and_gpus_per_pod_times_replicas() -> None:
    ledger = Ledger()
    nodes: dict[tuple[str, str], str] = {}
    assert apply(ledger, admitted(replicas=4, gpus=8), nodes).queues == {"team-a"}
    apply(ledger, started(when=60), nodes)
    apply(ledger, scaled("j-1", 1, 2, when=660), nodes)
    charge = apply(ledger, succeeded(when=1260), nodes).charge
    assert charge is not None
    assert charge.gpu_seconds == pytest.approx(32 * 600 + 16 * 600)
    assert charge.started_at == at(60).timestamp() and charge.ended_at == at(1260).timestamp()
    assert (charge.outcome, charge.gpu_type, charge.gpus) == ("succeeded", "a100", 32)


@pytest.mark.parametrize(
    ("end", "outcome"),
    [
        (gave_up(when=100), "failed"),
        (failed(when=100, reason="DeadlineExceeded"), "failed"),
        (failed(when=100, reason="UnexpectedAdmissionError", infrastructure=True), "evicted"),  # job requeued
        (stopped(when=100), "preempted"),
        (stopped(when=100, reason="cancelled", requeue=False), "cancelled"),
        (stopped(when=100, reason="max_runtime_exceeded", requeue=False), "cancelled"),
    ],
)
def test_end_outcomes(end: Envelope, outcome: str) -> None:
    ledger = Ledger()
    apply(ledger, admitted(), {})
    apply(ledger, started(when=0), {})
    charge = apply(ledger, end, {}).charge
    assert charge is not None and charge.outcome == outcome


def test_a_failed_gang_that_restarts_keeps_being_charged() -> None:
    ledger = Ledger()
    apply(ledger, admitted(), {})
    apply(ledger, started(when=0), {})
    assert not apply(ledger, failed(when=50), {}).changed  # the dispatcher restarts the gang in the same attempt
    charge = apply(ledger, gave_up(when=100), {}).charge
    assert charge is not None and (charge.outcome, charge.ended_at) == ("failed", at(100).timestamp())


def test_a_retryable_dispatch_failure_before_the_start_ends_the_attempt_and_frees_its_quota() -> None:
    # the Job of the admission could not be created: the queue manager requeues the job as its next attempt
    ledger = Ledger()
    apply(ledger, admitted(), {})
    assert ledger.queue_usage("team-a", at(1).timestamp()).allocated == {"gpu:a100": 32}
    failure = DispatchFailed(job_id="j-1", attempt=1, cluster="east", observed_at=at(5), reason="api_unavailable",
                             message="503", retryable=True)
    assert apply(ledger, wrap(failure, 5), {}).queues == {"team-a"}
    assert ledger.queue_usage("team-a", at(6).timestamp()).allocated == {}


def test_a_retryable_dispatch_failure_of_a_started_attempt_is_a_failed_rescale_and_the_run_goes_on() -> None:
    ledger = Ledger()
    apply(ledger, admitted(), {})
    apply(ledger, started(when=0), {})
    failure = DispatchFailed(job_id="j-1", attempt=1, cluster="east", observed_at=at(5), reason="api_unavailable",
                             message="503", retryable=True)
    assert not apply(ledger, wrap(failure, 5), {}).changed
    charge = apply(ledger, succeeded(when=100), {}).charge
    assert charge is not None and (charge.outcome, charge.ended_at) == ("succeeded", at(100).timestamp())


def test_gpu_type_from_spec_then_capacity_then_any() -> None:
    named = admitted(gpu_type="h100").payload
    anonymous = admitted(gpu_type=None).payload
    assert isinstance(named, JobAdmitted) and isinstance(anonymous, JobAdmitted)
    assert gpu_type_of(named, {}) == "h100"
    assert gpu_type_of(anonymous, {("east", "east-a100-0"): "a100"}) == "a100"
    assert gpu_type_of(anonymous, {}) == UNKNOWN_GPU_TYPE


def test_the_companion_roles_of_an_admitted_job_are_told_apart_from_its_main_role() -> None:
    example = Path(__file__).parents[2] / "examples" / "kube" / "rayjob.yaml"
    spec = spec_from_workload(yaml.safe_load(example.read_text()), kube_native=True)
    main = spec.main_role().name
    companions = dict(companion_gpus(spec))
    assert main not in companions and set(companions) == {r.name for r in spec.roles} - {main}
    assert sum(companions.values()) == spec.gpus_charged_at(0)
    assert companion_gpus(spec.model_copy(update={"roles": []})) == ()
