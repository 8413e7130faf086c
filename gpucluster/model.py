"""The cluster definition (`cluster:` in group_vars/all), as typed Pydantic models.

Every field documents what it means and what changing it on a running cluster requires
(`x-update` in the JSON Schema), in the spirit of AWS ParallelCluster's update policies.

No `from __future__ import annotations` here: pydantic would otherwise parse and evaluate
every annotation string when the classes are built, at the start of every command.
"""

import re
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, ConfigDict, Field, field_validator

from gpucluster.modelbase import NAME_RE, SLURM_TIME_RE, NameList, Owner, Strict, Update, spec
from gpucluster.slurm.releases import RELEASES, Release, SlurmVersion, known_text, release
from gpucluster.storage import SharedFilesystem, absolute_path

__all__ = ["NAME_RE", "SLURM_TIME_RE", "Owner", "Strict", "Update", "spec"]

KUBERNETES_SECTION = "Kubernetes layer (GPU Operator, DRA, Kueue, KAI, Slurm on Kubernetes); omit for none."
CLOUD_SECTION = (
    "Cloud (AWS, GCP, Azure, Nebius) where the Pulumi stacks create managed Kubernetes and GPU pools; "
    "omit for on-premises clusters."
)


class GpuSpec(Strict):
    model: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9_-]*$")] = spec(
        "GPU type as Slurm names it in Gres (gpu:<model>:<count>), e.g. h100, gb200.", Update.RESTART
    )
    count: Annotated[int, Field(ge=1, le=64)] = spec("GPUs per node.", Update.RESTART)
    devices: str | None = spec(
        "GPU device files as a Slurm hostlist: /dev/nvidia0 to /dev/nvidia<count-1>, e.g. "
        "/dev/nvidia[0-7] (Slurm's `[0-7]`, not Ansible's `[0:7]`). Required unless autodetect is on.",
        Update.RESTART,
        default=None,
    )
    autodetect: Literal["off", "nvml", "nvidia"] = spec(
        "`nvml` lets slurmd discover GPUs (and their CPU affinity) through NVML instead of File= "
        "lines; `nvidia` (Slurm >= 24.11) does the same from the driver's files, without the NVML "
        "library.",
        Update.RESTART,
        default="off",
    )
    affinity: (
        Literal["socket", "none"] | list[Annotated[str, Field(pattern=r"^\d+(-\d+)?(,\d+(-\d+)?)*$")]] | None
    ) = spec(
        "GPU-to-core affinity written as gres.conf Cores= (jobs get cores near their GPUs). `socket`: "
        "the GPUs, in device order, split evenly over the sockets (the usual layout: /dev/nvidia0-3 on "
        "socket 0 of an 8-GPU, 2-socket node), each with all cores of its socket; a list: the cores "
        'of each GPU in device order, as Slurm core ranges (e.g. "0-13", logical core numbers as '
        "`lstopo -l` shows them); `none`: no affinity. Default: `socket` with device files; with "
        "autodetect, what slurmd detects.",
        Update.RESTART,
        default=None,
    )
    memory_gb: Annotated[int, Field(ge=1)] | None = spec(
        "Memory per GPU in GB (used for cloud pool checks and Kubernetes device selectors).",
        Update.RENDER_ONLY,
        default=None,
    )


def _unique(values: list[Any]) -> list[Any]:
    twice = sorted({str(v) for v in values if values.count(v) > 1})
    if twice:
        raise ValueError(f"listed more than once: {', '.join(twice)}")
    return values


class NodeHealth(Strict):
    """What gpucluster-healthcheck checks on the nodes of one node type (with cluster.slurm.health)."""

    gpu_count: bool = spec(
        "Drain a node with fewer GPUs than gpus.count (`nvidia-smi -L` when installed, else the "
        "declared device files). Also the Prolog's check, so no job starts on a node that lost a GPU.",
        Update.RENDER_ONLY,
        default=True,
    )
    xid: bool = spec(
        "Drain a node whose kernel log (/dev/kmsg, when readable) shows a fatal XID error "
        "(cluster.slurm.health.xid_fatal) since the last run; it stays drained until the node "
        "reboots or `gpucluster-healthcheck --clear-xid` after a GPU reset.",
        Update.RENDER_ONLY,
        default=True,
    )
    dcgm: bool = spec(
        "Drain a node where `dcgmi diag -r 1` fails (only where DCGM is installed).",
        Update.RENDER_ONLY,
        default=True,
    )
    ecc: bool = spec(
        "Drain a node with uncorrected volatile ECC errors, pages pending retirement, or row "
        "remapping pending or failed (nvidia-smi, when installed).",
        Update.RENDER_ONLY,
        default=True,
    )
    infiniband: list[Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]+:[1-9][0-9]*$")]] = spec(
        "InfiniBand ports (`<device>:<port>`, e.g. mlx5_0:1) that must be Active "
        "(/sys/class/infiniband); empty: no InfiniBand check.",
        Update.RENDER_ONLY,
        default_factory=list,
    )
    mounts: list[Annotated[str, Field(pattern=r"^/\S*$")]] = spec(
        "Mount points that must be mounted (e.g. /home, /scratch); empty: no mount check.",
        Update.RENDER_ONLY,
        default_factory=list,
    )

    @field_validator("infiniband", "mounts")
    @classmethod
    def _once(cls, values: list[str]) -> list[str]:
        return _unique(values)


class NodeType(Strict):
    sockets: Annotated[int, Field(ge=1)] = spec("CPU sockets per node.", Update.RESTART)
    cores_per_socket: Annotated[int, Field(ge=1)] = spec("Physical cores per socket.", Update.RESTART)
    threads_per_core: Annotated[int, Field(ge=1, le=8)] = spec(
        "Hardware threads per core.", Update.RESTART, default=1
    )
    memory_mb: Annotated[int, Field(ge=1)] = spec(
        "Memory Slurm may schedule (RealMemory), MiB.", Update.RESTART
    )
    gpus: GpuSpec | None = spec(
        "GPUs of this node type; omit for CPU-only nodes.", Update.RESTART, default=None
    )
    features: list[Annotated[str, Field(pattern=NAME_RE)]] = spec(
        "Slurm node features (constraints) and Kubernetes node labels.",
        Update.RECONFIGURE,
        default_factory=list,
    )
    weight: Annotated[int, Field(ge=1)] | None = spec(
        "Slurm scheduling weight; lower is preferred.", Update.RECONFIGURE, default=None
    )
    instance_type: str | None = spec(
        "Cloud instance/machine/VM size for this node type (used by the Pulumi stacks).",
        Update.REBUILD,
        default=None,
    )
    health: NodeHealth = spec(
        "Health checks of this node type, run when cluster.slurm.health is set.",
        Update.RENDER_ONLY,
        default_factory=NodeHealth,
    )

    @property
    def cpus(self) -> int:
        return self.sockets * self.cores_per_socket * self.threads_per_core


class NodeGroup(Strict):
    group: str = spec("Inventory group (or host) whose hosts are of this node type.", Update.NODE_LIST)
    type: str = spec("Key of `node_types`.", Update.RESTART)
    owner: Owner | None = spec(
        "The one scheduler that owns these hosts: `slurm` (bare-metal slurmd), `kubernetes` (kubelet; "
        "pods admitted by Kueue/KAI) or `slurm-on-kubernetes` (kubelet, only Slinky/Soperator slurmd pods). "
        "Default `slurm` when the inventory has no `kubernetes:` section; required when it has one.",
        Update.MOVE,
        default=None,
    )


class Fabric(Strict):
    tree: dict[str, list[str]] = spec(
        "Switch -> children. Children are switches, or inventory hosts/groups for leaf switches.",
        Update.RECONFIGURE,
        default_factory=dict,
    )
    blocks: dict[str, list[str]] = spec(
        "NVLink domain (block) -> inventory hosts/groups. Needs Slurm >= 23.11 (topology/block).",
        Update.RECONFIGURE,
        default_factory=dict,
    )
    block_sizes: list[Annotated[int, Field(ge=1)]] = spec(
        "Slurm BlockSizes: the base block size and larger aggregates (each a power-of-two multiple). "
        "Default: the smallest block.",
        Update.RECONFIGURE,
        default_factory=list,
    )
    default: Literal["auto", "tree", "block"] = spec(
        "Which topology Slurm uses by default when both a tree and blocks exist (auto: block if present).",
        Update.RESTART,
        default="auto",
    )
    separate_trees: bool = spec(
        "The switch tree has several roots on purpose (islands no switch joins): each Slurm job "
        "then stays under one of them, and slurmctld warns `no switch can reach all nodes`. Off, "
        "a tree whose roots do not each reach every Slurm node is refused, naming the nodes left "
        "out; on, it is a warning.",
        Update.RENDER_ONLY,
        default=False,
    )


class Partition(Strict):
    name: Annotated[str, Field(pattern=NAME_RE)] = spec("Partition name.", Update.RECONFIGURE)
    nodes: list[str] = spec(
        "Inventory hosts/groups in this partition (hosts new to Slurm are a node-list change: see cluster.nodes).",
        Update.RECONFIGURE,
        min_length=1,
    )
    default: bool = spec("Default partition for jobs that name none.", Update.RECONFIGURE, default=False)
    max_time: str = spec(
        "MaxTime in Slurm time format (e.g. 7-00:00:00, UNLIMITED).", Update.RECONFIGURE, default="UNLIMITED"
    )
    default_time: str | None = spec("DefaultTime when a job gives none.", Update.RECONFIGURE, default=None)
    tenants: list[str] = spec(
        "Tenants (Slurm accounts) allowed to use the partition; empty means all.",
        Update.RECONFIGURE,
        default_factory=list,
    )
    exclusive: bool = spec(
        "Whole nodes per job (OverSubscribe=EXCLUSIVE).", Update.RECONFIGURE, default=False
    )
    priority_tier: Annotated[int, Field(ge=0, le=65533)] | None = spec(
        "PriorityTier of the partition.", Update.RECONFIGURE, default=None
    )
    cpus_per_gpu: Annotated[int, Field(ge=1)] | None = spec(
        "DefCpuPerGPU: CPUs a job gets per GPU when it asks for none. Default: the smallest share of "
        "the partition's GPU node types (CPUs / GPUs per node); none where a node has fewer CPUs "
        "than GPUs.",
        Update.RECONFIGURE,
        default=None,
    )
    memory_per_gpu_mb: Annotated[int, Field(ge=1)] | None = spec(
        "DefMemPerGPU in MiB: memory a job gets per GPU when it asks for none (without it, a "
        "one-GPU job takes the whole node's memory). Default: the smallest share of the partition's "
        "GPU node types (memory_mb / GPUs per node).",
        Update.RECONFIGURE,
        default=None,
    )

    @field_validator("max_time", "default_time")
    @classmethod
    def _slurm_time(cls, value: str | None) -> str | None:
        if value is not None and not SLURM_TIME_RE.match(value):
            raise ValueError(f"{value!r} is not a Slurm time (minutes, [D-]HH:MM:SS or UNLIMITED)")
        return value


class Qos(Strict):
    name: Annotated[str, Field(pattern=NAME_RE)] = spec("QOS name.", Update.ACCOUNTS)
    priority: Annotated[int, Field(ge=0)] = spec("QOS priority factor.", Update.ACCOUNTS, default=0)
    max_gpus_per_user: Annotated[int, Field(ge=0)] | None = spec(
        "MaxTRESPerUser=gres/gpu=N.", Update.ACCOUNTS, default=None
    )
    max_gpus_per_job: Annotated[int, Field(ge=0)] | None = spec(
        "MaxTRESPerJob=gres/gpu=N.", Update.ACCOUNTS, default=None
    )
    grp_gpus: Annotated[int, Field(ge=0)] | None = spec(
        "GrpTRES=gres/gpu=N over all jobs using the QOS.", Update.ACCOUNTS, default=None
    )
    max_wall: str | None = spec("MaxWall of jobs in the QOS.", Update.ACCOUNTS, default=None)
    preempt: list[str] = spec("QOS this one may preempt.", Update.ACCOUNTS, default_factory=list)

    @field_validator("max_wall")
    @classmethod
    def _slurm_time(cls, value: str | None) -> str | None:
        if value is not None and not SLURM_TIME_RE.match(value):
            raise ValueError(f"{value!r} is not a Slurm time")
        return value


class GpuQuota(Strict):
    quota: Annotated[int, Field(ge=0)] = spec(
        "GPUs guaranteed to the tenant: Slurm Fairshare= (its shares), Kueue nominalQuota, KAI quota.",
        Update.ACCOUNTS,
        default=0,
    )
    limit: Annotated[int, Field(ge=0)] | None = spec(
        "Most GPUs the tenant may hold at once, borrowing included: Slurm GrpTRES=gres/gpu=N, Kueue "
        "nominalQuota + borrowingLimit, KAI limit. Default: quota.",
        Update.ACCOUNTS,
        default=None,
    )

    @property
    def effective_limit(self) -> int:
        return self.quota if self.limit is None else self.limit


class Tenant(Strict):
    name: Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]*$")] = spec(
        "Tenant name: Slurm account, Kueue ClusterQueue, KAI queue and namespace (lowercase DNS label).",
        Update.ACCOUNTS,
    )
    parent: str | None = spec(
        "Parent tenant (Slurm parent account, Kueue cohort).", Update.ACCOUNTS, default=None
    )
    fairshare: Annotated[int, Field(ge=1)] = spec(
        "Weight of the tenant in sharing what lies beyond the quotas: Kueue fairSharing weight, KAI "
        "overQuotaWeight; Slurm Fairshare= only where bare-metal Slurm has no GPUs (with GPUs a "
        "tenant's Slurm shares are its Slurm quota, 1 without one).",
        Update.ACCOUNTS,
    )
    gpu_quota: Annotated[int, Field(ge=0)] | None = spec(
        "GPUs guaranteed to the tenant by the fleet's only GPU scheduler (shorthand for `gpus.<owner>.quota`; "
        "use `gpus` when GPUs have several owners).",
        Update.ACCOUNTS,
        default=None,
    )
    gpu_limit: Annotated[int, Field(ge=0)] | None = spec(
        "Most GPUs the tenant may hold at once, borrowing included (Slurm GrpTRES=gres/gpu=N), in the fleet's "
        "only GPU scheduler (shorthand for `gpus.<owner>.limit`). Default: gpu_quota.",
        Update.ACCOUNTS,
        default=None,
    )
    gpus: dict[Owner, GpuQuota] = spec(
        "GPU quota and limit per scheduler: `slurm` becomes Slurm account limits, `kubernetes` Kueue "
        "ClusterQueue and KAI queue quotas, `slurm-on-kubernetes` the limits of Slurm in Kubernetes. "
        "Each scheduler receives only its own numbers.",
        Update.ACCOUNTS,
        default_factory=dict,
    )
    users: list[Annotated[str, Field(pattern=r"^[a-z_][a-z0-9_.-]*$")]] = spec(
        "Users of the tenant (Slurm users of the account).", Update.ACCOUNTS, default_factory=list
    )
    qos: list[str] = spec("QOS the tenant may use (from `qos`).", Update.ACCOUNTS, default_factory=list)
    default_qos: str | None = spec("Default QOS of the tenant's users.", Update.ACCOUNTS, default=None)
    namespace: str | None = spec(
        "Kubernetes namespace; default: the tenant name.", Update.KUBERNETES, default=None
    )


class Accounting(Strict):
    host: str = spec("Inventory host running slurmdbd and its MariaDB.", Update.RESTART)
    port: Annotated[int, Field(ge=1, le=65535)] = spec("slurmdbd port.", Update.RESTART, default=6819)
    enforce: list[Literal["associations", "limits", "qos", "safe", "nojobs", "nosteps"]] = spec(
        "AccountingStorageEnforce.",
        Update.RECONFIGURE,
        default_factory=lambda: ["associations", "limits", "qos"],
    )


class Priority(Strict):
    fairshare: Annotated[int, Field(ge=0)] = spec(
        "PriorityWeightFairshare.", Update.RECONFIGURE, default=100000
    )
    qos: Annotated[int, Field(ge=0)] = spec("PriorityWeightQOS.", Update.RECONFIGURE, default=10000)
    age: Annotated[int, Field(ge=0)] = spec("PriorityWeightAge.", Update.RECONFIGURE, default=1000)
    job_size: Annotated[int, Field(ge=0)] = spec("PriorityWeightJobSize.", Update.RECONFIGURE, default=0)
    partition: Annotated[int, Field(ge=0)] = spec("PriorityWeightPartition.", Update.RECONFIGURE, default=0)
    decay_half_life: str = spec("PriorityDecayHalfLife.", Update.RECONFIGURE, default="7-0")
    calc_period: Annotated[int, Field(ge=1)] = spec(
        "PriorityCalcPeriod in minutes.", Update.RECONFIGURE, default=5
    )


class Cgroup(Strict):
    plugin: Literal["autodetect", "cgroup/v1", "cgroup/v2"] = spec(
        "CgroupPlugin. autodetect picks v2 on a unified (v2-only) hierarchy and v1 on a legacy one; "
        "Slurm refuses a hybrid hierarchy (v1 controllers plus a v2 mount) unless v1 is named here "
        "(deprecated from Slurm 25.05, still present in 26.05).",
        Update.RESTART,
        default="autodetect",
    )
    mountpoint: Annotated[str, Field(pattern=r"^/\S+$")] | None = spec(
        "CgroupMountpoint: where the cgroup hierarchy (v1: one directory per controller) is "
        "mounted. Default /sys/fs/cgroup.",
        Update.RESTART,
        default=None,
    )
    constrain_cores: bool = spec("ConstrainCores.", Update.RESTART, default=True)
    constrain_devices: bool = spec("ConstrainDevices (GPU isolation).", Update.RESTART, default=True)
    constrain_ram_space: bool = spec("ConstrainRAMSpace.", Update.RESTART, default=True)


class NodeSsh(Strict):
    """sshd on the compute nodes, open to a user only while a job of theirs runs there."""

    admins: list[Annotated[str, Field(pattern=r"^[a-z_][a-z0-9_.-]*$")]] = spec(
        "Users who may ssh to any compute node without a job (root always may). With cluster.users "
        "declared, each must be one of them.",
        Update.RENDER_ONLY,
        default_factory=list,
    )

    @field_validator("admins")
    @classmethod
    def _admins_unique(cls, value: list[str]) -> list[str]:
        return _unique(value)


# XID codes that peers (DeepOps, Cluster Toolkit, Soperator) treat as fatal: the GPU needs a reset
# or a replacement.
DEFAULT_FATAL_XIDS = [46, 48, 62, 63, 64, 79, 110, 119, 120, 136, 140, 143, 155, 156, 158]


class HealthSettings(Strict):
    """gpucluster-healthcheck as Slurm's HealthCheckProgram (and Prolog) on every Slurm node."""

    interval: Annotated[int, Field(ge=1, le=65535)] = spec(
        "HealthCheckInterval in seconds. A run takes at most the timeout less a margin; "
        "a run that finds the previous one still going does nothing.",
        Update.RECONFIGURE,
        default=300,
    )
    timeout: Annotated[int, Field(ge=3, le=3600)] | None = spec(
        "Seconds Slurm lets a run take before killing it: HealthCheckTimeout, which only Slurm >= "
        "26.05 has, and which must be below the interval there. Default: 60 (Slurm's), or one "
        "second less than a shorter interval. Older releases kill the program at 60 s: leave it "
        "unset there. A run gives itself a third of it, at most 10 s, less.",
        Update.RECONFIGURE,
        default=None,
    )

    def effective_timeout(self, kill_after: int, configurable: bool) -> int:
        """The seconds Slurm allows a run: `kill_after` where the release fixes it."""
        if not configurable:
            return kill_after
        return self.timeout if self.timeout is not None else min(kill_after, self.interval - 1)

    @staticmethod
    def budget(timeout: int) -> int:
        """What a run allows itself: the timeout less a margin for slurmd to see it end."""
        return timeout - min(10, timeout // 3)

    node_state: list[
        Literal["ALLOC", "ANY", "CYCLE", "IDLE", "MIXED", "NONDRAINED_IDLE", "START_ONLY", "REBOOT_ONLY"]
    ] = spec(
        "HealthCheckNodeState: nodes in which states are checked; CYCLE spreads the runs over the "
        "interval. Each value must be one the target release knows (NONDRAINED_IDLE from 23.02, "
        "START_ONLY from 25.11, REBOOT_ONLY from 26.05). Must include ANY or IDLE (or be CYCLE "
        "alone), since a node the check drained is idle and is resumed only by a later run.",
        Update.RECONFIGURE,
        default_factory=lambda: ["ANY"],
        min_length=1,
    )
    heavy_node_state: list[Literal["ALLOC", "ANY", "IDLE", "MIXED", "NONDRAINED_IDLE"]] = spec(
        "Node states in which the heavy checks run (dcgm: `dcgmi diag -r 1` stresses the GPUs); "
        "the light ones run whenever HealthCheckNodeState does. HealthCheckNodeState values, each "
        "one the target release knows. Default IDLE: a diagnostic never runs beside a job.",
        Update.RENDER_ONLY,
        default_factory=lambda: ["IDLE"],
        min_length=1,
    )
    prolog: bool = spec(
        "Also run the fast fatal check (GPU count) as the Prolog: a failing node is drained and the "
        "job requeued instead of started.",
        Update.RECONFIGURE,
        default=True,
    )
    xid_fatal: list[Annotated[int, Field(ge=1)]] = spec(
        "XID codes that drain a node when they appear in its kernel log.",
        Update.RENDER_ONLY,
        default_factory=lambda: list(DEFAULT_FATAL_XIDS),
    )

    @field_validator("node_state")
    @classmethod
    def _states(cls, values: list[str]) -> list[str]:
        _unique(values)
        states = set(values) - {"CYCLE"}
        if states and not states & {"ANY", "IDLE"}:
            raise ValueError(
                "include ANY or IDLE: a node the health check drained is idle, and only a run on it "
                "can resume it"
            )
        return values

    @field_validator("xid_fatal")
    @classmethod
    def _once(cls, values: list[int]) -> list[int]:
        return _unique(values)

    @field_validator("heavy_node_state")
    @classmethod
    def _heavy_once(cls, values: list[str]) -> list[str]:
        return _unique(values)


class RestApi(Strict):
    """slurmrestd, Slurm's REST API, accepting only JWT tokens (`scontrol token`)."""

    host: str = spec(
        "Inventory host running slurmrestd (role slurm_restd): a controller or a login host, which "
        "hold the Slurm configuration and reach slurmctld (a compute node would serve the API with "
        "the CPUs of jobs). slurmrestd listens on every IPv4 address of this host; clients use "
        "`http://<host>:<port>/slurm/<version>/...`, the version of the release's API "
        "(v0.0.38 on 22.05, v0.0.42 on 24.11, v0.0.44 on 25.11 and 26.05; `gpucluster show`).",
        Update.SERVICE,
    )
    port: Annotated[int, Field(ge=1024, le=65535)] = spec(
        "TCP port of slurmrestd: 1024-65535, since it runs as an unprivileged user, and not a port "
        "another Slurm daemon uses on that host.",
        Update.SERVICE,
        default=6820,
    )


# One controller keeps its state on its own disk; Debian's packages use this path.
DEFAULT_STATE_SAVE_LOCATION = "/var/lib/slurm/slurmctld"


def _slurm_version(value: object) -> object:
    """A YAML number (`version: 25.11`) would lose its trailing zero (26.10 reads as 26.1): say so."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return value
    text = f"{value:.2f}" if isinstance(value, float) else str(value)
    raise ValueError(f'YAML read {value!r} as a number, not a Slurm release; quote it: version: "{text}"')


class SlurmPackageRepository(Strict):
    """An apt repository of the site's (a mirror of Debian's suite, or the site's own build)."""

    url: Annotated[str, Field(pattern=r"^(https?|file)://\S+$")] = spec(
        "Repository URL (http, https or file).", Update.RESTART
    )
    suite: Annotated[str, Field(pattern=r"^\S+$")] = spec(
        "Suite (distribution) of the repository, e.g. forky or slurm-26.05.", Update.RESTART
    )
    components: list[Annotated[str, Field(pattern=r"^[A-Za-z0-9._-]+$")]] = spec(
        "Components.", Update.RESTART, default_factory=lambda: ["main"]
    )
    key: Annotated[str, Field(pattern=r"^\S+$")] = spec(
        "The repository's OpenPGP signing key (ASCII-armored), a file on the Ansible controller: "
        "absolute, or relative to the inventory directory. Installed as the only key the "
        "repository is trusted with (apt `Signed-By`).",
        Update.RESTART,
    )


class SlurmPackages(Strict):
    """Where the hosts get Slurm, pinned to the target release."""

    repository: SlurmPackageRepository | None = spec(
        "The site's apt repository carrying the target release. Omit to use the apt sources the "
        "hosts already have: Debian's own suite of the release (bookworm for 22.05, trixie for "
        "24.11, forky for 26.05). Either way the Slurm packages are pinned to the release, and "
        "a host whose sources offer another release is refused before anything is installed.",
        Update.RESTART,
        default=None,
    )


class SlurmSettings(Strict):
    version: Annotated[str, BeforeValidator(_slurm_version)] = spec(
        "Target Slurm release, YY.MM (or YY.MM.P where a maintenance release matters, e.g. "
        "25.05.2): one gpucluster knows (`gpucluster show` lists them and says which are proven "
        "by real daemons). It decides the keys, plugins, files and procedures rendered, and the "
        "packages installed. Changing it is an upgrade (`gpucluster plan` gives the steps).",
        Update.REBUILD,
    )
    packages: SlurmPackages = spec(
        "Package source of Slurm on the hosts.", Update.RESTART, default_factory=SlurmPackages
    )
    controller: NameList = spec(
        "Inventory host(s) running slurmctld; the second and later are backups.", Update.RESTART, min_length=1
    )
    login: NameList = spec(
        "Inventory hosts that are login (submit) hosts: the Slurm client commands, munge with the "
        "cluster key, the Slurm configuration and sshd (role slurm_login); no slurmd, in no "
        "partition. May include a controller; never a node of cluster.nodes.",
        Update.RENDER_ONLY,
        default_factory=list,
    )
    configless: bool = spec(
        "Configless Slurm (SlurmctldParameters=enable_configless): the Slurm files live on the "
        "controllers; every slurmd starts with `--conf-server` naming the controllers in order and "
        "fetches them from slurmctld (again on `scontrol reconfigure`). Nodes keep only what "
        "slurmctld does not serve (healthcheck.conf, the health check program). Login hosts keep "
        "their copies: Slurm 22.05 has no sackd, and its commands find a configuration without a "
        "local slurmd only in a file or through DNS SRV records. Off by default, so that no "
        "existing cluster switches by itself: changing it restarts slurmctld, then every slurmd.",
        Update.RESTART,
        default=False,
    )
    state_save_location: Annotated[str, Field(pattern=r"^/\S+$")] | None = spec(
        "StateSaveLocation: where slurmctld keeps jobs and nodes across restarts. Required with a backup "
        "controller: a path every controller mounts read/write from one shared filesystem (the backup "
        "takes over from the state the primary left there). Default /var/lib/slurm/slurmctld.",
        Update.RESTART,
        default=None,
    )
    accounting: Accounting | None = spec("slurmdbd accounting; omit for none.", Update.RESTART, default=None)
    rest_api: RestApi | None = spec(
        "slurmrestd with JWT authentication: AuthAltTypes=auth/jwt in slurm.conf and slurmdbd.conf, "
        "with a key made once in StateSaveLocation (jwt_hs256.key, owner slurm, mode 0600); users "
        "get tokens with `scontrol token`. Turning it on or off restarts slurmctld and slurmdbd. "
        "Omit for none.",
        Update.RESTART,
        default=None,
    )
    priority: Priority = spec(
        "priority/multifactor weights (used when accounting is configured).",
        Update.RECONFIGURE,
        default_factory=Priority,
    )
    mpi_default: Literal["none", "pmi2", "pmix", "cray_shasta"] = spec(
        "MpiDefault: the MPI plugin srun uses when a job names none (`srun --mpi=...` chooses per "
        "step). pmix only where the release's packages carry mpi/pmix (Debian's 22.05 and 24.11 "
        "do; 26.05's do not: there srun offers pmi2 and cray_shasta).",
        Update.RECONFIGURE,
        default="none",
    )
    proctrack: Literal["cgroup", "linuxproc"] = spec(
        "ProctrackType plugin (linuxproc only where cgroups are unavailable, e.g. containers).",
        Update.RESTART,
        default="cgroup",
    )
    task_plugins: list[Literal["cgroup", "affinity", "none"]] = spec(
        "TaskPlugin list.", Update.RESTART, default_factory=lambda: ["cgroup", "affinity"]
    )
    config_overrides: bool = spec(
        "SlurmdParameters=config_overrides: trust slurm.conf over detected hardware (labs, emulation).",
        Update.RESTART,
        default=False,
    )
    return_to_service: Literal[0, 1, 2] = spec("ReturnToService.", Update.RECONFIGURE, default=2)
    mail_prog: str = spec(
        "MailProg. slurmctld logs an error at start-up if it does not exist; the default sends no mail "
        "(set /usr/bin/mail where a mailer is installed).",
        Update.RECONFIGURE,
        default="/usr/bin/true",
        pattern=r"^/\S+$",
    )
    cgroup: Cgroup = spec("cgroup.conf settings.", Update.RESTART, default_factory=Cgroup)
    health: HealthSettings | None = spec(
        "GPU health checks: gpucluster-healthcheck as HealthCheckProgram (and Prolog) on every "
        "node, with the checks of each node type's `health`. A failing node is drained with a reason "
        "starting `[health]` and resumed when healthy again; nodes drained for other reasons are "
        "left alone. Omit for none.",
        Update.RECONFIGURE,
        default=None,
    )
    node_ssh: NodeSsh | None = spec(
        "sshd on every compute node behind pam_slurm_adopt (role slurm_node_ssh): a user gets in only "
        "while holding a job on that node, and the session joins the job (its cgroup, its end); "
        "admins always get in. Adds PrologFlags=Contain, so slurmd and slurmctld restart when it is "
        "turned on or off. Needs proctrack cgroup. Omit to leave the nodes' sshd as it is.",
        Update.RESTART,
        default=None,
    )
    extra: dict[Annotated[str, Field(pattern=r"^[A-Za-z][A-Za-z0-9]*$")], str | int] = spec(
        "Further slurm.conf keys, written verbatim after the generated ones.",
        Update.RECONFIGURE,
        default_factory=dict,
    )

    @property
    def state_dir(self) -> str:
        return self.state_save_location or DEFAULT_STATE_SAVE_LOCATION

    @field_validator("version")
    @classmethod
    def _known_release(cls, value: str) -> str:
        parsed = SlurmVersion.parse(value)
        if parsed.release not in RELEASES:
            raise ValueError(f"Slurm {parsed.release} is not a release gpucluster knows ({known_text()})")
        return value

    @property
    def target(self) -> SlurmVersion:
        return SlurmVersion.parse(self.version)

    @property
    def release(self) -> Release:
        return release(self.version)


UNIX_NAME_RE = r"^[a-z_][a-z0-9_.-]*$"
# An OpenSSH authorized_keys line: optional options, a key type, the base64 key, an optional comment.
SSH_KEY_RE = re.compile(
    r"([^\n]* )?(ssh-[a-z0-9-]+|ecdsa-sha2-[a-z0-9-]+|sk-[a-z0-9@.-]+) AAAA[A-Za-z0-9+/]+={0,3}( [^\n]*)?"
)
UNIX_ID_RANGES = ((1000, 59999), (65536, 524287))
UNIX_ID_RANGES_TEXT = " or ".join(f"{low}-{high}" for low, high in UNIX_ID_RANGES)


def unix_id_spec(kind: str, renumbered: str) -> Any:
    """The uid/gid field: one id on every host, in the ranges people's accounts may use."""
    return spec(
        f"Numeric {kind} id, the same on every host: in {UNIX_ID_RANGES_TEXT} (Debian's range for "
        "people's accounts, or above 16 bits and below systemd's container range). Changing it "
        f"renumbers {renumbered}.",
        Update.UNIX_ACCOUNTS,
    )


class UnixGroup(Strict):
    """A Unix group with one gid on every host."""

    name: Annotated[str, Field(pattern=UNIX_NAME_RE, max_length=32)] = spec(
        "Group name.", Update.UNIX_ACCOUNTS
    )
    gid: int = unix_id_spec(
        "group", "the group where the users role created it (groupmod: existing files keep the old gid)"
    )


class UnixUser(Strict):
    """A Unix user with one uid, primary group and supplementary groups on every host."""

    name: Annotated[str, Field(pattern=UNIX_NAME_RE, max_length=32)] = spec(
        "User name (the Slurm user of the tenants that list it).", Update.UNIX_ACCOUNTS
    )
    uid: int = unix_id_spec(
        "user",
        "the user where the users role created it (usermod: the home follows, files elsewhere keep the old uid)",
    )
    group: Annotated[str, Field(pattern=UNIX_NAME_RE)] | None = spec(
        "Primary group, from `groups` (or another user's private group). Default: a private group "
        "of the user's name whose gid is the uid (Debian's convention).",
        Update.UNIX_ACCOUNTS,
        default=None,
    )
    groups: list[Annotated[str, Field(pattern=UNIX_NAME_RE)]] = spec(
        "Supplementary groups, from `groups` (or users' private groups).",
        Update.UNIX_ACCOUNTS,
        default_factory=list,
    )
    shell: Annotated[str, Field(pattern=r"^/\S+$")] = spec(
        "Login shell.", Update.UNIX_ACCOUNTS, default="/bin/bash"
    )
    ssh_authorized_keys: list[str] = spec(
        "OpenSSH public keys (authorized_keys lines, e.g. `ssh-ed25519 AAAA... alice@laptop`); "
        "the user's ~/.ssh/authorized_keys holds exactly these.",
        Update.UNIX_ACCOUNTS,
        default_factory=list,
    )
    home: str | None = spec(
        "Home directory. Default: `<mount>/<name>` on the cluster.storage filesystem marked "
        "`home: true`, else /home/<name>. With cluster.storage it must be on one of its filesystems.",
        Update.UNIX_ACCOUNTS,
        default=None,
    )

    @field_validator("home")
    @classmethod
    def _home(cls, value: str | None) -> str | None:
        return None if value is None else absolute_path(value)

    @field_validator("groups")
    @classmethod
    def _once(cls, values: list[str]) -> list[str]:
        return _unique(values)

    @field_validator("ssh_authorized_keys")
    @classmethod
    def _keys(cls, values: list[str]) -> list[str]:
        for key in values:
            if not SSH_KEY_RE.fullmatch(key):
                raise ValueError(
                    f"{key[:40]!r}... is not one OpenSSH public key line "
                    "(`[options] <type> <base64 key> [comment]`, e.g. `ssh-ed25519 AAAA... alice@laptop`)"
                )
        return _unique(values)

    @property
    def primary_group(self) -> str:
        return self.group or self.name


class ClusterSpec(Strict):
    name: Annotated[str, Field(pattern=r"^[a-z][a-z0-9_-]{0,39}$")] = spec(
        "Cluster name (Slurm ClusterName, resource name prefix).", Update.REBUILD
    )
    slurm: SlurmSettings = spec("Slurm settings.", Update.RESTART)
    node_types: dict[Annotated[str, Field(pattern=NAME_RE)], NodeType] = spec(
        "Hardware profiles of nodes.", Update.RESTART, min_length=1
    )
    nodes: list[NodeGroup] = spec("Inventory group -> node type.", Update.NODE_LIST, min_length=1)
    fabric: Fabric = spec(
        "Network topology: switch tree and NVLink blocks.", Update.RECONFIGURE, default_factory=Fabric
    )
    partitions: list[Partition] = spec(
        "Slurm partitions (of bare-metal Slurm and of Slurm on Kubernetes; none when Kubernetes owns every node).",
        Update.RESTART,
        default_factory=list,
    )
    qos: list[Qos] = spec("Slurm QOS definitions.", Update.ACCOUNTS, default_factory=list)
    groups: list[UnixGroup] = spec(
        "Unix groups created on every Slurm host (controllers, accounting host, nodes) with the "
        "same gid everywhere, for `users` to name. A user's private group needs no entry here.",
        Update.UNIX_ACCOUNTS,
        default_factory=list,
    )
    users: list[UnixUser] = spec(
        "Unix users created on every Slurm host with the same uid, groups and SSH keys everywhere "
        "(hosts/users.yaml, applied by the users role). When given, every tenant user must be "
        "listed here; omit where a directory service (LDAP, SSSD) provides the accounts.",
        Update.UNIX_ACCOUNTS,
        default_factory=list,
    )
    tenants: list[Tenant] = spec(
        "Tenants with GPU quotas and fair-share.", Update.ACCOUNTS, default_factory=list
    )
    storage: list[SharedFilesystem] = spec(
        "Shared filesystems (home, scratch, datasets): what backs each, its mount point and the "
        "hosts that mount it (roles nfs_server and shared_storage), and its volume in Slurm on "
        "Kubernetes. Omit where nothing is shared.",
        Update.STORAGE,
        default_factory=list,
    )
    # Sections of the layers built on this model. The core keeps them opaque: gpucluster.layers
    # validates each present section with its layer's own model and puts the result here.
    kubernetes: Any = spec(KUBERNETES_SECTION, Update.KUBERNETES, default=None)
    cloud: Any = spec(CLOUD_SECTION, Update.REBUILD, default=None)


class ClusterFile(Strict):
    """The top level of the group_vars file: only `cluster` is ours; other Ansible variables pass."""

    model_config = ConfigDict(extra="allow", frozen=True)
    cluster: ClusterSpec
