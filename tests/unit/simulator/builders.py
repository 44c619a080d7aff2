"""Builders for simulator tests: tiny clusters, workloads and trace folders written to a tmp path."""

from __future__ import annotations

from pathlib import Path

from schemas.config import MusterConfig
from services.simulator.workload import Workload, WorkloadJob
from services.spec.cluster_file import parse_cluster_yaml

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "sim"
SHARED_TRACES = Path(__file__).resolve().parents[4] / "shared" / "traces"


def one_node_cluster(gpus: int = 8, queues: tuple[str, ...] = ("research",)) -> MusterConfig:
    """One node of ``gpus`` GPUs; every queue gets all of it as nominal quota in one cohort."""
    queue_yaml = "".join(
        f"  - name: {q}\n    cohort: all\n    quotas:\n      gpu:a100: {{nominal: {gpus}}}\n" for q in queues
    )
    return parse_cluster_yaml(
        "clusters:\n"
        "  - name: tiny\n"
        f"    node_groups:\n      - {{name: gpu, count: 1, gpus_per_node: {gpus}, gpu_type: a100}}\n"
        "cohorts:\n  - name: all\n"
        f"queues:\n{queue_yaml}"
    )


def job(job_id: str, submit: float, duration: float, gpus: int, queue: str = "research", **kw: object) -> WorkloadJob:
    return WorkloadJob(job_id=job_id, submit_time=submit, duration=duration, num_gpus=gpus, queue=queue, **kw)  # type: ignore[arg-type]


def workload(*jobs: WorkloadJob, name: str = "test") -> Workload:
    return Workload(name, tuple(sorted(jobs, key=lambda j: j.submit_time)))


def write_philly_fixture(root: Path) -> Path:
    """A miniature traces folder: philly.csv with three VCs and a node-count file naming two."""
    (root / "philly-pollux").mkdir(parents=True)
    (root / "helios").mkdir(parents=True)
    (root / "philly-pollux" / "philly.csv").write_text(
        "timestamp,duration,num_gpus,gpu_time,cluster\n"
        "2017-10-01 00:00:10,100.0,1,100.0,aaa111\n"
        "2017-10-01 00:00:00,50.0,8,400.0,bbb222\n"
        "2017-10-01 00:01:00,30.0,16,480.0,ccc333\n"
        "2017-10-01 00:00:10,20.0,2,40.0,bbb222\n",
        encoding="utf-8",
    )
    (root / "helios" / "philly_vc_node_count.csv").write_text("vc,node num\naaa111,2\nbbb222,3\n", encoding="utf-8")
    return root


def write_alibaba_fixture(root: Path) -> Path:
    folder = root / "alibaba-pai-gpu-2023"
    folder.mkdir(parents=True)
    (folder / "openb_pod_list_default.csv").write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
        "pod-0,8000,16384,1,1000,,LS,Running,0,500,10\n"
        "pod-1,4000,8192,1,250,,BE,Succeeded,5,105,5\n"
        "pod-2,4000,8192,0,0,,BE,Running,6,100,6\n"
        "pod-3,4000,8192,1,1000,,LS,Pending,7,,\n"
        "pod-4,32000,65536,8,1000,T4,Guaranteed,Running,8,1008,8\n"
        "pod-5,4000,8192,2,500,T4|P100,Burstable,Failed,9,99,9\n",
        encoding="utf-8",
    )
    (folder / "openb_node_list_gpu_node.csv").write_text(
        "sn,cpu_milli,memory_mib,gpu,model\n"
        "node-0,64000,262144,2,P100\n"
        "node-1,64000,262144,2,P100\n"
        "node-2,96000,786432,8,T4\n",
        encoding="utf-8",
    )
    return root


def write_gavel_fixture(root: Path) -> Path:
    folder = root / "philly-gavel-msr" / "seed=0"
    folder.mkdir(parents=True)
    (folder / "aaa111.trace").write_text(
        "ResNet-18 (batch size 16)\tcd x && python3 main.py\t--num_steps\t1\t7731\t0.000000\t1\n"
        "A3C\tcd x && python3 main.py\t--max-steps\t0\t1000\t6.500000\t4\n",
        encoding="utf-8",
    )
    (folder / "bbb222.trace").write_text(
        "CycleGAN\tcd x && python3 cyclegan.py\t--n_steps\t1\t500\t3.000000\t2\n", encoding="utf-8"
    )
    return root
