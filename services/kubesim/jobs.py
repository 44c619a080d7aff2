"""The Job controller: creates a Job's pods, counts outcomes and sets Job status and conditions."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from services.kubesim.controller import Reconciler
from services.kubesim.events import EventRecorder
from services.kubesim.meta import Obj, condition_true, deep, now_rfc3339, random_suffix, set_condition
from services.kubesim.registry import TERMINAL_PHASES, Registry
from services.kubesim.resources import JOBS, PODS
from services.kubesim.store import StoreEvent

INDEX_KEY = "batch.kubernetes.io/job-completion-index"
UID_LABEL = "batch.kubernetes.io/controller-uid"
COMPONENT = "job-controller"


def _index(pod: Obj) -> int | None:
    value = ((pod.get("metadata") or {}).get("annotations") or {}).get(INDEX_KEY)
    return int(value) if value is not None and str(value).isdigit() else None


def format_indexes(indexes: set[int]) -> str:
    """``{0,1,2,4,6,7}`` -> ``"0-2,4,6,7"`` as in ``status.completedIndexes``."""
    parts: list[str] = []
    ordered = sorted(indexes)
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        # a run of two is written as two numbers, as the real Job controller does
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]},{ordered[j]}" if j == i + 1
                     else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(parts)


def _exit_codes(pod: Obj) -> list[tuple[str, int]]:
    out = []
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        term = (cs.get("state") or {}).get("terminated")
        if term is not None:
            out.append((str(cs.get("name")), int(term.get("exitCode", 0))))
    return out


def failure_action(job: Obj, pod: Obj) -> str:
    """The ``podFailurePolicy`` action for a failed pod: FailJob, Ignore, FailIndex or Count."""
    for rule in ((job.get("spec") or {}).get("podFailurePolicy") or {}).get("rules") or []:
        on_codes = rule.get("onExitCodes")
        if on_codes:
            values = set(on_codes.get("values") or [])
            container = on_codes.get("containerName")
            for name, code in _exit_codes(pod):
                if container and name != container:
                    continue
                hit = code in values if on_codes.get("operator") == "In" else code not in values and code != 0
                if hit:
                    return str(rule.get("action"))
        for pattern in rule.get("onPodConditions") or []:
            for cond in (pod.get("status") or {}).get("conditions") or []:
                if cond.get("type") == pattern.get("type") and cond.get("status") == pattern.get("status", "True"):
                    return str(rule.get("action"))
    return "Count"


class JobController(Reconciler):
    """Reconciles each Job against the pods it owns (labels ``batch.kubernetes.io/controller-uid``)."""

    name = "job-controller"

    def __init__(self, registry: Registry, events: EventRecorder) -> None:
        super().__init__()
        self.registry = registry
        self.events = events

    def on_event(self, ev: StoreEvent) -> None:
        m = ev.obj["metadata"]
        if ev.rtype is JOBS and ev.type != "DELETED":
            self.enqueue((m["namespace"], m["name"]))
        elif ev.rtype is PODS:
            for ref in m.get("ownerReferences") or []:
                if ref.get("kind") == "Job" and ref.get("controller"):
                    self.enqueue((m["namespace"], ref.get("name")))

    def _pods(self, job: Obj) -> list[Obj]:
        uid = job["metadata"]["uid"]
        ns = job["metadata"]["namespace"]
        return [p for p in self.registry.store.owned_by(PODS, uid) if p["metadata"].get("namespace") == ns]

    def reconcile(self, key: Hashable) -> None:
        assert isinstance(key, tuple)
        job = self.registry.store.try_get(JOBS, str(key[0]), str(key[1]))
        if job is None or job["metadata"].get("deletionTimestamp"):
            return
        spec, status = job["spec"], job.setdefault("status", {})
        before = deep(status)
        pods = self._pods(job)
        live = [p for p in pods if (p.get("status") or {}).get("phase") not in TERMINAL_PHASES]
        active = [p for p in live if not p["metadata"].get("deletionTimestamp")]
        succeeded = [p for p in pods if (p.get("status") or {}).get("phase") == "Succeeded"]
        failed_pods = [p for p in pods if (p.get("status") or {}).get("phase") == "Failed"]
        actions = [failure_action(job, p) for p in failed_pods]
        counted_now = sum(1 for action in actions if action != "Ignore")
        failed_count = max(int(status.get("failed", 0)), counted_now)
        status["failed"] = failed_count
        conds = status.setdefault("conditions", [])
        finished = condition_true(job, "Complete") or condition_true(job, "Failed")
        indexed = spec.get("completionMode") == "Indexed"
        completions = spec.get("completions")
        done_indexes = {i for p in succeeded if (i := _index(p)) is not None}
        succeeded_count = len(done_indexes) if indexed else len(succeeded)
        status["succeeded"] = succeeded_count
        if indexed:
            status["completedIndexes"] = format_indexes(done_indexes)
        fail_reason = ""
        if "FailJob" in actions:
            fail_reason = "PodFailurePolicy"
        elif failed_count > int(spec.get("backoffLimit", 6)):
            fail_reason = "BackoffLimitExceeded"
        if not finished and fail_reason:
            message = ("Job has reached the specified backoff limit" if fail_reason == "BackoffLimitExceeded"
                       else "Container failed with an exit code matched by the pod failure policy")
            set_condition(conds, "FailureTarget", "True", fail_reason, message)
            set_condition(conds, "Failed", "True", fail_reason, message)
            self.events.record(job, "Warning", fail_reason, message, COMPONENT)
            finished = True
        complete = (
            succeeded_count >= completions if completions is not None
            else bool(succeeded) and not active
        )
        if not finished and complete:
            set_condition(conds, "SuccessCriteriaMet", "True", "CompletionsReached", "Reached expected number of "
                          "succeeded pods")
            set_condition(conds, "Complete", "True", "CompletionsReached", "Reached expected number of succeeded "
                          "pods")
            status["completionTime"] = now_rfc3339()
            self.events.record(job, "Normal", "Completed", "Job completed", COMPONENT)
            finished = True
        suspended = bool(spec.get("suspend"))
        if finished or suspended:
            for pod in active:
                self._delete_pod(pod)
            active = []
            if not finished:
                if set_condition(conds, "Suspended", "True", "JobSuspended", "Job suspended"):
                    self.events.record(job, "Normal", "Suspended", "Job suspended", COMPONENT)
                status.pop("startTime", None)
        else:
            if condition_true(job, "Suspended"):
                set_condition(conds, "Suspended", "False", "JobResumed", "Job resumed")
                self.events.record(job, "Normal", "Resumed", "Job resumed", COMPONENT)
            status.setdefault("startTime", now_rfc3339())
            active += self._create_missing(job, active, done_indexes, succeeded_count)
        status["active"] = len(active)
        status["ready"] = sum(1 for p in active if condition_true(p, "Ready"))
        status["terminating"] = len(live) - len([p for p in live if not p["metadata"].get("deletionTimestamp")])
        if not conds:
            status.pop("conditions")
        if status != before:
            self.registry.write(JOBS, job)

    def _create_missing(self, job: Obj, active: list[Obj], done: set[int], succeeded: int) -> list[Obj]:
        spec = job["spec"]
        parallelism = int(spec.get("parallelism", 1))
        completions = spec.get("completions")
        if spec.get("completionMode") == "Indexed":
            running = {i for p in active if (i := _index(p)) is not None}
            todo = [i for i in range(int(completions or 0)) if i not in done and i not in running]
            room = max(parallelism - len(active), 0)
            return [self._create_pod(job, i) for i in todo[:room]]
        want = parallelism if completions is None else min(parallelism, int(completions) - succeeded)
        if completions is None and succeeded:
            want = 0
        return [self._create_pod(job, None) for _ in range(max(want - len(active), 0))]

    def _create_pod(self, job: Obj, index: int | None) -> Obj:
        jm = job["metadata"]
        template = deep(job["spec"]["template"])
        meta = template.setdefault("metadata", {})
        annotations = meta.setdefault("annotations", {})
        labels = meta.setdefault("labels", {})
        pod_spec: dict[str, Any] = template["spec"]
        if index is not None:
            annotations[INDEX_KEY] = str(index)
            labels[INDEX_KEY] = str(index)
            for c in pod_spec.get("containers") or []:
                env = [e for e in c.get("env") or [] if e.get("name") != "JOB_COMPLETION_INDEX"]
                env.append({"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {
                    "apiVersion": "v1", "fieldPath": f"metadata.annotations['{INDEX_KEY}']"}}})
                c["env"] = env
            pod_spec.setdefault("hostname", f"{jm['name']}-{index}")
            name = f"{jm['name']}-{index}-{random_suffix()}"
        else:
            name = f"{jm['name']}-{random_suffix()}"
        meta.update(
            {
                "name": name,
                "namespace": jm["namespace"],
                "ownerReferences": [
                    {"apiVersion": "batch/v1", "kind": "Job", "name": jm["name"], "uid": jm["uid"],
                     "controller": True, "blockOwnerDeletion": True}
                ],
            }
        )
        pod = {"metadata": meta, "spec": pod_spec}
        created = self.registry.create(PODS, jm["namespace"], pod)
        self.events.record(job, "Normal", "SuccessfulCreate", f"Created pod: {name}", COMPONENT)
        return created

    def _delete_pod(self, pod: Obj) -> None:
        m = pod["metadata"]
        self.registry.delete(PODS, m["namespace"], m["name"])
        self.events.record(pod, "Normal", "SuccessfulDelete", f"Deleted pod: {m['name']}", COMPONENT)
