"""``muster submit FILE`` with a Kubernetes object of a workload kind: submitted through Muster."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from schemas.intents import SubmitJob
from schemas.topics import INTENTS_TOPIC
from services.cli.jobs import submit
from tests.gateway.builders import Harness

ROOT = Path(__file__).resolve().parents[2]
KUBE = ROOT / "examples" / "kube"


def run(args: list[str], env: dict[str, str]) -> tuple[int, str]:
    result = CliRunner().invoke(submit, args, env=env)
    return result.exit_code, result.output


def test_submit_a_jobset_file(served: tuple[Harness, dict[str, str]]) -> None:
    gw, env = served
    code, out = run([str(KUBE / "jobset.yaml")], env)
    assert code == 0, out
    job_id, state = out.split()[:2]
    assert job_id.startswith("llm-pretrain-") and state == "submitted"
    [sent] = gw.publisher.on(INTENTS_TOPIC)
    assert isinstance(sent, SubmitJob) and sent.job_id == job_id and sent.spec.queue == "team-a"
    assert [(r.name, r.replicas, r.template.resources.gpus) for r in sent.spec.roles] == [
        ("coordinator", 1, 0), ("workers", 4, 4)]
    workload = sent.spec.workload
    assert workload is not None and workload.kind == "JobSet" and workload.manifest is not None


def test_submit_a_trainjob_with_its_runtime_into_another_queue(served: tuple[Harness, dict[str, str]]) -> None:
    gw, env = served
    code, out = run([str(KUBE / "trainjob.yaml"), "--queue", "team-a-ops",
                     "--related", str(KUBE / "torch-distributed-runtime.yaml")], env)
    assert code == 0, out
    [sent] = gw.publisher.on(INTENTS_TOPIC)
    assert isinstance(sent, SubmitJob) and sent.spec.queue == "team-a-ops"
    assert [(r.name, r.replicas) for r in sent.spec.roles] == [("node", 2)]


def test_what_cannot_be_submitted_says_why(served: tuple[Harness, dict[str, str]]) -> None:
    gw, env = served
    code, out = run([str(KUBE / "trainjob.yaml")], env)
    assert code != 0 and "runtime ClusterTrainingRuntime torch-distributed was not found" in out
    code, out = run([str(KUBE / "jobset.yaml"), "--queue", "team-b"], env)
    assert code != 0 and "403" in out and "another tenant" in out
    code, out = run([str(ROOT / "examples" / "jobs" / "train-llm.yaml"), "--queue", "team-a"], env)
    assert code != 0 and "--queue and --related are for a Kubernetes object" in out
    assert gw.publisher.sent == []
