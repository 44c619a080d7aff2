"""Job spec quantities and validation, and the cluster file loader."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from schemas.jobspec import JobSpec, cpu_millicores, memory_mib
from services.spec.cluster_file import core_nodes, core_queues, load_cluster_file, parse_cluster_yaml

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "cluster-small.yaml"


@pytest.mark.parametrize(("q", "m"), [("500m", 500), ("2", 2000), ("1.5", 1500), ("0", 0)])
def test_cpu(q: str, m: int) -> None:
    assert cpu_millicores(q) == m


@pytest.mark.parametrize(("q", "mib"), [("512Mi", 512), ("64Gi", 65536), ("1G", 954), ("1Ti", 1 << 20), ("1", 1)])
def test_memory(q: str, mib: int) -> None:
    assert memory_mib(q) == mib


@pytest.mark.parametrize("bad", ["", "1.2.3", "-1", "1x", "1 Gi"])
def test_bad_quantities(bad: str) -> None:
    with pytest.raises(ValueError):
        memory_mib(bad)


def _spec(**over: object) -> dict:
    base = {"name": "train", "queue": "team-a", "template": {"image": "img:1", "resources": {"gpus": 8}}}
    return {**base, **over}


def test_job_spec_defaults() -> None:
    spec = JobSpec.model_validate(_spec())
    assert spec.replicas == 1 and spec.total_gpus == 8 and spec.priority_class == "normal"
    assert spec.template.resources.cpu_m == 1000 and spec.template.resources.memory_mb == 4096


@pytest.mark.parametrize(
    ("over", "field"),
    [
        ({"replicas": 2, "min_replicas": 3}, "min_replicas"),
        ({"schedule": "every day"}, "schedule"),
        ({"name": "Bad_Name"}, "name"),
        ({"template": {"image": "x", "resources": {"gpus": 65}}}, "template.resources.gpus"),
        ({"template": {"image": "x", "resources": {"cpu": "lots"}}}, "template.resources.cpu"),
        ({"unknown": 1}, "unknown"),
        ({"max_runtime_s": 1e300}, "max_runtime_s"),
        ({"template": {"image": "busy\x00box"}}, "template.image"),
        ({"template": {"image": "busybox\n"}}, "template.image"),
        ({"template": {"image": "x", "env": {"TOKEN": "a\x00b"}}}, "template.env.TOKEN"),
        ({"template": {"image": "x", "args": ["--flag\x00"]}}, "template.args"),
        ({"template": {"image": "x", "command": ["\x00"]}}, "template.command"),
    ],
)
def test_job_spec_errors_name_the_field(over: dict, field: str) -> None:
    with pytest.raises(ValidationError) as info:
        JobSpec.model_validate(_spec(**over))
    text = str(info.value)
    assert field.split(".")[-1] in text


def test_env_values_keep_any_text_but_nul() -> None:
    spec = JobSpec.model_validate(_spec(template={"image": "x", "env": {"MULTI": "line 1\nline 2\t\u00e9"}}))
    assert spec.template.env["MULTI"] == "line 1\nline 2\t\u00e9"


def test_cron_schedules() -> None:
    assert JobSpec.model_validate(_spec(schedule="0 3 * * 1-5")).schedule == "0 3 * * 1-5"
    assert JobSpec.model_validate(_spec(schedule="@daily")).schedule == "@daily"


def test_example_cluster_file() -> None:
    cfg = load_cluster_file(EXAMPLE)
    nodes = core_nodes(cfg)
    assert len(nodes) == 6 and sum(n.gpus for n in nodes) == 40
    a100 = [n for n in nodes if n.gpu_type == "a100"]
    assert {n.topology["rack"] for n in a100} == {"rack-0", "rack-1"}
    assert a100[0].nvlink_groups == (4, 4) and "nvidia.com/gpu" in a100[0].taints
    queues = {q.name: q for q in core_queues(cfg)}
    assert queues["team-a"].quotas["gpu:a100"].nominal == 16
    assert cfg.priority_value("high") == 1000


def test_single_cluster_shorthand_and_errors() -> None:
    cfg = parse_cluster_yaml("node_groups: [{name: g, count: 2, gpus_per_node: 4}]\n")
    assert [c.name for c in cfg.clusters] == ["default"] and len(core_nodes(cfg)) == 2
    with pytest.raises(ValueError, match="unknown cohort"):
        parse_cluster_yaml("queues: [{name: q, cohort: nope}]")
    with pytest.raises(ValueError, match="nvlink_groups"):
        parse_cluster_yaml("node_groups: [{name: g, count: 1, gpus_per_node: 8, nvlink_groups: [4, 2]}]")
    with pytest.raises(ValueError, match="not valid YAML"):
        parse_cluster_yaml("a: [")


def test_dependencies_read_from_yaml_where_on_is_a_boolean() -> None:
    """YAML 1.1 reads the key `on` as true; the spec takes it as the condition it means."""
    text = "name: evaluate\nqueue: q\nafter:\n  - {job: train, on: failed}\n  - {job: prep}\ntemplate: {image: x}\n"
    spec = JobSpec.model_validate(yaml.safe_load(text))
    assert [(d.job, d.on) for d in spec.after] == [("train", "failed"), ("prep", "succeeded")]
    as_json = JobSpec.model_validate_json(json.dumps(yaml.safe_load(text)))  # a YAML file sent as JSON: "true"
    assert as_json.after == spec.after
