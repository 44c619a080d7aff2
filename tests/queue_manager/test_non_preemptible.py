"""Non-preemptible work arriving straight on the intents topic: only tenants configured to run it may."""

from __future__ import annotations

import uuid

from schemas.config import PriorityClassConfig, PriorityClassDefined, TenantConfig, TenantDefined
from schemas.decisions import JobAdmitted, JobRejected
from schemas.envelope import Message
from schemas.intents import ChangePriority
from schemas.jobs import JobRecorded
from schemas.status import JobStatusChanged
from services.core import SchedulerConfig
from services.queue_manager.cycle_outcome import run_cycle
from services.queue_manager.inputs import on_input
from services.queue_manager.queue_state import Out, QueueState
from tests.queue_manager.builders import NOW, folded_state, of_type, submit

CFG = SchedulerConfig(min_runtime_s=0.0)
INFERENCE = PriorityClassDefined(item=PriorityClassConfig(name="inference", value=10_000, preemptible=False))


def feed(qs: QueueState, msg: Message) -> list[Out]:
    return on_input(qs, msg, uuid.uuid4().hex, NOW)


def configured(*, allowed: bool) -> QueueState:
    qs = folded_state()
    for msg in (INFERENCE, TenantDefined(item=TenantConfig(name="team-a", namespace="ns-team-a",
                                                           allow_non_preemptible=allowed))):
        qs.fold_config(msg.key(), msg)
    return qs


def test_non_preemptible_class_from_a_tenant_not_allowed_is_rejected_naming_the_rule() -> None:
    qs = configured(allowed=False)
    (rej,) = of_type(feed(qs, submit("serve", priority_class="inference")), JobRejected)
    assert rej.reason == "non_preemptible_not_allowed"
    assert rej.message == ("priority class 'inference' is not preemptible and tenant 'team-a' may not run "
                           "non-preemptible work (tenant setting allow_non_preemptible)")
    assert qs.jobs["serve"].state == "rejected" and "serve" not in qs.sched.pending


def test_preemptible_false_from_a_tenant_not_allowed_is_rejected() -> None:
    qs = configured(allowed=False)
    (rej,) = of_type(feed(qs, submit("notebook", preemptible=False)), JobRejected)
    assert rej.reason == "non_preemptible_not_allowed" and rej.message.startswith("preemptible: false is not allowed")


def test_an_allowed_tenant_runs_non_preemptible_work() -> None:
    qs = configured(allowed=True)
    assert of_type(feed(qs, submit("serve", priority_class="inference")), JobRejected) == []
    assert qs.sched.pending["serve"].preemptible is False
    (adm,) = of_type(run_cycle(qs, NOW, CFG).decisions, JobAdmitted)
    assert adm.job_id == "serve"


def test_a_priority_change_to_a_non_preemptible_class_follows_the_same_rule() -> None:
    qs = configured(allowed=False)
    feed(qs, submit("j1"))
    outs = feed(qs, ChangePriority(job_id="j1", priority_class="inference", requested_by="alice"))
    assert not of_type(outs, JobRecorded)
    (told,) = of_type(outs, JobStatusChanged)
    assert told.last_action is not None and told.last_action.outcome == "refused"
    assert told.last_action.reason == "non_preemptible_not_allowed"
    assert qs.jobs["j1"].spec.priority_class == "normal" and qs.sched.pending["j1"].preemptible

    allowed = configured(allowed=True)
    feed(allowed, submit("j1"))
    outs = feed(allowed, ChangePriority(job_id="j1", priority_class="inference", requested_by="alice"))
    assert of_type(outs, JobRecorded)[0].record.submission.spec.priority_class == "inference"
    job = allowed.sched.pending["j1"]
    assert (job.priority, job.preemptible) == (10_000, False)
