"""The Argo Workflow of ``examples/argo`` through the whole system, on kubesim and on a real control plane: its
steps are created as Argo's resource template creates them (the manifest as written, ``generateName`` and an
owner reference filled in, ``action: create``), one step after the other, each waited for on the Job's own
status by the template's ``successCondition`` / ``failureCondition``, as Argo's executor does. Argo itself is
not built here; what it would do with these Jobs is all Kubernetes API, which these tests use the same way.
"""

from __future__ import annotations

import asyncio
import operator
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from schemas.status import JobStatusChanged
from services.runtime.kube import JOBS, KubeObject
from tests.e2e.system import System

pytestmark = pytest.mark.e2e

WORKFLOW = Path(__file__).resolve().parents[2] / "examples" / "argo" / "train-evaluate-workflow.yaml"
_CONDITION = re.compile(r"^\s*([\w.]+)\s*(==|!=|>=|<=|>|<)\s*(\d+)\s*$")
_OPS: dict[str, Callable[[int, int], bool]] = {"==": operator.eq, "!=": operator.ne, ">=": operator.ge,
                                               "<=": operator.le, ">": operator.gt, "<": operator.lt}


def condition(text: str) -> Callable[[KubeObject], bool]:
    """An Argo resource condition of the form ``<json path> <op> <integer>`` (the only form the example uses;
    an absent field reads 0, as an unset Job counter is)."""
    found = _CONDITION.match(text)
    assert found, f"a condition this test cannot read: {text!r}"
    path, op, value = found.group(1).split("."), _OPS[found.group(2)], int(found.group(3))

    def holds(obj: KubeObject) -> bool:
        current: Any = obj
        for part in path:
            current = current.get(part, {}) if isinstance(current, dict) else {}
        return op(int(current) if isinstance(current, int) else 0, value)

    return holds


def step_templates(workflow: dict[str, Any]) -> list[dict[str, Any]]:
    """The resource templates of the entrypoint's steps, in the order Argo runs them (one per step group)."""
    templates = {t["name"]: t for t in workflow["spec"]["templates"]}
    entry = templates[workflow["spec"]["entrypoint"]]
    ordered = []
    for group in entry["steps"]:
        assert len(group) == 1, "the example runs its steps one after the other"
        ordered.append(templates[group[0]["template"]])
    return ordered


async def run_resource_step(system: System, template: dict[str, Any], owner: dict[str, str]) -> KubeObject:
    """Argo's resource template with ``action: create``: create the manifest, then wait until the success
    condition holds (returned) or the failure condition does (the step fails)."""
    resource = template["resource"]
    assert resource["action"] == "create"
    manifest: KubeObject = yaml.safe_load(resource["manifest"])
    if resource.get("setOwnerReference"):
        manifest["metadata"]["ownerReferences"] = [{**owner, "controller": False, "blockOwnerDeletion": False}]
    succeeded, failed = condition(resource["successCondition"]), condition(resource["failureCondition"])
    cluster = system.first_cluster()
    namespace = manifest["metadata"]["namespace"]
    created = await cluster.rest.create(JOBS, manifest, namespace)
    name = created["metadata"]["name"]
    async with asyncio.timeout(120):
        while True:
            job: KubeObject = await cluster.rest.get(JOBS, name, namespace)
            if failed(job):
                raise AssertionError(f"step {template['name']} failed: {job.get('status')}")
            if succeeded(job):
                return job
            await asyncio.sleep(0.5)  # Argo's executor polls (or watches) the same way


async def test_an_argo_workflows_steps_are_queued_by_muster_one_after_the_other(system: System) -> None:
    workflow = yaml.safe_load(WORKFLOW.read_text())
    assert workflow["kind"] == "Workflow" and workflow["apiVersion"] == "argoproj.io/v1alpha1"
    # the workflow object Argo would own the Jobs by (its uid is Argo's; any uid names an owner)
    owner = {"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow", "name": "muster-train-evaluate-x1",
             "uid": "0b6e7a6c-4f0b-4d55-9d0c-5d7f6d9a7c01"}
    finished = []
    for template in step_templates(workflow):
        finished.append(await run_resource_step(system, template, owner))
    train, evaluate = finished
    assert train["metadata"]["name"].startswith("train-") and evaluate["metadata"]["name"].startswith("evaluate-")

    # each Job went through Muster's queue: queued, admitted as one gang, run and reported
    statuses = {s.name: s for s in system.log.messages(JobStatusChanged)}
    for job in finished:
        name = job["metadata"]["name"]
        assert name in statuses, f"{name} was never queued by Muster"
        await system.api.wait_state(statuses[name].job_id, "succeeded", within=60)
    train_id = statuses[train["metadata"]["name"]].job_id
    admitted = [s for s in system.log.messages(JobStatusChanged, job_id=train_id) if s.state == "running"]
    assert admitted and admitted[0].replicas == 2 and admitted[0].gpus == 8
    # the second step was created only once the first had succeeded (Argo's step order)
    assert evaluate["metadata"]["creationTimestamp"] >= train["status"]["completionTime"]
    assert train["metadata"]["ownerReferences"][0]["kind"] == "Workflow"
