"""The job spec a researcher writes (YAML or JSON) and a pipeline sends inside ``SubmitJob``."""

from __future__ import annotations

import functools
import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, field_validator, model_validator

from schemas.envelope import Name

_QUANTITY = re.compile(r"^(?P<num>[0-9]+(\.[0-9]+)?)(?P<unit>m|k|M|G|T|Ki|Mi|Gi|Ti)?$")
_MIB_FACTORS = {None: 1 / 2**20, "k": 1000 / 2**20, "M": 10**6 / 2**20, "G": 10**9 / 2**20,
                "T": 10**12 / 2**20, "Ki": 1 / 1024, "Mi": 1.0, "Gi": 1024.0, "Ti": 1024.0**2}
_CRON_FIELD = r"[0-9*/,\-A-Za-z?]+"
_CRON = re.compile(rf"^(@(hourly|daily|weekly|monthly|yearly)|{_CRON_FIELD}( {_CRON_FIELD}){{4}})$")
_LABEL_KEY = r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"

Quantity = Annotated[str, Field(max_length=32, pattern=_QUANTITY.pattern)]
MIG_COMPUTE_SLICES = 7
#: a MIG profile as the NVIDIA device plugin names it: <compute slices>g.<memory>gb, e.g. 1g.10gb, 3g.40gb
MigProfile = Annotated[str, Field(max_length=32, pattern=r"^[1-9][0-9]?g\.[0-9]+gb(\+[a-z0-9]+)?$")]
LabelKey = Annotated[str, Field(max_length=253, pattern=_LABEL_KEY)]
LabelValue = Annotated[str, Field(max_length=63, pattern=r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")]
EnvName = Annotated[str, Field(max_length=128, pattern=r"^[A-Za-z_][A-Za-z0-9_.\-]*$")]
#: any text but NUL, which no process environment or argument vector can hold (it would end the string there)
EnvValue = Annotated[str, Field(max_length=32768, pattern=r"^[^\x00]*$")]
Arg = Annotated[str, Field(max_length=4096, pattern=r"^[^\x00]*$")]
#: a Secret's name (a DNS subdomain, as Kubernetes names Secrets) and one of its keys
SecretName = Annotated[str, Field(min_length=1, max_length=253, pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")]
SecretKey = Annotated[str, Field(min_length=1, max_length=253, pattern=r"^[-._a-zA-Z0-9]+$")]


@functools.lru_cache(maxsize=4096)
def cpu_millicores(quantity: str) -> int:
    """Kubernetes CPU quantity (``"500m"``, ``"2"``, ``"1.5"``) in millicores (remembered per string: a
    service reads the same few quantities for every job)."""
    m = _QUANTITY.match(quantity)
    if m is None or m["unit"] not in (None, "m"):
        raise ValueError(f"not a CPU quantity: {quantity!r}")
    value = float(m["num"])
    return round(value if m["unit"] == "m" else value * 1000)


@functools.lru_cache(maxsize=4096)
def memory_mib(quantity: str) -> int:
    """Kubernetes memory quantity (``"512Mi"``, ``"64Gi"``, ``"1G"``) in MiB, rounded up (remembered per
    string)."""
    m = _QUANTITY.match(quantity)
    if m is None or m["unit"] == "m":
        raise ValueError(f"not a memory quantity: {quantity!r}")
    mib = float(m["num"]) * _MIB_FACTORS[m["unit"]]
    return int(-(-mib // 1))


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ResourceRequest(_Spec):
    """Resources of ONE pod of the gang."""

    gpus: int = Field(default=0, ge=0, le=64)
    gpu_type: Name | None = Field(default=None, description="None: any GPU type")
    cpu: Quantity = "1"
    memory: Quantity = "4Gi"
    gpu_fraction: float | None = Field(
        default=None, gt=0, lt=1,
        description="GPU sharing: this fraction of one shareable GPU per pod, a multiple of 1/8 "
        "(0.125, 0.25, ..., 0.875); the GPU's memory is shared in that proportion. Not with gpus or mig_profile",
        exclude_if=lambda v: v is None,  # unset sharing fields stay out of the JSON: whole-GPU specs as before
    )
    mig_profile: MigProfile | None = Field(
        default=None,
        description="MIG: slices of this profile per pod (nvidia.com/mig-<profile>), e.g. 1g.10gb; "
        "each is charged its compute slices out of seven of a whole GPU. Not with gpus or gpu_fraction",
        exclude_if=lambda v: v is None,
    )
    mig_slices: int = Field(default=1, ge=1, le=56, description="MIG slices of mig_profile per pod",
                            exclude_if=lambda v: v == 1)

    @model_validator(mode="after")
    def _one_kind_of_gpu(self) -> ResourceRequest:
        kinds = [k for k, v in (("gpus", self.gpus), ("gpu_fraction", self.gpu_fraction),
                                ("mig_profile", self.mig_profile)) if v]
        if len(kinds) > 1:
            raise ValueError(f"ask for one of gpus, gpu_fraction and mig_profile, not {' and '.join(kinds)}")
        if self.gpu_fraction is not None and (self.gpu_fraction * 8) != int(self.gpu_fraction * 8):
            raise ValueError("gpu_fraction must be a multiple of 1/8 (0.125, 0.25, 0.375, 0.5, ...)")
        return self

    @property
    def shares_gpus(self) -> bool:
        return bool(self.gpu_fraction or self.mig_profile)

    @property
    def gpus_charged(self) -> float:
        """GPUs one pod is charged (quota, GPU-hours): whole GPUs, its fraction, or its MIG slices' share
        (each slice its compute slices out of the seven of an A100/H100: ``1g.10gb`` is 1/7)."""
        if self.mig_profile:
            return min(int(self.mig_profile.split("g.", 1)[0]) / MIG_COMPUTE_SLICES, 1.0) * self.mig_slices
        return self.gpu_fraction or self.gpus

    def gpu_share(self, replicas: int) -> float | None:
        """A sharing job's GPUs as charged for ``replicas`` pods (what status and views show); None for
        whole GPUs."""
        return round(replicas * self.gpus_charged, 4) if self.shares_gpus else None

    @field_validator("cpu")
    @classmethod
    def _cpu(cls, v: str) -> str:
        cpu_millicores(v)
        return v

    @field_validator("memory")
    @classmethod
    def _memory(cls, v: str) -> str:
        memory_mib(v)
        return v

    @property
    def cpu_m(self) -> int:
        return cpu_millicores(self.cpu)

    @property
    def memory_mb(self) -> int:
        return memory_mib(self.memory)


class SecuritySpec(_Spec):
    """What a pod asks for beyond the defaults; rejected unless the queue's policy allows it."""

    privileged: bool = False
    run_as_root: bool = False
    host_network: bool = False
    host_pid: bool = False
    host_ipc: bool = False
    host_path_volumes: list[Annotated[str, Field(max_length=4096)]] = Field(default_factory=list, max_length=16)

    @property
    def elevated(self) -> bool:
        return (self.privileged or self.run_as_root or self.host_network or self.host_pid or self.host_ipc
                or bool(self.host_path_volumes))


class SecretKeyRef(_Spec):
    """One key of a Kubernetes Secret in the job's namespace; the pod reads it (``valueFrom.secretKeyRef``).
    Muster carries the reference only: it never reads the Secret."""

    name: SecretName
    key: SecretKey
    optional: bool = Field(default=False, description="start the pod even when the Secret or key is missing",
                           exclude_if=lambda v: not v)


class EnvVar(_Spec):
    """An environment entry in long form: a plain ``value`` or a ``secret_ref``, exactly one.

    A plain value travels in clear text on Muster's topics and shows in the job's spec; a value whose name
    (or content) looks like a secret is refused at submission unless ``not_secret`` says it is not one.
    """

    value: EnvValue | None = Field(default=None, exclude_if=lambda v: v is None)
    secret_ref: SecretKeyRef | None = Field(default=None, description="read the value from a Secret's key",
                                            exclude_if=lambda v: v is None)
    not_secret: bool = Field(
        default=False, exclude_if=lambda v: not v,
        description="with value: the name only looks like a secret's (e.g. SORT_KEY); submit the value as given")

    @model_validator(mode="after")
    def _one_source(self) -> EnvVar:
        if (self.value is None) == (self.secret_ref is None):
            raise ValueError("give exactly one of value and secret_ref")
        if self.not_secret and self.secret_ref is not None:
            raise ValueError("not_secret goes with a plain value, not with secret_ref")
        return self


class SecretRef(_Spec):
    """A whole Kubernetes Secret in the job's namespace."""

    name: SecretName
    optional: bool = Field(default=False, description="start the pod even when the Secret is missing",
                           exclude_if=lambda v: not v)


class EnvFromSecret(_Spec):
    """Every key of a Secret as an environment variable (``envFrom.secretRef``), optionally prefixed.
    An entry of ``env`` with the same name wins."""

    secret_ref: SecretRef
    prefix: EnvName | None = Field(default=None, exclude_if=lambda v: v is None)


def _env_form(entry: object) -> str:
    return "entry" if isinstance(entry, dict | EnvVar) else "value"


#: an environment entry: a plain value (the short form), or an ``EnvVar``; an error names the form meant
EnvEntry = Annotated[Annotated[EnvValue, Tag("value")] | Annotated[EnvVar, Tag("entry")], Discriminator(_env_form)]


class PodTemplate(_Spec):
    # no whitespace and no control characters (a NUL byte cannot reach a container runtime intact)
    image: Annotated[str, Field(min_length=1, max_length=512, pattern=r"^[^\s\x00-\x1f\x7f]+$")]
    command: list[Arg] = Field(default_factory=list, max_length=256)
    args: list[Arg] = Field(default_factory=list, max_length=256)
    env: dict[EnvName, EnvEntry] = Field(
        default_factory=dict, max_length=256,
        description="environment: NAME: value, or NAME: {secret_ref: {name, key}} to read a Kubernetes Secret's "
        "key in the job's namespace (secrets belong there, not in plain values)")
    env_from: list[EnvFromSecret] = Field(
        default_factory=list, max_length=16, exclude_if=lambda v: not v,
        description="whole Kubernetes Secrets of the job's namespace as environment variables")
    resources: ResourceRequest = Field(default_factory=ResourceRequest)
    working_dir: Annotated[str, Field(max_length=4096)] | None = None
    security: SecuritySpec = Field(default_factory=SecuritySpec)

    def plain_env(self) -> dict[str, str]:
        """The entries with a plain value (short or long form), name -> value."""
        plain: dict[str, str] = {}
        for name, entry in self.env.items():
            value = entry if isinstance(entry, str) else entry.value
            if value is not None:
                plain[name] = value
        return plain

    def secret_env(self) -> dict[str, SecretKeyRef]:
        """The entries read from Secrets, name -> reference."""
        return {k: v.secret_ref for k, v in self.env.items() if not isinstance(v, str) and v.secret_ref is not None}

    def secret_names(self) -> list[str]:
        """Every Secret the pods read, sorted (references and ``env_from``)."""
        names = {ref.name for ref in self.secret_env().values()} | {e.secret_ref.name for e in self.env_from}
        return sorted(names)


class TopologySpec(_Spec):
    level: Literal["zone", "block", "rack", "node"]
    mode: Literal["required", "preferred"] = "required"


class CheckpointSpec(_Spec):
    """Cooperative preemption: the job is signalled and given ``grace_period_s`` to checkpoint."""

    enabled: bool = False
    grace_period_s: int = Field(default=30, ge=0, le=3600)
    directory: Annotated[str, Field(max_length=4096)] | None = None


class DependencySpec(_Spec):
    """Wait for another job of the same tenant to end with ``on``."""

    job: Annotated[str, Field(min_length=1, max_length=63, pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$",
                              description="a job id, or a job name (the tenant's latest job of that name)")]
    on: Literal["succeeded", "finished", "failed"] = "succeeded"

    @model_validator(mode="before")
    @classmethod
    def _yaml_on(cls, data: object) -> object:
        """YAML 1.1 reads the key ``on`` as the boolean true (and JSON then writes it "true"); take it as meant."""
        if isinstance(data, dict) and "on" not in data:
            data = {("on" if k is True or k == "true" else k): v for k, v in data.items()}
        return data


#: a role's name: a DNS label short enough to name Kubernetes objects after it (``<job>-<role>``)
RoleName = Annotated[str, Field(min_length=1, max_length=32, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")]
#: the name of the one role of a job given as ``replicas`` + ``template``
MAIN_ROLE = "main"
#: roles a job may have (Kueue's limit of pod sets per workload too)
MAX_ROLES = 8


class RoleSpec(_Spec):
    """One role of a job (a pod set): ``replicas`` pods made from one template, e.g. a launcher, workers,
    a Ray head or worker group, an LWS leader. A job's roles are admitted together, all or nothing."""

    name: RoleName
    replicas: int = Field(default=1, ge=1, le=4096, description="pods of this role")
    min_replicas: int | None = Field(
        default=None, ge=1, le=4096, exclude_if=lambda v: v is None,
        description="elastic: the fewest pods of this role the job can start with (one role of a job at most)")
    template: PodTemplate
    topology: TopologySpec | None = Field(
        default=None, exclude_if=lambda v: v is None,
        description="this role's pods inside one domain of the level; for any role but the job's main one (the "
                    "elastic one, else the one with most GPUs), the domain where the main role's pods are")

    @model_validator(mode="after")
    def _consistent(self) -> RoleSpec:
        if self.min_replicas is not None and self.min_replicas > self.replicas:
            raise ValueError("min_replicas must not exceed replicas")
        return self

    @property
    def gpus(self) -> float:
        """GPUs the role's pods are charged together (whole GPUs, or shares of GPUs)."""
        return self.replicas * self.template.resources.gpus_charged


_KIND = r"^[A-Z][A-Za-z0-9]*$"
_API_VERSION = r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?v[0-9]+((alpha|beta)[0-9]+)?$"


class WorkloadObject(_Spec):
    """The Kubernetes object a job is, of a kind whose controller runs it (JobSet, TrainJob, RayJob,
    RayCluster, LeaderWorkerSet, Deployment, StatefulSet, a group of Pods...). Kube-native: its owner
    created it held back (suspended or gated) and ``name`` names it. Through Muster: ``manifest`` is the
    object, which the dispatcher creates held back in the job's namespace once the job is admitted.
    Either way the job's ``roles`` are the object's pod sets, and the dispatcher releases the object onto
    the admitted placement."""

    api_version: Annotated[str, Field(max_length=128, pattern=_API_VERSION)]
    kind: Annotated[str, Field(max_length=63, pattern=_KIND)]
    name: Annotated[str, Field(min_length=1, max_length=253)] | None = Field(
        default=None, exclude_if=lambda v: v is None, description="kube-native: the existing object's name")
    namespace: Name | None = Field(default=None, exclude_if=lambda v: v is None)
    uid: Annotated[str, Field(max_length=64)] | None = Field(
        default=None, exclude_if=lambda v: v is None,
        description="kube-native: the object's uid, so a new object of the same name is another job")
    manifest: dict[str, Any] | None = Field(
        default=None, exclude_if=lambda v: v is None,
        description="through Muster: the object to create (its metadata.name and namespace are set by Muster)")

    @model_validator(mode="after")
    def _one_way_in(self) -> WorkloadObject:
        if (self.name is None) == (self.manifest is None):
            raise ValueError("give name (an existing object) or manifest (an object to create), exactly one")
        if self.manifest is not None:
            given = self.manifest.get("kind")
            if self.kind == "Pod" and given == "List":  # a group of plain pods comes as a List of Pods
                return self
            if given not in (None, self.kind):
                raise ValueError(f"manifest is a {self.manifest.get('kind')}, not a {self.kind}")
            if self.manifest.get("apiVersion") not in (None, self.api_version):
                raise ValueError(f"manifest's apiVersion {self.manifest.get('apiVersion')} is not {self.api_version}")
        return self


class JobSpec(_Spec):
    name: Name
    queue: Name
    priority_class: Name = "normal"
    replicas: int = Field(default=1, ge=1, le=4096, description="gang size: pods that start together")
    min_replicas: int | None = Field(default=None, ge=1, le=4096, description="elastic: smallest useful size")
    template: PodTemplate | None = Field(
        default=None, description="the pods of a one-role job (with replicas); a job of several roles gives roles")
    roles: list[RoleSpec] = Field(
        default_factory=list, max_length=MAX_ROLES, exclude_if=lambda v: not v,
        description="the job's roles (pod sets), admitted together: instead of replicas + template")
    workload: WorkloadObject | None = Field(
        default=None, exclude_if=lambda v: v is None,
        description="the Kubernetes object (JobSet, RayJob, LeaderWorkerSet...) the job is; its roles are its pod sets")
    topology: TopologySpec | None = None
    cluster: Name | None = None
    node_selector: dict[LabelKey, LabelValue] = Field(default_factory=dict, max_length=32)
    runtime_estimate_s: float | None = Field(default=None, gt=0, le=366 * 86400)
    preemptible: bool = True
    checkpoint: CheckpointSpec = Field(default_factory=CheckpointSpec)
    max_wait_s: float | None = Field(default=None, gt=0, le=10 * 366 * 86400)
    max_runtime_s: float | None = Field(default=None, gt=0, le=10 * 366 * 86400)
    idle_timeout_s: float | None = Field(
        default=None, gt=0, le=366 * 86400, exclude_if=lambda v: v is None,
        description="an interactive session (a notebook): once every GPU of its pods has been idle this long, "
        "its GPUs are released (its pods stop, its object and volumes stay) and the job is suspended until "
        "its owner resumes it")
    max_restarts: int = Field(default=3, ge=0, le=100,
                              description="whole-gang restarts after a failure of the job's own (exit code)")
    max_infrastructure_retries: int = Field(
        default=10, ge=0, le=100,
        description="requeues after a node or infrastructure failure (eviction, lost node, device error), "
        "each on other nodes if any fit; these do not spend max_restarts")
    schedule: Annotated[str, Field(max_length=128)] | None = Field(
        default=None, description="cron expression: submit again on this schedule"
    )
    after_previous: Literal["succeeded", "finished"] | None = Field(
        default=None,
        description="with schedule: each firing waits for the recurring job's previous firing to end so (it gets "
                    "an `after` entry naming that job); `succeeded`: a failed firing cancels (or fails) every later "
                    "one until the recurring job is defined afresh")
    labels: dict[LabelKey, LabelValue] = Field(default_factory=dict, max_length=64)
    annotations: dict[LabelKey, Annotated[str, Field(max_length=4096)]] = Field(default_factory=dict, max_length=64)
    after: list[DependencySpec] = Field(
        default_factory=list, max_length=64,
        description="jobs this one waits for: it is queued only once each ended as asked")
    allow_future_capacity: bool = Field(
        default=False, description="accept the job although no cluster can host it now (capacity to be added)")
    on_dependency_failure: Literal["cancel", "fail"] = Field(
        default="cancel", description="what becomes of this job when a job it waits for ended otherwise")

    @model_validator(mode="after")
    def _consistent(self) -> JobSpec:
        if self.min_replicas is not None and self.min_replicas > self.replicas:
            raise ValueError("min_replicas must not exceed replicas")
        if self.roles:
            if self.template is not None:
                raise ValueError("give template (one role) or roles, not both")
            # replicas keeps its default (1) and min_replicas none: the JSON form of a job with roles carries both
            if self.replicas != 1 or self.min_replicas is not None:
                raise ValueError("a job with roles gives replicas and min_replicas per role")
            names = [r.name for r in self.roles]
            if len(set(names)) != len(names):
                raise ValueError("role names must be unique")
            if sum(r.min_replicas is not None for r in self.roles) > 1:
                raise ValueError("at most one role may be elastic (min_replicas)")
            shared = [r.name for r in self.roles if r.template.resources.shares_gpus]
            if shared and len(self.roles) > 1:
                raise ValueError(f"GPU sharing (gpu_fraction, mig_profile) is for one-role jobs; role {shared[0]} "
                                 "asks for it")
            types = {r.template.resources.gpu_type for r in self.roles if r.template.resources.gpus}
            if len(types) > 1:
                raise ValueError("the roles that ask for GPUs must ask for the same gpu_type (or all for none)")
        elif self.template is None:
            raise ValueError("give template (the pods of a one-role job) or roles")
        elif self.workload is not None and self.workload.manifest is not None:
            raise ValueError("a workload object's pod sets are given as roles")
        named = [d.job for d in self.after]
        if len(set(named)) != len(named):
            raise ValueError("after names a job more than once")
        if self.schedule is not None and not _CRON.match(self.schedule):
            raise ValueError(f"schedule is not a cron expression: {self.schedule!r}")
        if self.after_previous is not None and self.schedule is None:
            raise ValueError("after_previous needs schedule: only a recurring job has a previous firing")
        if self.after_previous is not None and len(self.after) >= 64:
            raise ValueError("after_previous adds a 65th entry to after (at most 64)")
        return self

    def pod_roles(self) -> list[RoleSpec]:
        """The job's roles: ``roles``, or the one role ``main`` that ``replicas`` and ``template`` describe."""
        if self.roles:
            return list(self.roles)
        assert self.template is not None  # _consistent
        return [RoleSpec.model_construct(name=MAIN_ROLE, replicas=self.replicas, min_replicas=self.min_replicas,
                                         template=self.template, topology=None)]

    def main_role(self) -> RoleSpec:
        """The role the scheduler sizes the job by: the elastic one, else the one with most GPUs (then most
        pods, then the first). Its GPU type is the job's; the others are placed beside it."""
        if not self.roles:
            return self.pod_roles()[0]
        roles = self.roles
        elastic = [r for r in roles if r.min_replicas is not None]
        if elastic:
            return elastic[0]
        return max(roles, key=lambda r: (r.gpus, r.replicas, -roles.index(r)))

    @property
    def main_replicas(self) -> int:
        """Pods of the main role at full size (``replicas`` for a one-role job): what a job's size counts."""
        return self.replicas if not self.roles else self.main_role().replicas

    @property
    def main_min_replicas(self) -> int | None:
        return self.min_replicas if not self.roles else self.main_role().min_replicas

    def resized(self, replicas: int, running: int | None = None) -> JobSpec:
        """This spec with its main role at ``replicas`` pods (its elastic minimum lowered to fit). ``running``:
        the pods of the main role it runs now; asked to grow beyond them, it keeps them as its minimum (the
        rest comes as room allows)."""
        low = self.main_min_replicas
        if running is not None and replicas > running:
            low = running if low is None else min(low, running)
        low = None if low is None else min(low, replicas)
        if not self.roles:
            return self.model_copy(update={"replicas": replicas, "min_replicas": low})
        main = self.main_role().name
        roles = [r.model_copy(update={"replicas": replicas, "min_replicas": low}) if r.name == main else r
                 for r in self.roles]
        return self.model_copy(update={"roles": roles})

    def role_named(self, name: str | None) -> RoleSpec:
        """The role of a placement entry: ``name``, or (None, as a job of one role's entries have) the main role."""
        if name is not None:
            for r in self.pod_roles():
                if r.name == name:
                    return r
        return self.main_role()

    def templates(self) -> list[PodTemplate]:
        """Every role's pod template."""
        if self.template is not None:
            return [self.template]
        return [r.template for r in self.roles]

    def gpus_charged_at(self, main_replicas: int) -> float:
        """GPUs the job is charged with its main role at ``main_replicas`` pods: whole GPUs, shares of GPUs
        and MIG slices' shares, every role."""
        if self.template is not None:
            return main_replicas * self.template.resources.gpus_charged
        main = self.main_role()
        return main_replicas * main.template.resources.gpus_charged + sum(
            r.gpus for r in self.pod_roles() if r.name != main.name)

    @property
    def main_template(self) -> PodTemplate:
        """The pod template of the main role (``template`` for a one-role job)."""
        return self.template if self.template is not None else self.main_role().template

    @property
    def resources(self) -> ResourceRequest:
        """The resources of one pod of the main role: the job's GPU type and kind of GPU are these."""
        return self.main_template.resources

    @property
    def pods(self) -> int:
        """Pods of the whole job at full size, every role."""
        return self.replicas if not self.roles else sum(r.replicas for r in self.roles)

    @property
    def total_gpus(self) -> int:
        """Whole GPUs of the whole job at full size, every role."""
        if self.template is not None:
            return self.replicas * self.template.resources.gpus
        return sum(r.replicas * r.template.resources.gpus for r in self.roles)

    def gpus_for(self, main_replicas: int) -> int:
        """Whole GPUs of the job with its main role at ``main_replicas`` pods (an elastic job's current size)."""
        if self.template is not None:
            return main_replicas * self.template.resources.gpus
        main = self.main_role()
        return main_replicas * main.template.resources.gpus + sum(
            r.replicas * r.template.resources.gpus for r in self.pod_roles() if r.name != main.name)
