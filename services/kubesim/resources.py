"""The resource types kubesim serves: names, kinds, groups and the verbs discovery advertises."""

from __future__ import annotations

from dataclasses import dataclass

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True)
class ResourceType:
    """One REST resource: ``/api/v1/pods`` or ``/apis/batch/v1/namespaces/x/jobs``."""

    plural: str
    singular: str
    kind: str
    group: str
    version: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ALL_VERBS
    #: served from a CustomResourceDefinition on a real cluster: no strategic merge patch (415)
    custom: bool = False

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_version(self) -> str:
        return self.api_version

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"


NAMESPACES = ResourceType("namespaces", "namespace", "Namespace", "", "v1", False, ("ns",), ("status",))
NODES = ResourceType("nodes", "node", "Node", "", "v1", False, ("no",), ("status",))
PODS = ResourceType("pods", "pod", "Pod", "", "v1", True, ("po",), ("status", "log"), ("all",))
EVENTS = ResourceType("events", "event", "Event", "", "v1", True, ("ev",))
JOBS = ResourceType("jobs", "job", "Job", "batch", "v1", True, (), ("status",), ("all",))
LEASES = ResourceType("leases", "lease", "Lease", "coordination.k8s.io", "v1", True)


# -- the workload kinds Muster queues (services.spec.kinds): storage only ---------------------------------
# Objects are stored, listed, watched, patched (status subresource included) and garbage-collected like any
# other; no controller acts on them (no ReplicaSets, Jobs or pods are made from them). Custom resources are
# not checked against their CRD's schema.
DEPLOYMENTS = ResourceType("deployments", "deployment", "Deployment", "apps", "v1", True, ("deploy",), ("status",),
                           ("all",))
STATEFULSETS = ResourceType("statefulsets", "statefulset", "StatefulSet", "apps", "v1", True, ("sts",), ("status",),
                            ("all",))
JOBSETS = ResourceType("jobsets", "jobset", "JobSet", "jobset.x-k8s.io", "v1alpha2", True, (), ("status",),
                       custom=True)
TRAINJOBS = ResourceType("trainjobs", "trainjob", "TrainJob", "trainer.kubeflow.org", "v1alpha1", True, (),
                         ("status",), custom=True)
TRAINING_RUNTIMES = ResourceType("trainingruntimes", "trainingruntime", "TrainingRuntime", "trainer.kubeflow.org",
                                 "v1alpha1", True, custom=True)
CLUSTER_TRAINING_RUNTIMES = ResourceType("clustertrainingruntimes", "clustertrainingruntime",
                                         "ClusterTrainingRuntime", "trainer.kubeflow.org", "v1alpha1", False,
                                         custom=True)
RAYJOBS = ResourceType("rayjobs", "rayjob", "RayJob", "ray.io", "v1", True, (), ("status",), custom=True)
RAYCLUSTERS = ResourceType("rayclusters", "raycluster", "RayCluster", "ray.io", "v1", True, (), ("status",),
                           custom=True)
LEADERWORKERSETS = ResourceType("leaderworkersets", "leaderworkerset", "LeaderWorkerSet", "leaderworkerset.x-k8s.io",
                                "v1", True, ("lws",), ("status",), custom=True)
WORKLOAD_TYPES: tuple[ResourceType, ...] = (DEPLOYMENTS, STATEFULSETS, JOBSETS, TRAINJOBS, TRAINING_RUNTIMES,
                                            CLUSTER_TRAINING_RUNTIMES, RAYJOBS, RAYCLUSTERS, LEADERWORKERSETS)

# -- capacity that grows: cluster-autoscaler's ProvisioningRequest and the PodTemplates it refers to (storage only;
# the fake cloud of ``services.kubereal.fake_cloud`` answers the requests, as on the real control plane)
POD_TEMPLATES = ResourceType("podtemplates", "podtemplate", "PodTemplate", "", "v1", True)
PROVISIONING_REQUESTS = ResourceType("provisioningrequests", "provisioningrequest", "ProvisioningRequest",
                                     "autoscaling.x-k8s.io", "v1", True, ("provreq",), ("status",), custom=True)

RESOURCE_TYPES: tuple[ResourceType, ...] = (NAMESPACES, NODES, PODS, EVENTS, JOBS, LEASES, *WORKLOAD_TYPES,
                                            POD_TEMPLATES, PROVISIONING_REQUESTS)

GROUP_VERSIONS: dict[str, tuple[str, str]] = {
    "v1": ("", "v1"),
    "batch/v1": ("batch", "v1"),
    "coordination.k8s.io/v1": ("coordination.k8s.io", "v1"),
    **{rt.api_version: (rt.group, rt.version) for rt in WORKLOAD_TYPES},
    PROVISIONING_REQUESTS.api_version: (PROVISIONING_REQUESTS.group, PROVISIONING_REQUESTS.version),
}


def resources_in(group: str, version: str) -> list[ResourceType]:
    return [r for r in RESOURCE_TYPES if r.group == group and r.version == version]


def lookup(group: str, version: str, plural: str) -> ResourceType | None:
    for r in RESOURCE_TYPES:
        if r.group == group and r.version == version and r.plural == plural:
            return r
    return None
