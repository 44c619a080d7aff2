"""The core fed from a cluster file, and determinism across interpreter hash seeds."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from services.core import Admit, Job, SchedulerConfig, SchedulerState, TopologyMode, TopologyRequest, schedule
from services.spec.cluster_file import core_cohorts, core_nodes, core_queues, parse_cluster_yaml

CLUSTER = """
clusters:
  - name: east
    node_groups:
      - {name: a100, count: 4, gpus_per_node: 8, gpu_type: a100, nvlink_groups: [4, 4],
         topology: {racks: 2}}
      - {name: l4, count: 2, gpus_per_node: 4, gpu_type: l4, taints: [inference]}
cohorts:
  - {name: research}
queues:
  - {name: vision, cohort: research, quotas: {"gpu:a100": {nominal: 16}, "gpu:l4": {nominal: 4}}}
  - {name: nlp, cohort: research, quotas: {"gpu:a100": {nominal: 16}}}
"""


def test_cluster_file_drives_the_core() -> None:
    cfg = parse_cluster_yaml(CLUSTER)
    st = SchedulerState(core_queues(cfg), core_cohorts(cfg), core_nodes(cfg))
    rack = TopologyRequest("rack", TopologyMode.REQUIRED)
    st.submit(Job("train", "nlp", 0.0, replicas=4, gpus_per_pod=4, gpu_type="a100", topology=rack))
    st.submit(Job("serve", "vision", 1.0, gpus_per_pod=2, gpu_type="l4", tolerations=frozenset({"inference"})))
    st.submit(Job("cpu", "vision", 2.0, gpus_per_pod=1, cpu_m=1000))  # no cpu quota anywhere: not governed
    result = schedule(st, 10.0, SchedulerConfig())
    admits = {d.job_id: d for d in result.decisions if isinstance(d, Admit)}
    assert set(admits) == {"train", "serve", "cpu"}
    train = admits["train"].placement
    racks = {st.nodes()[a.node].topology["rack"] for a in train.nodes}
    assert len(racks) == 1 and all(g in (0, 1) for a in train.nodes for g in a.groups)


SCRIPT = """
from services.core import *
from tests.unit.core.builders import job, node, queue
st = SchedulerState([queue("a", 8, cohort="c"), queue("b", 8, cohort="c")],
                    nodes=[node(f"n{i}", 8, rack=f"r{i % 2}") for i in range(4)])
for i in range(30):
    st.submit(job(f"j{i}", "ab"[i % 2], submit=i, gpus_per_pod=1 + i % 4, replicas=1 + i % 3,
                  priority=i % 3, runtime_estimate=10.0 * i))
print(schedule(st, 100.0, SchedulerConfig()))
"""


def test_deterministic_across_hash_seeds() -> None:
    root = Path(__file__).resolve().parents[3]
    outputs = set()
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(root)}
        run = subprocess.run(
            [sys.executable, "-c", SCRIPT], env=env, cwd=root, capture_output=True, text=True, check=True
        )
        outputs.add(run.stdout)
    assert len(outputs) == 1
    assert "Admit(" in outputs.pop()
