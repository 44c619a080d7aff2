"""The Airflow provider's decisions without Airflow: the keys of a task's submissions, the spec it submits, its
outcome from the job's end, and the provider's entry for Airflow's ProvidersManager."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from muster.integrations.airflow import get_provider_info
from muster.integrations.airflow.submission import (
    ANNOTATION_MAP_INDEX,
    ANNOTATION_RUN,
    LABEL_DAG,
    LABEL_TASK,
    JobEnd,
    SpecError,
    TaskRef,
    label_value,
    load_spec,
    resubmit,
    task_spec,
)
from schemas.jobspec import JobSpec
from tests.builders.jobspecs import job_spec

TASK = TaskRef("nightly", "scheduled__2026-11-01T00:00:00+00:00", "train")


def test_a_task_keeps_its_key_across_tries_and_each_task_of_each_run_has_its_own() -> None:
    assert TASK.key() == TaskRef(TASK.dag_id, TASK.run_id, TASK.task_id).key(1)
    others = {TaskRef("nightly", "scheduled__2026-11-02T00:00:00+00:00", "train").key(),
              TaskRef("nightly", TASK.run_id, "evaluate").key(), TaskRef("weekly", TASK.run_id, "train").key(),
              TaskRef("nightly", TASK.run_id, "train", map_index=0).key(),
              TaskRef("nightly", TASK.run_id, "train", map_index=1).key()}
    assert TASK.key() not in others and len(others) == 5
    # the parts are separated: ("a", "b-c") and ("a-b", "c") are different tasks
    assert TaskRef("a", "b-c", "t").key() != TaskRef("a-b", "c", "t").key()


def test_later_submissions_chain_on_the_first_key_and_fit_the_gateways_header() -> None:
    long = TaskRef("d" * 250, "r" * 250, "t" * 250, 7)
    assert TASK.key(2) == f"{TASK.key()}#2" and TASK.key(3) == f"{TASK.key()}#3"
    assert all(1 <= len(long.key(n)) <= 128 for n in (1, 2, 999))
    with pytest.raises(ValueError):
        TASK.key(0)


@pytest.mark.parametrize(("state", "again"), [("failed", True), ("cancelled", True), ("rejected", True),
                                              ("succeeded", False), ("running", False), ("pending", False),
                                              ("submitted", False), ("suspended", False)])
def test_only_a_job_that_ended_without_success_is_submitted_afresh(state: str, again: bool) -> None:
    assert resubmit(state) is again


def test_a_spec_is_a_mapping_or_rendered_yaml_text() -> None:
    assert load_spec({"name": "a"}) == {"name": "a"}
    assert load_spec("name: a\nqueue: team-a\n") == {"name": "a", "queue": "team-a"}
    assert load_spec('{"name": "a"}') == {"name": "a"}
    with pytest.raises(SpecError, match=r"must end in \.yaml"):
        load_spec("jobs/train.yml.txt")  # a path Airflow did not read as a template file
    with pytest.raises(SpecError, match="not readable YAML"):
        load_spec("name: [a\n")
    with pytest.raises(SpecError, match="not list"):
        load_spec("- a\n- b\n")


def test_the_submitted_spec_carries_the_task_the_queue_and_the_upstream_jobs() -> None:
    base = job_spec("train", "team-a", labels={"team": "nlp"},
                    after=[{"job": "prep-1", "on": "finished"}]).model_dump(mode="json", exclude_defaults=True)
    spec = task_spec(base, TaskRef("nightly run", TASK.run_id, "train", 3), queue="team-b",
                     after=["up-1", "prep-1"])
    assert spec["queue"] == "team-b"
    assert spec["labels"] == {"team": "nlp", LABEL_DAG: "nightly-run", LABEL_TASK: "train"}
    assert spec["annotations"][ANNOTATION_RUN] == TASK.run_id and spec["annotations"][ANNOTATION_MAP_INDEX] == "3"
    assert spec["after"] == [{"job": "prep-1", "on": "finished"}, {"job": "up-1", "on": "succeeded"}]
    JobSpec.model_validate(spec)  # what the gateway will be sent is a valid spec
    assert base["queue"] == "team-a" and "after" in base and LABEL_DAG not in base["labels"]  # not changed
    # the same task and spec make the same submission (the gateway refuses a key reused with another spec)
    assert task_spec(base, TaskRef("nightly run", TASK.run_id, "train", 3), queue="team-b",
                     after=["up-1", "prep-1"]) == spec


def test_a_kubernetes_object_is_submitted_as_it_is() -> None:
    obj = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
           "metadata": {"name": "a", "labels": {"muster.dev/queue": "team-a"}}}
    assert task_spec(obj, TASK) == obj
    with pytest.raises(SpecError, match=r"muster\.dev/queue"):
        task_spec(obj, TASK, queue="team-b")


@pytest.mark.parametrize(("text", "value"), [("nightly", "nightly"), ("my dag/v2", "my-dag-v2"),
                                             ("_x_", "x"), ("é" * 80, ""), ("a" * 80, "a" * 63)])
def test_label_values_are_valid_kubernetes_label_values(text: str, value: str) -> None:
    assert label_value(text) == value


def test_a_jobs_end_reads_as_the_tasks_outcome() -> None:
    ok = JobEnd("train-1", "succeeded")
    assert ok.succeeded() and JobEnd.from_payload(ok.payload()) == ok
    failed = JobEnd("train-1", "failed", "exit_code", "pod train-1-0 exited with code 3")
    assert not failed.succeeded()
    assert failed.failure() == "Muster job train-1 ended failed (exit_code: pod train-1-0 exited with code 3)"
    assert JobEnd("train-1", "running").succeeded(frozenset({"running"}))
    assert JobEnd("train-1", "succeeded").failure() == "Muster job train-1 ended succeeded"
    lost = JobEnd("train-1", "unknown", error="the gateway does not know the job")
    assert not lost.succeeded() and lost.failure() == "Muster job train-1: the gateway does not know the job"


def test_the_provider_is_registered_where_airflow_looks_for_it() -> None:
    pyproject = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    entry = pyproject["project"]["entry-points"]["apache_airflow_provider"]["provider_info"]
    assert entry == "muster.integrations.airflow:get_provider_info"
    info = get_provider_info()
    assert info["package-name"] == "muster" and info["name"] and info["description"]
    assert info["connection-types"] == [{"hook-class-name": "muster.integrations.airflow.hook.MusterHook",
                                         "connection-type": "muster"}]
    modules = {m for kind in ("operators", "sensors", "hooks", "triggers") for m in info[kind][0]["python-modules"]}
    assert all((Path(__file__).parents[2] / (m.replace(".", "/") + ".py")).is_file() for m in modules)
