"""Node objects to NodeState: capacity, topology, taints, health, GPUs in use; quantities."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from decimal import Decimal

import pytest

from services.node_watcher.nodes import gpu_type_name, node_gpu_type, node_state
from services.spec.quantity import mebibytes, millicores, parse_quantity
from tests.node_watcher.builders import CLUSTER, example_node, job, not_ready, pod


def test_example_a100_node() -> None:
    state = node_state(example_node("east-a100-3"), CLUSTER)
    assert state.cluster == CLUSTER and state.node == "east-a100-3"
    assert state.gpu_type == "a100"
    assert state.gpus_allocatable == 8 and state.gpus_in_use == 0
    assert state.cpu_m == 96_000
    assert state.memory_mb == 1024 * 1024
    assert (state.topology.zone, state.topology.block, state.topology.rack) == ("east-1a", "b0", "rack-1")
    assert state.topology.nvlink_groups == [4, 4]
    assert [(t.key, t.effect) for t in state.taints] == [("nvidia.com/gpu", "NoSchedule")]
    assert state.healthy and state.schedulable and state.health_reason == ""
    assert state.labels["pool"] == "training"


def test_not_ready_node_is_unhealthy_and_tainted() -> None:
    state = node_state(not_ready(example_node()), CLUSTER)
    assert not state.healthy
    assert "NodeStatusUnknown" in state.health_reason
    assert {(t.key, t.effect) for t in state.taints} >= {("node.kubernetes.io/unreachable", "NoExecute")}


def test_a_not_ready_node_says_since_when_from_its_ready_condition() -> None:
    node = not_ready(example_node())
    ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
    ready["lastTransitionTime"] = "2026-11-24T09:00:00Z"
    assert node_state(node, CLUSTER).unhealthy_since == datetime(2026, 11, 24, 9, 0, tzinfo=UTC)
    ready["lastTransitionTime"] = "yesterday"
    assert node_state(node, CLUSTER).unhealthy_since is None  # the queue manager then uses the report's time
    assert node_state(example_node(), CLUSTER).unhealthy_since is None


def test_cordoned_node_is_unschedulable() -> None:
    node = example_node()
    node["spec"]["unschedulable"] = True
    assert not node_state(node, CLUSTER).schedulable


def test_gpus_in_use_count_unfinished_bound_pods() -> None:
    owner = job(gang=3)
    pods = [pod(owner, 0, "Running", gpus=4), pod(owner, 1, "Pending", gpus=2),
            pod(owner, 2, "Succeeded", gpus=4), pod(owner, 3, "Pending", node=None, gpus=8)]
    assert node_state(example_node(), CLUSTER, pods).gpus_in_use == 6


def test_gpu_type_from_product_label_when_no_muster_label() -> None:
    labels = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}
    assert node_gpu_type(labels) == "nvidia-a100-sxm4-80gb"
    assert node_gpu_type({**labels, "muster.dev/gpu-type": "a100"}) == "a100"
    assert node_gpu_type({}) == "none"
    assert gpu_type_name("Tesla T4 (PCIe)") == "tesla-t4-pcie"


def test_inconsistent_nvlink_annotation_is_dropped() -> None:
    node = copy.deepcopy(example_node())
    node["metadata"]["annotations"]["muster.dev/nvlink-groups"] = "4,2"
    assert node_state(node, CLUSTER).topology.nvlink_groups == []
    node["metadata"]["annotations"]["muster.dev/nvlink-groups"] = "four"
    assert node_state(node, CLUSTER).topology.nvlink_groups == []


def test_node_without_gpus() -> None:
    node = example_node()
    node["status"]["allocatable"].pop("nvidia.com/gpu")
    node["metadata"]["labels"].pop("muster.dev/gpu-type")
    node["metadata"]["labels"].pop("nvidia.com/gpu.product")
    node["metadata"]["annotations"].pop("muster.dev/nvlink-groups")
    state = node_state(node, CLUSTER)
    assert state.gpus_allocatable == 0 and state.gpu_type == "none" and state.topology.nvlink_groups == []


@pytest.mark.parametrize(("text", "value"), [("2", Decimal(2)), ("500m", Decimal("0.5")), ("1Ki", Decimal(1024)),
                                              ("1e3", Decimal(1000)), ("2G", Decimal(2 * 10**9))])
def test_parse_quantity(text: str, value: Decimal) -> None:
    assert parse_quantity(text) == value


def test_cpu_and_memory_units() -> None:
    assert millicores("95500m") == 95_500 and millicores("4") == 4000
    assert mebibytes("1056763Ki") == 1031 and mebibytes("64Gi") == 65_536
    with pytest.raises(ValueError):
        parse_quantity("lots")


def test_a_flap_is_counted_even_when_it_is_over_before_a_scrape() -> None:
    from prometheus_client import CollectorRegistry

    from schemas.capacity import NodeStateObserved
    from services.node_watcher.metrics import WatcherMetrics

    registry = CollectorRegistry()
    metrics = WatcherMetrics(registry, CLUSTER)
    now = datetime(2026, 11, 24, tzinfo=UTC)
    well, sick = node_state(example_node(), CLUSTER), node_state(not_ready(example_node()), CLUSTER)
    for state in (well, sick, sick, well, sick):
        metrics.sent(NodeStateObserved(state=state, observed_at=now))
    count = registry.get_sample_value("muster_node_watcher_not_ready_transitions_total", {"cluster": CLUSTER})
    assert count == 2
