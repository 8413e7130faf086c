"""The cluster definition (`cluster:` in group_vars/all), as typed Pydantic models.

Every field documents what it means and what changing it on a running cluster requires
(`x-update` in the JSON Schema), in the spirit of AWS ParallelCluster's update policies.

No `from __future__ import annotations` here: pydantic would otherwise parse and evaluate
every annotation string when the classes are built, at the start of every command.
"""

import re
from typing import Annotated, Any, Literal, get_args

import hostlist
from pydantic import BeforeValidator, ConfigDict, Field, StrictBool, field_validator, model_validator

from gpucluster.hostlists import compress, expand
from gpucluster.model.base import (
    MEMORY_MB_MAX,
    NAME_RE,
    SLURM_TIME_RE,
    UINT16_MAX,
    UINT32_MAX,
    NameList,
    Owner,
    Strict,
    Update,
    spec,
)
from gpucluster.model.containers import ContainerSettings
from gpucluster.model.gate import BurnIn, GateSettings
from gpucluster.model.nodesoftware import NodeSoftware
from gpucluster.model.pools import SHARED_POOLS_DOC, SharedPool
from gpucluster.model.power import MAX_POWERED, NODE_POWER, NodePower
from gpucluster.model.releases import RELEASES, Release, SlurmVersion, known_text, release
from gpucluster.model.sharing import (
    SHARING_DOC,
    TENANT_UNITS_DOC,
    GpuSharing,
    NodeGres,
    TenantUnits,
    slurm_gres,
)
from gpucluster.model.storage import SharedFilesystem, absolute_path

__all__ = ["NAME_RE", "SLURM_TIME_RE", "Owner", "Strict", "Update", "spec"]

KUBERNETES_SECTION = "Kubernetes layer (GPU Operator, DRA, Kueue, KAI, Slurm on Kubernetes); omit for none."
MONITORING_SECTION = (
    "Monitoring layer: Prometheus and Alertmanager on one host, node-exporter on every host, Slurm's "
    "metrics, DCGM and Grafana dashboards; omit for none."
)
CLOUD_SECTION = (
    "Cloud (AWS, GCP, Azure, Nebius) where the Pulumi stacks create managed Kubernetes and GPU pools; "
    "omit for on-premises clusters."
)

# The Slurm State= a cluster.nodes entry may set (slurm.conf's CLOUD, FUTURE, DRAIN, DOWN, FAIL;
# IDLE, which Slurm's documentation advises against, validates with a warning).
NodeStateName = Literal["cloud", "future", "drain", "down", "fail", "idle"]
NODE_STATES: tuple[str, ...] = get_args(NodeStateName)


# A Gres type name: anything but the separators of Gres= (`gpu:<type>:<count>`, commas) and blanks.
GRES_TYPE_RE = r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$"
# A value of a slurm.conf list key (SchedulerParameters, PrologFlags, ...): no comma, no blank.
FLAG_RE = r"^[^\s,]+$"
# A file name slurm.conf takes (absolute; Prolog/Epilog may also be a glob such as prolog.d/*).
SLURM_PATH_RE = r"^/\S+$"
# A Slurm node or partition option written verbatim (`extra` of node types and partitions).
OPTION_NAME_RE = r"^[A-Za-z][A-Za-z0-9]*$"
OptionValue = str | int
DebugLevel = Literal[
    "quiet", "fatal", "error", "info", "verbose", "debug", "debug2", "debug3", "debug4", "debug5"
]
# PrologFlags values (Slurm reads them in any case; these are the man page's spellings).
PrologFlag = Literal[
    "Alloc", "Contain", "DeferBatch", "ForceRequeueOnFail", "NoHold", "RunInJob", "Serial", "X11"
]


class GpuType(Strict):
    """The GPUs of one type on a node whose GPUs are of several types (gpus.types)."""

    model: Annotated[str, Field(pattern=GRES_TYPE_RE)] = spec(
        "GPU type as Slurm names it in Gres and gres.conf Type= (as gpus.model).", Update.RESTART
    )
    count: Annotated[int, Field(ge=1, le=64)] = spec("GPUs of this type per node.", Update.RESTART)
    devices: str | None = spec(
        "This type's device files as a Slurm hostlist, e.g. /dev/nvidia[0-1,3]; together the types "
        "name /dev/nvidia0 to /dev/nvidia<count-1> once each. Required unless autodetect is on.",
        Update.RESTART,
        default=None,
    )


GPU_TYPES_DOC = (
    "GPUs of several types on one node (Slurm's Gres=gpu:titanx:3,gpu:gtx1080:1), in the order "
    "Slurm lists them; give these instead of model. count and devices may then be left out: they "
    "are the types' total and all their device files. Shards, MPS and MIG share GPUs of one type "
    "only, so they are refused with types."
)


def _gpus_of_types(data: Any) -> Any:
    """gpus.count and gpus.devices of a node of several GPU types, when left out: the types'
    total and their device files together (a list the checks then hold to /dev/nvidia0..N-1).
    Where the types themselves are wrong, their own errors say so: count is then only what keeps
    a second, misleading `count: required` from being reported."""
    if not isinstance(data, dict) or "types" not in data:
        return data
    out = dict(data)
    kinds = [t for t in data["types"] if isinstance(t, dict)] if isinstance(data["types"], list) else []
    if "count" not in out:
        out["count"] = max(sum(n for t in kinds if (n := _whole(t.get("count"))) is not None), 1)
    devices = [t.get("devices") for t in kinds]
    if "devices" not in out and devices and all(isinstance(d, str) for d in devices):
        try:
            names = [name for d in devices if isinstance(d, str) for name in expand(d)]
        except hostlist.BadHostlist:
            return out  # the checks name the type's bad list
        out["devices"] = compress(names)
    return out


def _whole(value: Any) -> int | None:
    """A count as the model reads it (an int, or its digits), else None."""
    if isinstance(value, int):
        return int(value)
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return None


class GpuSpec(Strict):
    @model_validator(mode="before")
    @classmethod
    def _derive_from_types(cls, data: Any) -> Any:
        return _gpus_of_types(data)

    model: Annotated[str, Field(pattern=GRES_TYPE_RE)] | None = spec(
        "GPU type as Slurm names it in Gres (gpu:<model>:<count>) and gres.conf Type=, spelt as the "
        "site spells it (Slurm compares types case-sensitively: `--gres=gpu:h100` finds no `H100`), "
        "e.g. h100, H100, a100_80gb. Omit for untyped GPUs (Gres=gpu:<count>), which jobs ask for "
        "by count only, and for GPUs of several types (types).",
        Update.RESTART,
        default=None,
    )
    count: Annotated[int, Field(ge=1, le=64)] = spec(
        "GPUs per node (with types, their total: it may be left out).", Update.RESTART
    )
    devices: str | None = spec(
        "GPU device files as a Slurm hostlist: /dev/nvidia0 to /dev/nvidia<count-1>, e.g. "
        "/dev/nvidia[0-7] (Slurm's `[0-7]`, not Ansible's `[0:7]`). Required unless autodetect is on "
        "(with types, each type gives its own and this may be left out).",
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
    memory_gb: Annotated[int, Field(ge=1, le=2**20)] | None = spec(
        "Memory per GPU in GB (used for cloud pool checks and Kubernetes device selectors).",
        Update.RENDER_ONLY,
        default=None,
    )
    sharing: GpuSharing | None = spec(SHARING_DOC, Update.RESTART, default=None)
    types: list[GpuType] | None = spec(GPU_TYPES_DOC, Update.RESTART, default=None)

    def kinds(self) -> tuple[tuple[str | None, int], ...]:
        """(type, count) of each kind of GPU on the node, as its Gres= lists them."""
        if self.types:
            return tuple((t.model, t.count) for t in self.types)
        return ((self.model, self.count),)

    def gres(self) -> NodeGres:
        """The node's Gres= entries and the TRES they make."""
        return slurm_gres(self.kinds(), self.sharing)

    @property
    def label(self) -> str:
        """The node's GPUs in a few words: `8 x h100`, `3 x titanx + 1 x gtx1080`."""
        return " + ".join(f"{count} x {model or 'untyped'}" for model, count in self.kinds())


def _unique(values: list[Any]) -> list[Any]:
    twice = sorted({str(v) for v in values if values.count(v) > 1})
    if twice:
        raise ValueError(f"listed more than once: {', '.join(twice)}")
    return values


class NodeHealth(Strict):
    """What gpucluster-healthcheck checks on the nodes of one node type (with cluster.slurm.health)."""

    gpu_count: StrictBool = spec(
        "Drain a node with fewer GPUs than gpus.count (`nvidia-smi -L` when installed, else the "
        "declared device files). Also the Prolog's check, so no job starts on a node that lost a GPU.",
        Update.RENDER_ONLY,
        default=True,
    )
    xid: StrictBool = spec(
        "Drain a node whose kernel log (/dev/kmsg, when readable) shows a fatal XID error "
        "(cluster.slurm.health.xid_fatal) since the last run; it stays drained until the node "
        "reboots or `gpucluster-healthcheck --clear-xid` after a GPU reset.",
        Update.RENDER_ONLY,
        default=True,
    )
    dcgm: StrictBool = spec(
        "Drain a node where `dcgmi diag -r 1` fails (only where DCGM is installed).",
        Update.RENDER_ONLY,
        default=True,
    )
    ecc: StrictBool = spec(
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
    sockets: Annotated[int, Field(ge=1, le=UINT16_MAX)] | None = spec(
        "CPU sockets per node (SocketsPerBoard, one board). With cores_per_socket; or leave both out "
        "and give only `cpus`, as Slurm allows.",
        Update.RESTART,
        default=None,
    )
    cores_per_socket: Annotated[int, Field(ge=1, le=UINT16_MAX)] | None = spec(
        "Physical cores per socket (CoresPerSocket).", Update.RESTART, default=None
    )
    threads_per_core: Annotated[int, Field(ge=1, le=8)] = spec(
        "Hardware threads per core.", Update.RESTART, default=1
    )
    cpus: Annotated[int, Field(ge=1, le=UINT16_MAX)] | None = spec(
        "CPUs= (the CPUs Slurm schedules). Default: sockets x cores_per_socket x threads_per_core. "
        "Alone, without sockets and cores_per_socket, it is all Slurm is told (it then counts each "
        "CPU as a socket of one core).",
        Update.RESTART,
        default=None,
    )
    memory_mb: Annotated[int, Field(ge=1, le=MEMORY_MB_MAX)] | None = spec(
        "Memory Slurm may schedule (RealMemory), MiB. Omit to leave RealMemory unset (Slurm then "
        "counts 1 MiB per node: only jobs that ask for no memory fit, unless memory is not a "
        "consumable resource, SelectTypeParameters without _Memory).",
        Update.RESTART,
        default=None,
    )
    tmp_disk_mb: Annotated[int, Field(ge=0, le=UINT32_MAX)] | None = spec(
        "TmpDisk: MiB of TmpFS (default /tmp) per node.", Update.RESTART, default=None
    )
    mem_spec_limit_mb: Annotated[int, Field(ge=1, le=MEMORY_MB_MAX)] | None = spec(
        "MemSpecLimit: MiB kept from jobs for the system (slurmd, the OS).", Update.RESTART, default=None
    )
    core_spec_count: Annotated[int, Field(ge=1, le=UINT16_MAX)] | None = spec(
        "CoreSpecCount: cores kept from jobs for the system.", Update.RESTART, default=None
    )
    cpu_spec_list: Annotated[str, Field(pattern=r"^\d+(-\d+)?(,\d+(-\d+)?)*$")] | None = spec(
        "CpuSpecList: the abstract CPU ids kept from jobs for the system (e.g. 0,1).",
        Update.RESTART,
        default=None,
    )
    gpus: GpuSpec | None = spec(
        "GPUs of this node type; omit for CPU-only nodes.", Update.RESTART, default=None
    )
    features: list[Annotated[str, Field(pattern=NAME_RE)]] = spec(
        "Slurm node features (constraints) and Kubernetes node labels.",
        Update.RECONFIGURE,
        default_factory=list,
    )
    weight: Annotated[int, Field(ge=1, le=UINT32_MAX)] | None = spec(
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
    burn_in: BurnIn = spec("What the gate's burn-in of this node type compares against (with cluster.gate).", Update.RENDER_ONLY, default_factory=BurnIn)  # fmt: skip
    software: NodeSoftware | None = spec(
        "GPU node software the gpu_driver role installs: the driver (Debian's or NVIDIA's "
        "repository, open or proprietary modules), persistence daemon, fabric manager, IMEX, DCGM, "
        "container toolkit. Omit where the site or the host image provides them.",
        Update.NODE_SOFTWARE,
        default=None,
    )
    extra: dict[Annotated[str, Field(pattern=OPTION_NAME_RE)], OptionValue] = spec(
        "Further options of these NodeName lines (e.g. CpuBind, Port), written verbatim: only "
        "options of the target release's NodeName lines that no other key here sets.",
        Update.RESTART,
        default_factory=dict,
    )

    @model_validator(mode="after")
    def _cpu_layout(self) -> "NodeType":
        if (self.sockets is None) != (self.cores_per_socket is None):
            raise ValueError("give sockets and cores_per_socket together (or neither, and cpus)")
        if self.cpus is None and self.sockets is None:
            raise ValueError("give sockets and cores_per_socket, or cpus")
        return self

    @property
    def layout(self) -> bool:
        """Sockets and cores are known (not only a CPU count)."""
        return self.sockets is not None and self.cores_per_socket is not None

    @property
    def total_cpus(self) -> int:
        """The CPUs Slurm schedules on a node of this type."""
        if self.cpus is not None:
            return self.cpus
        assert self.sockets is not None and self.cores_per_socket is not None
        return self.sockets * self.cores_per_socket * self.threads_per_core

    @property
    def total_cores(self) -> int:
        """Physical cores (gres.conf Cores= numbers them); without a layout, the CPUs."""
        if self.sockets is None or self.cores_per_socket is None:
            return self.total_cpus
        return self.sockets * self.cores_per_socket


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
    memory_mb: Annotated[int, Field(ge=1, le=MEMORY_MB_MAX)] | None = spec(
        "RealMemory of these hosts (MiB) where it differs from their node type's.",
        Update.RESTART,
        default=None,
    )
    features: list[Annotated[str, Field(pattern=NAME_RE)]] | None = spec(
        "Slurm features of these hosts instead of their node type's.", Update.RECONFIGURE, default=None
    )
    weight: Annotated[int, Field(ge=1, le=UINT32_MAX)] | None = spec(
        "Scheduling weight of these hosts instead of their node type's.", Update.RECONFIGURE, default=None
    )
    gpus: GpuSpec | None = spec(
        "GPUs of these hosts instead of their node type's (e.g. hosts with a GPU fewer).",
        Update.RESTART,
        default=None,
    )
    state: NodeStateName | None = spec(
        "Slurm State= of these nodes: `cloud` (powered down until a job needs them: slurmctld "
        "starts them with cluster.slurm.power_save.resume_program), `future` (defined, not yet in "
        "service), `drain`, `down` or `fail` (the state slurmctld gives them from slurm.conf, as a "
        "site's own file may say; day to day, taking nodes out of service is scontrol's), `idle` "
        "(counted idle before their slurmd registers: a site's file may say so, Slurm's documentation "
        "advises against it; validates with a warning). Default: UNKNOWN (slurmd registers them).",
        Update.RESTART,
        default=None,
    )
    power: NodePower | None = spec(NODE_POWER, Update.RECONFIGURE, default=None)

    @property
    def overrides(self) -> dict[str, Any]:
        """The node type settings these hosts replace."""
        given = {
            "memory_mb": self.memory_mb,
            "features": self.features,
            "weight": self.weight,
            "gpus": self.gpus,
        }
        return {key: value for key, value in given.items() if value is not None}


# The names of Slurm's topologies in topology.yaml (25.05+): what a partition's `topology` and
# `fabric.default` name, and what Slurm on Kubernetes places its dynamic nodes by.
TREE_TOPOLOGY = "fabric-tree"  # cluster.fabric.tree
BLOCK_TOPOLOGY = "nvlink-blocks"  # cluster.fabric.blocks, when no block_sets group them
FLAT_TOPOLOGY = "flat"  # no topology: jobs placed without regard to the fabric
RESERVED_TOPOLOGIES = (TREE_TOPOLOGY, BLOCK_TOPOLOGY, FLAT_TOPOLOGY)


class BlockSet(Strict):
    blocks: list[str] = spec(
        "Blocks of cluster.fabric.blocks in this set: one topology/block of Slurm's topology.yaml.",
        Update.RECONFIGURE,
        min_length=1,
    )
    block_sizes: list[Annotated[int, Field(ge=1, le=UINT32_MAX)]] = spec(
        "Its BlockSizes: the base block size and larger aggregates (each a power-of-two multiple of "
        "the one before). Default: its smallest block.",
        Update.RECONFIGURE,
        default_factory=list,
    )


class Fabric(Strict):
    tree: dict[str, list[str]] = spec(
        "Switch -> children. Children are switches, or inventory hosts/groups for leaf switches. "
        f"Slurm's topology `{TREE_TOPOLOGY}`.",
        Update.RECONFIGURE,
        default_factory=dict,
    )
    blocks: dict[str, list[str]] = spec(
        "NVLink domain (block) -> inventory hosts/groups: only the hosts that are in one (a GB200 NVL72 "
        "rack of 18 trays; not HGX or PCIe nodes, nor the Kubernetes hosts outside any). Needs Slurm "
        f">= 24.05 (topology/block with BlockSizes). Slurm's topology `{BLOCK_TOPOLOGY}` (or those of "
        "block_sets).",
        Update.RECONFIGURE,
        default_factory=dict,
    )
    block_sizes: list[Annotated[int, Field(ge=1, le=UINT32_MAX)]] = spec(
        "Slurm BlockSizes of the blocks: the base block size and larger aggregates (each a power-of-two "
        "multiple). Default: the smallest block. With block_sets, each set has its own.",
        Update.RECONFIGURE,
        default_factory=list,
    )
    block_sets: dict[Annotated[str, Field(pattern=NAME_RE)], BlockSet] = spec(
        "Slurm >= 25.05: the blocks grouped into block topologies of their own, each with its own "
        "BlockSizes (NVL72 racks of 18 trays beside NVL36 racks of 9), each named by its key. Every "
        f"block in one set; the key may not be {', '.join(RESERVED_TOPOLOGIES)}.",
        Update.RECONFIGURE,
        default_factory=dict,
    )
    default: Annotated[str, Field(pattern=NAME_RE)] = spec(
        "The topology Slurm places a job by when its partition names none (topology.yaml's "
        "cluster_default; the one topology of topology.conf before 25.05): `auto` (the blocks if "
        "any, else the tree), `tree`, `block` (the blocks, without block_sets), `flat` (none, "
        "25.05+) or a name of block_sets.",
        Update.RESTART,
        default="auto",
    )
    separate_trees: StrictBool = spec(
        "The switch tree has several roots on purpose (islands no switch joins): each Slurm job "
        "then stays under one of them, and slurmctld warns `no switch can reach all nodes`. Off, "
        "a tree whose roots do not each reach every Slurm node is refused, naming the nodes left "
        "out; on, it is a warning.",
        Update.RENDER_ONLY,
        default=False,
    )
    outside_tree: list[str] = spec(
        "Inventory hosts or groups that are Slurm nodes under no leaf switch, on purpose (as a "
        "site's topology.conf may leave some out): Slurm places no job that spans switches on "
        "them. Off the list, a node under no leaf switch is refused; on it, a warning.",
        Update.RECONFIGURE,
        default_factory=list,
    )
    placeholder_nodes: list[Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")]] = spec(
        "Names a leaf switch of `tree` lists that are no Slurm node (a site's topology.conf may name "
        "hosts it has not defined yet, or a switch only to join others): written into "
        "topology.conf as they are; slurmctld logs `Invalid hostnames in switch configuration` "
        "and ignores them. A warning.",
        Update.RECONFIGURE,
        default_factory=list,
    )


class Partition(Strict):
    name: Annotated[str, Field(pattern=NAME_RE)] = spec("Partition name.", Update.RECONFIGURE)
    nodes: list[str] = spec(
        "Inventory hosts/groups in this partition (hosts new to Slurm are a node-list change: see cluster.nodes).",
        Update.RECONFIGURE,
        min_length=1,
    )
    default: StrictBool = spec(
        "Default partition for jobs that name none.", Update.RECONFIGURE, default=False
    )
    max_time: str = spec(
        "MaxTime in Slurm time format (e.g. 7-00:00:00, UNLIMITED).", Update.RECONFIGURE, default="UNLIMITED"
    )
    default_time: str | None = spec("DefaultTime when a job gives none.", Update.RECONFIGURE, default=None)
    tenants: list[str] = spec(
        "Tenants (Slurm accounts) allowed to use the partition; empty means all.",
        Update.RECONFIGURE,
        default_factory=list,
    )
    exclusive: StrictBool = spec(
        "Whole nodes per job (OverSubscribe=EXCLUSIVE).", Update.RECONFIGURE, default=False
    )
    priority_tier: Annotated[int, Field(ge=0, le=65533)] | None = spec(
        "PriorityTier of the partition.", Update.RECONFIGURE, default=None
    )
    cpus_per_gpu: Annotated[int, Field(ge=0, le=UINT16_MAX)] | None = spec(
        "DefCpuPerGPU: CPUs a job gets per GPU when it asks for none. Default: the smallest share of "
        "the partition's GPU node types (CPUs / GPUs per node); none where a node has fewer CPUs "
        "than GPUs. 0: none.",
        Update.RECONFIGURE,
        default=None,
    )
    memory_per_gpu_mb: Annotated[int, Field(ge=0, le=MEMORY_MB_MAX)] | None = spec(
        "DefMemPerGPU in MiB: memory a job gets per GPU when it asks for none (without it, a "
        "one-GPU job takes the whole node's memory). Default: the smallest share of the partition's "
        "GPU node types (memory_mb / GPUs per node), unless the partition sets def_mem_per_cpu_mb or "
        "def_mem_per_node_mb (Slurm takes one of the three). 0: none.",
        Update.RECONFIGURE,
        default=None,
    )
    allow_accounts: list[Annotated[str, Field(pattern=FLAG_RE)]] = spec(
        "Further Slurm accounts allowed to use the partition (AllowAccounts, with `tenants`): "
        "accounts gpucluster does not manage.",
        Update.RECONFIGURE,
        default_factory=list,
    )
    deny_accounts: list[Annotated[str, Field(pattern=FLAG_RE)]] = spec(
        "DenyAccounts.", Update.RECONFIGURE, default_factory=list
    )
    allow_groups: list[Annotated[str, Field(pattern=FLAG_RE)]] = spec(
        "AllowGroups: Unix groups whose users may use the partition; empty: all.",
        Update.RECONFIGURE,
        default_factory=list,
    )
    allow_qos: list[Annotated[str, Field(pattern=FLAG_RE)]] = spec(
        "AllowQos: QOS jobs of the partition may use; empty: all.", Update.RECONFIGURE, default_factory=list
    )
    deny_qos: list[Annotated[str, Field(pattern=FLAG_RE)]] = spec(
        "DenyQos.", Update.RECONFIGURE, default_factory=list
    )
    qos: Annotated[str, Field(pattern=FLAG_RE)] | None = spec(
        "QOS: the partition QOS, whose limits apply to every job of the partition.",
        Update.RECONFIGURE,
        default=None,
    )
    preempt_mode: list[Literal["OFF", "CANCEL", "GANG", "REQUEUE", "SUSPEND", "WITHIN", "PRIORITY"]] = spec(
        "PreemptMode of the partition's jobs (cluster.slurm.preemption.mode otherwise).",
        Update.RECONFIGURE,
        default_factory=list,
    )
    grace_time: Annotated[int, Field(ge=0, le=UINT32_MAX)] | None = spec(
        "GraceTime: seconds a preempted job of the partition gets to end.", Update.RECONFIGURE, default=None
    )
    def_mem_per_cpu_mb: Annotated[int, Field(ge=0, le=MEMORY_MB_MAX)] | None = spec(
        "DefMemPerCPU in MiB.", Update.RECONFIGURE, default=None
    )
    max_mem_per_cpu_mb: Annotated[int, Field(ge=0, le=MEMORY_MB_MAX)] | None = spec(
        "MaxMemPerCPU in MiB.", Update.RECONFIGURE, default=None
    )
    def_mem_per_node_mb: Annotated[int, Field(ge=0, le=MEMORY_MB_MAX)] | None = spec(
        "DefMemPerNode in MiB.", Update.RECONFIGURE, default=None
    )
    max_mem_per_node_mb: Annotated[int, Field(ge=0, le=MEMORY_MB_MAX)] | None = spec(
        "MaxMemPerNode in MiB.", Update.RECONFIGURE, default=None
    )
    max_nodes: Annotated[int, Field(ge=0, le=UINT32_MAX)] | None = spec(
        "MaxNodes per job; default unlimited.", Update.RECONFIGURE, default=None
    )
    min_nodes: Annotated[int, Field(ge=0, le=UINT32_MAX)] | None = spec(
        "MinNodes per job.", Update.RECONFIGURE, default=None
    )
    max_cpus_per_node: Annotated[int, Field(ge=1, le=UINT32_MAX)] | None = spec(
        "MaxCPUsPerNode: CPUs all jobs of the partition may use on one node (e.g. to leave CPUs to "
        "a GPU partition sharing the nodes).",
        Update.RECONFIGURE,
        default=None,
    )
    over_subscribe: Annotated[str, Field(pattern=r"^(NO|YES|FORCE)(:\d+)?$")] | None = spec(
        "OverSubscribe: NO, YES[:jobs] or FORCE[:jobs] (whole nodes: `exclusive`). Default NO.",
        Update.RECONFIGURE,
        default=None,
    )
    exclusive_user: StrictBool = spec(
        "ExclusiveUser: a node runs jobs of one user at a time.", Update.RECONFIGURE, default=False
    )
    tres_billing_weights: Annotated[str, Field(pattern=r"^\S+$")] | None = spec(
        'TRESBillingWeights, e.g. "CPU=1.0,Mem=0.25G,GRES/gpu=2.0".', Update.RECONFIGURE, default=None
    )
    hidden: StrictBool = spec("Hidden from sinfo and squeue by default.", Update.RECONFIGURE, default=False)
    topology: Annotated[str, Field(pattern=NAME_RE)] | None = spec(
        "Topology= (Slurm >= 25.05): the topology of topology.yaml this partition's jobs are placed by: "
        f"`{TREE_TOPOLOGY}` (cluster.fabric.tree), `{BLOCK_TOPOLOGY}` (cluster.fabric.blocks) or a name "
        f"of fabric.block_sets, or `{FLAT_TOPOLOGY}` (none). Every node of the partition must be in it. "
        "Default: the cluster's default topology (fabric.default).",
        Update.RECONFIGURE,
        default=None,
    )
    state: Literal["UP", "DOWN", "DRAIN", "INACTIVE"] = spec(
        "State: UP, DOWN (jobs queue, none start), DRAIN (no new jobs) or INACTIVE.",
        Update.RECONFIGURE,
        default="UP",
    )
    suspend_time: Annotated[int, Field(ge=-1, le=UINT32_MAX)] | None = spec(
        "SuspendTime of the partition's nodes: idle seconds before power saving suspends them (-1: never).",
        Update.RECONFIGURE,
        default=None,
    )
    suspend_timeout: Annotated[int, Field(ge=1, le=UINT32_MAX)] | None = spec(
        "SuspendTimeout of the partition's nodes, seconds.", Update.RECONFIGURE, default=None
    )
    resume_timeout: Annotated[int, Field(ge=1, le=UINT32_MAX)] | None = spec(
        "ResumeTimeout of the partition's nodes, seconds.", Update.RECONFIGURE, default=None
    )
    power_down_on_idle: StrictBool = spec(
        "PowerDownOnIdle: power a node down as soon as it is idle.", Update.RECONFIGURE, default=False
    )
    priority_job_factor: Annotated[int, Field(ge=0, le=65533)] | None = spec(
        "PriorityJobFactor of the partition (the multifactor partition factor).",
        Update.RECONFIGURE,
        default=None,
    )
    extra: dict[Annotated[str, Field(pattern=OPTION_NAME_RE)], OptionValue] = spec(
        "Further options of the partition's line (e.g. AllocNodes, LLN), written verbatim: only "
        "options of the target release's PartitionName lines that no other key here sets.",
        Update.RECONFIGURE,
        default_factory=dict,
    )

    @field_validator("max_time", "default_time")
    @classmethod
    def _slurm_time(cls, value: str | None) -> str | None:
        if value is not None and not SLURM_TIME_RE.match(value):
            raise ValueError(f"{value!r} is not a Slurm time (minutes, [D-]HH:MM:SS or UNLIMITED)")
        return value


class Qos(Strict):
    name: Annotated[str, Field(pattern=NAME_RE)] = spec("QOS name.", Update.ACCOUNTS)
    priority: Annotated[int, Field(ge=0, le=UINT32_MAX)] = spec(
        "QOS priority factor.", Update.ACCOUNTS, default=0
    )
    max_gpus_per_user: Annotated[int, Field(ge=0, le=UINT32_MAX)] | None = spec(
        "MaxTRESPerUser=gres/gpu=N.", Update.ACCOUNTS, default=None
    )
    max_gpus_per_job: Annotated[int, Field(ge=0, le=UINT32_MAX)] | None = spec(
        "MaxTRESPerJob=gres/gpu=N.", Update.ACCOUNTS, default=None
    )
    grp_gpus: Annotated[int, Field(ge=0, le=UINT32_MAX)] | None = spec(
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
    quota: Annotated[int, Field(ge=0, le=UINT32_MAX)] = spec(
        "GPUs guaranteed to the tenant: Slurm Fairshare= (its shares), Kueue nominalQuota, KAI quota.",
        Update.ACCOUNTS,
        default=0,
    )
    limit: Annotated[int, Field(ge=0, le=UINT32_MAX)] | None = spec(
        "Most GPUs the tenant may hold at once, borrowing included: Slurm GrpTRES=gres/gpu=N, Kueue "
        "nominalQuota + borrowingLimit, KAI limit. Default: quota.",
        Update.ACCOUNTS,
        default=None,
    )
    units: TenantUnits = spec(TENANT_UNITS_DOC, Update.ACCOUNTS, default_factory=dict)

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
    fairshare: Annotated[int, Field(ge=1, le=UINT32_MAX)] = spec(
        "Weight of the tenant in sharing what lies beyond the quotas: Kueue fairSharing weight, KAI "
        "overQuotaWeight; Slurm Fairshare= only where bare-metal Slurm has no GPUs (with GPUs a "
        "tenant's Slurm shares are its Slurm quota, 1 without one).",
        Update.ACCOUNTS,
    )
    gpu_quota: Annotated[int, Field(ge=0, le=UINT32_MAX)] | None = spec(
        "GPUs guaranteed to the tenant by the fleet's only GPU scheduler (shorthand for `gpus.<owner>.quota`; "
        "use `gpus` when GPUs have several owners).",
        Update.ACCOUNTS,
        default=None,
    )
    gpu_limit: Annotated[int, Field(ge=0, le=UINT32_MAX)] | None = spec(
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
    enforce: list[Literal["associations", "limits", "qos", "safe", "wckeys", "nojobs", "nosteps"]] = spec(
        "AccountingStorageEnforce; empty: not written (nothing enforced).",
        Update.RECONFIGURE,
        default_factory=lambda: ["associations", "limits", "qos"],
    )
    tres: list[Annotated[str, Field(pattern=FLAG_RE)]] | None = spec(
        "AccountingStorageTRES: TRES accounted beyond Slurm's own (cpu, mem, energy, node, "
        "billing, fs/disk, vmem, pages), e.g. gres/gpu, gres/gpu:h100. Default: gres/gpu where "
        "nodes have GPUs; [] writes none.",
        Update.RECONFIGURE,
        default=None,
    )


# The weights gpucluster gives multifactor priority where tenants share the cluster by fair-share
# and the inventory sets none (each can be set in cluster.slurm.priority).
FAIRSHARE_PRIORITY = {
    "decay_half_life": "7-0",
    "calc_period": 5,
    "fairshare": 100000,
    "qos": 10000,
    "age": 1000,
    "job_size": 0,
    "partition": 0,
}


class Priority(Strict):
    """PriorityType and its weights: written where the inventory sets them, or where tenants share
    the cluster by fair-share (then the weights of FAIRSHARE_PRIORITY fill what is not set)."""

    type: Literal["multifactor", "basic"] = spec(
        "PriorityType (priority/multifactor or priority/basic: first come, first served).",
        Update.RECONFIGURE,
        default="multifactor",
    )
    fairshare: Annotated[int, Field(ge=0, le=UINT32_MAX)] | None = spec(
        "PriorityWeightFairshare. Default with tenants: 100000.", Update.RECONFIGURE, default=None
    )
    qos: Annotated[int, Field(ge=0, le=UINT32_MAX)] | None = spec(
        "PriorityWeightQOS. Default with tenants: 10000.", Update.RECONFIGURE, default=None
    )
    age: Annotated[int, Field(ge=0, le=UINT32_MAX)] | None = spec(
        "PriorityWeightAge. Default with tenants: 1000.", Update.RECONFIGURE, default=None
    )
    job_size: Annotated[int, Field(ge=0, le=UINT32_MAX)] | None = spec(
        "PriorityWeightJobSize. Default with tenants: 0.", Update.RECONFIGURE, default=None
    )
    partition: Annotated[int, Field(ge=0, le=UINT32_MAX)] | None = spec(
        "PriorityWeightPartition. Default with tenants: 0.", Update.RECONFIGURE, default=None
    )
    assoc: Annotated[int, Field(ge=0, le=UINT32_MAX)] | None = spec(
        "PriorityWeightAssoc.", Update.RECONFIGURE, default=None
    )
    tres: Annotated[str, Field(pattern=r"^\S+$")] | None = spec(
        'PriorityWeightTRES, e.g. "CPU=1000,Mem=2000,GRES/gpu=3000".', Update.RECONFIGURE, default=None
    )
    decay_half_life: Annotated[str, Field(pattern=r"^\S+$")] | None = spec(
        "PriorityDecayHalfLife. Default with tenants: 7-0.", Update.RECONFIGURE, default=None
    )
    calc_period: Annotated[int, Field(ge=1, le=UINT32_MAX)] | None = spec(
        "PriorityCalcPeriod in minutes. Default with tenants: 5.", Update.RECONFIGURE, default=None
    )
    max_age: Annotated[str, Field(pattern=r"^\S+$")] | None = spec(
        "PriorityMaxAge.", Update.RECONFIGURE, default=None
    )
    usage_reset_period: Annotated[str, Field(pattern=r"^\S+$")] | None = spec(
        "PriorityUsageResetPeriod (NONE, NOW, DAILY, WEEKLY, MONTHLY, QUARTERLY, YEARLY).",
        Update.RECONFIGURE,
        default=None,
    )
    favor_small: StrictBool | None = spec("PriorityFavorSmall.", Update.RECONFIGURE, default=None)
    flags: list[Annotated[str, Field(pattern=FLAG_RE)]] = spec(
        "PriorityFlags.", Update.RECONFIGURE, default_factory=list
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
    constrain_cores: StrictBool = spec("ConstrainCores.", Update.RESTART, default=True)
    constrain_devices: StrictBool = spec("ConstrainDevices (GPU isolation).", Update.RESTART, default=True)
    constrain_ram_space: StrictBool = spec("ConstrainRAMSpace.", Update.RESTART, default=True)
    extra: dict[Annotated[str, Field(pattern=OPTION_NAME_RE)], OptionValue] = spec(
        "Further cgroup.conf keys of the target release (e.g. ConstrainSwapSpace, "
        "AllowedRAMSpace), written verbatim after these.",
        Update.RESTART,
        default_factory=dict,
    )


class Daemons(Strict):
    """Where slurmctld and slurmd listen, keep their files and log, and how much they log."""

    slurmctld_port: (
        Annotated[str, Field(pattern=r"^\d{1,5}(-\d{1,5})?$")] | Annotated[int, Field(ge=1, le=65535)]
    ) = spec(
        'SlurmctldPort: a port or a range of them ("6820-6829"): slurmd, sackd and the commands '
        "reach slurmctld there.",
        Update.RESTART,
        default=6817,
    )
    slurmd_port: Annotated[int, Field(ge=1, le=65535)] = spec("SlurmdPort.", Update.RESTART, default=6818)
    spool_dir: Annotated[str, Field(pattern=SLURM_PATH_RE)] = spec(
        "SlurmdSpoolDir: slurmd's state and, configless, its copy of the files.",
        Update.RESTART,
        default="/var/lib/slurm/slurmd",
    )
    slurmctld_pid_file: Annotated[str, Field(pattern=SLURM_PATH_RE)] | None = spec(
        "SlurmctldPidFile. Default: where the release's packages put it (/run/slurmctld.pid with "
        "Debian's 22.05, /run/slurmctld/slurmctld.pid from 24.11, whose units run slurmctld as "
        "SlurmUser in that directory).",
        Update.RESTART,
        default=None,
    )
    slurmd_pid_file: Annotated[str, Field(pattern=SLURM_PATH_RE)] = spec(
        "SlurmdPidFile.", Update.RESTART, default="/run/slurmd.pid"
    )
    slurmctld_log_file: Annotated[str, Field(pattern=SLURM_PATH_RE)] | None = spec(
        "SlurmctldLogFile; null: syslog.", Update.RESTART, default="/var/log/slurm/slurmctld.log"
    )
    slurmd_log_file: Annotated[str, Field(pattern=SLURM_PATH_RE)] | None = spec(
        "SlurmdLogFile; null: syslog.", Update.RESTART, default="/var/log/slurm/slurmd.log"
    )
    slurmctld_debug: DebugLevel | None = spec(
        "SlurmctldDebug; default info.", Update.RECONFIGURE, default=None
    )
    slurmd_debug: DebugLevel | None = spec("SlurmdDebug; default info.", Update.RECONFIGURE, default=None)
    debug_flags: list[Annotated[str, Field(pattern=FLAG_RE)]] = spec(
        "DebugFlags (e.g. Gres, Backfill).", Update.RECONFIGURE, default_factory=list
    )


class Timeouts(Strict):
    """Slurm's timers, in seconds unless said; each written only when set (Slurm's default otherwise)."""

    slurmctld: Annotated[int, Field(ge=1, le=UINT16_MAX)] | None = spec(
        "SlurmctldTimeout: how long a backup controller waits for the primary (default 120).",
        Update.RECONFIGURE,
        default=None,
    )
    slurmd: Annotated[int, Field(ge=0, le=UINT16_MAX)] | None = spec(
        "SlurmdTimeout: how long a silent slurmd may be before its node is DOWN (default 300).",
        Update.RECONFIGURE,
        default=None,
    )
    message: Annotated[int, Field(ge=1, le=UINT16_MAX)] | None = spec(
        "MessageTimeout (default 10).", Update.RECONFIGURE, default=None
    )
    tcp: Annotated[int, Field(ge=1, le=UINT16_MAX)] | None = spec(
        "TCPTimeout (default 2).", Update.RECONFIGURE, default=None
    )
    batch_start: Annotated[int, Field(ge=1, le=UINT16_MAX)] | None = spec(
        "BatchStartTimeout (default 10).", Update.RECONFIGURE, default=None
    )
    prolog_epilog: Annotated[int, Field(ge=1, le=UINT16_MAX)] | None = spec(
        "PrologEpilogTimeout (default: wait indefinitely).", Update.RECONFIGURE, default=None
    )
    unkillable_step: Annotated[int, Field(ge=1, le=UINT16_MAX)] | None = spec(
        "UnkillableStepTimeout (default 60).", Update.RECONFIGURE, default=None
    )
    kill_wait: Annotated[int, Field(ge=0, le=UINT16_MAX)] | None = spec(
        "KillWait: between SIGTERM and SIGKILL at a job's time limit (default 30).",
        Update.RECONFIGURE,
        default=None,
    )
    min_job_age: Annotated[int, Field(ge=0, le=UINT32_MAX)] | None = spec(
        "MinJobAge: how long slurmctld keeps a finished job (default 300).", Update.RECONFIGURE, default=None
    )
    inactive_limit: Annotated[int, Field(ge=0, le=UINT16_MAX)] | None = spec(
        "InactiveLimit: an srun or salloc silent that long loses its job (default 0: never).",
        Update.RECONFIGURE,
        default=None,
    )
    wait_time: Annotated[int, Field(ge=0, le=UINT16_MAX)] | None = spec(
        "WaitTime: srun's wait after the first task ends (default 0: unlimited).",
        Update.RECONFIGURE,
        default=None,
    )
    over_time_limit: Annotated[int, Field(ge=0, le=UINT16_MAX)] | None = spec(
        "OverTimeLimit, minutes a job may run past its limit (default 0).", Update.RECONFIGURE, default=None
    )
    epilog_msg_time: Annotated[int, Field(ge=0, le=UINT32_MAX)] | None = spec(
        "EpilogMsgTime, microseconds (default 2000).", Update.RECONFIGURE, default=None
    )
    get_env: Annotated[int, Field(ge=1, le=UINT16_MAX)] | None = spec(
        "GetEnvTimeout (default 120).", Update.RECONFIGURE, default=None
    )
    resv_over_run: Annotated[int, Field(ge=0, le=UINT16_MAX)] | None = spec(
        "ResvOverRun, minutes (default 0).", Update.RECONFIGURE, default=None
    )
    complete_wait: Annotated[int, Field(ge=0, le=UINT16_MAX)] | None = spec(
        "CompleteWait: seconds no new job is scheduled while a job completes, to keep jobs on the "
        "nodes just used (default 0: start pending jobs at once).",
        Update.RECONFIGURE,
        default=None,
    )


class Preemption(Strict):
    """Which jobs may preempt which (PreemptType), and what happens to the preempted ones."""

    type: Literal["none", "partition_prio", "qos"] = spec(
        "PreemptType: preempt/partition_prio (partitions of higher PriorityTier preempt lower ones "
        "sharing the nodes) or preempt/qos (the QOS `preempt` lists).",
        Update.RESTART,
        default="none",
    )
    mode: list[Literal["OFF", "CANCEL", "GANG", "REQUEUE", "SUSPEND", "WITHIN", "PRIORITY"]] = spec(
        "PreemptMode: what happens to a preempted job (default OFF; SUSPEND needs GANG).",
        Update.RECONFIGURE,
        default_factory=list,
    )
    exempt_time: Annotated[str, Field(pattern=r"^-?\S+$")] | None = spec(
        "PreemptExemptTime: run time before a job may be preempted (-1: none).",
        Update.RECONFIGURE,
        default=None,
    )
    parameters: list[Annotated[str, Field(pattern=FLAG_RE)]] = spec(
        "PreemptParameters.", Update.RECONFIGURE, default_factory=list
    )


class PowerSave(Strict):
    """Slurm's power saving: idle nodes suspended by a program, and resumed by another when jobs
    need them (nodes of State=CLOUD: cluster.nodes[].state). The programs are the site's."""

    suspend_program: Annotated[str, Field(pattern=SLURM_PATH_RE)] | None = spec(
        "SuspendProgram: powers the given nodes down.", Update.RECONFIGURE, default=None
    )
    resume_program: Annotated[str, Field(pattern=SLURM_PATH_RE)] | None = spec(
        "ResumeProgram: powers the given nodes up.", Update.RECONFIGURE, default=None
    )
    resume_fail_program: Annotated[str, Field(pattern=SLURM_PATH_RE)] | None = spec(
        "ResumeFailProgram: runs for nodes that did not come up in ResumeTimeout.",
        Update.RECONFIGURE,
        default=None,
    )
    suspend_time: Annotated[int, Field(ge=-1, le=UINT32_MAX)] | None = spec(
        "SuspendTime: idle seconds before a node is suspended (-1: never).", Update.RECONFIGURE, default=None
    )
    suspend_timeout: Annotated[int, Field(ge=1, le=UINT32_MAX)] | None = spec(
        "SuspendTimeout, seconds (default 30).", Update.RECONFIGURE, default=None
    )
    resume_timeout: Annotated[int, Field(ge=1, le=UINT32_MAX)] | None = spec(
        "ResumeTimeout, seconds (default 60).", Update.RECONFIGURE, default=None
    )
    suspend_rate: Annotated[int, Field(ge=0, le=UINT32_MAX)] | None = spec(
        "SuspendRate: nodes per minute (0: unlimited; default 60).", Update.RECONFIGURE, default=None
    )
    resume_rate: Annotated[int, Field(ge=0, le=UINT32_MAX)] | None = spec(
        "ResumeRate: nodes per minute (0: unlimited; default 300).", Update.RECONFIGURE, default=None
    )
    exclude_nodes: list[str] = spec(
        "SuspendExcNodes: inventory hosts or groups never suspended.",
        Update.RECONFIGURE,
        default_factory=list,
    )
    exclude_partitions: list[Annotated[str, Field(pattern=NAME_RE)]] = spec(
        "SuspendExcParts: partitions whose nodes are never suspended.",
        Update.RECONFIGURE,
        default_factory=list,
    )
    exclude_states: list[
        Literal[
            "CLOUD",
            "DOWN",
            "DRAIN",
            "DYNAMIC_FUTURE",
            "DYNAMIC_NORM",
            "FAIL",
            "INVALID_REG",
            "MAINTENANCE",
            "NOT_RESPONDING",
            "PERFCTRS",
            "PLANNED",
            "RESERVED",
        ]
    ] = spec("SuspendExcStates: node states never suspended.", Update.RECONFIGURE, default_factory=list)
    max_powered_nodes: Annotated[int, Field(ge=1)] | None = spec(MAX_POWERED, Update.RESTART, default=None)


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
    prolog: StrictBool = spec(
        "Also run the fast fatal check (GPU count) as the Prolog: a failing node is drained and the "
        "job requeued instead of started.",
        Update.RECONFIGURE,
        default=True,
    )
    xid_fatal: list[Annotated[int, Field(ge=1, le=UINT16_MAX)]] = spec(
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


class SlurmUpgrade(Strict):
    """How playbooks/slurm-upgrade.yml carries out a change of slurm.version on a live cluster."""

    backup_dir: Annotated[str, Field(pattern=r"^/\S+$")] = spec(
        "Where the upgrade keeps its backups, one directory per upgrade (`<from>-to-<to>`): the "
        "accounting database's dump (mysqldump --single-transaction) on the accounting host and the "
        "copy of StateSaveLocation on the first controller, mode 0700, never printed. The pre-checks "
        "refuse to start without free space there for both.",
        Update.RENDER_ONLY,
        default="/var/backups/gpucluster-slurm",
    )
    batch_size: Annotated[int, Field(ge=1, le=UINT32_MAX)] = spec(
        "Compute hosts whose slurmd is upgraded at once: drained, their packages upgraded while slurmd "
        "runs, slurmd restarted with the new release and waited for (registered, responding) before "
        "the next batch, then resumed. Their running jobs keep running (slurmstepd is not restarted); "
        "a batch's nodes take no new job meanwhile.",
        Update.RENDER_ONLY,
        default=4,
    )


# hosts.yml variables that give the address Slurm's daemons reach a host at, where it is not the
# host's name, and which hosts may have each (Slurm's key in brackets).
NODE_ADDR, NODE_HOSTNAME = "slurm_node_addr", "slurm_node_hostname"
CONTROLLER_ADDR, DBD_ADDR = "slurm_controller_addr", "slurm_dbd_addr"
SLURM_ADDRESS_VARS = {
    NODE_ADDR: "a Slurm node (NodeAddr)",
    NODE_HOSTNAME: "a Slurm node (NodeHostname)",
    CONTROLLER_ADDR: "a controller (SlurmctldHost=name(address))",
    DBD_ADDR: "the accounting host (AccountingStorageHost)",
}


class SlurmSettings(Strict):
    version: Annotated[str, BeforeValidator(_slurm_version)] = spec(
        "Target Slurm release, YY.MM (or YY.MM.P where a maintenance release matters, e.g. "
        "25.05.2): one gpucluster knows (`gpucluster show` lists them and says which are proven "
        "by real daemons). It decides the keys, plugins, files and procedures rendered, and the "
        "packages installed. Changing it is an upgrade, carried out by playbooks/slurm-upgrade.yml "
        "(`gpucluster plan` gives the steps and refuses a downgrade or a jump past the new release's "
        "window); running jobs survive it.",
        Update.RESTART,
    )
    packages: SlurmPackages = spec(
        "Package source of Slurm on the hosts.", Update.RESTART, default_factory=SlurmPackages
    )
    upgrade: SlurmUpgrade = spec(
        "How a change of `version` is carried out on the live cluster (playbooks/slurm-upgrade.yml).",
        Update.RENDER_ONLY,
        default_factory=SlurmUpgrade,
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
    slurm_user: Annotated[str, Field(pattern=r"^[a-z_][a-z0-9_.-]*$", max_length=32)] = spec(
        "SlurmUser: the user slurmctld and slurmdbd run as and own their state, logs and slurmdbd.conf "
        "under (slurmd and slurmstepd run as root). Default slurm, the packages' user; a site's "
        "other user (root, or an account its hosts already have) is kept: the roles make the "
        "units, files and directories that user's. Changing it restarts slurmctld and slurmdbd.",
        Update.RESTART,
        default="slurm",
    )
    cluster_name: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")] | None = spec(
        "ClusterName as slurm.conf writes it, where it is not `cluster.name` (a site's name with "
        "dots or capitals: Slurm reads it in lower case, and accounting knows the cluster by it). "
        "Default: cluster.name.",
        Update.REBUILD,
        default=None,
    )
    configless: StrictBool = spec(
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
    priority: Priority | None = spec(
        "PriorityType and its weights. Written where set here; with accounting and tenants, "
        "multifactor priority with the fair-share weights of its defaults. Omit for Slurm's "
        "default (priority/basic up to 23.02, priority/multifactor with zero weights from 23.11).",
        Update.RECONFIGURE,
        default=None,
    )
    mpi_default: Annotated[str, Field(pattern=r"^(none|pmi2|pmix(_v[2-5])?|cray_shasta)$")] = spec(
        "MpiDefault: the MPI plugin srun uses when a job names none (`srun --mpi=...` chooses per "
        "step): none, pmi2, pmix (or pmix_v2 ... pmix_v5), cray_shasta. pmix only where the "
        "release's packages carry mpi/pmix (Debian's 22.05 and 24.11 do; 26.05's do not: there "
        "srun offers pmi2 and cray_shasta).",
        Update.RECONFIGURE,
        default="none",
    )
    proctrack: Literal["cgroup", "linuxproc", "pgid"] = spec(
        "ProctrackType plugin (linuxproc or pgid only where cgroups are unavailable, e.g. "
        "containers: neither can kill every process of a job).",
        Update.RESTART,
        default="cgroup",
    )
    task_plugins: list[Literal["cgroup", "affinity", "none"]] = spec(
        "TaskPlugin list, in order; empty (or none): no task plugin, Slurm's default.",
        Update.RESTART,
        default_factory=lambda: ["cgroup", "affinity"],
    )
    job_acct_gather_type: Literal["cgroup", "linux", "none"] | None = spec(
        "JobAcctGatherType (jobacct_gather/<type>): how job usage is measured. Default: cgroup with "
        "proctrack cgroup, linux otherwise.",
        Update.RESTART,
        default=None,
    )
    scheduler_type: Literal["backfill", "builtin"] = spec(
        "SchedulerType (sched/<type>): backfill starts lower-priority jobs that do not delay "
        "higher ones; builtin is strict priority order.",
        Update.RESTART,
        default="backfill",
    )
    scheduler_parameters: list[Annotated[str, Field(pattern=FLAG_RE)]] = spec(
        "SchedulerParameters, e.g. [bf_continue, bf_window=4320, nohold_on_prolog_fail].",
        Update.RECONFIGURE,
        default_factory=list,
    )
    select_type: Literal["cons_tres", "linear", "cons_res"] = spec(
        "SelectType (select/<type>): cons_tres allocates cores, memory and GPUs; linear whole "
        "nodes; cons_res only up to Slurm 23.02 (23.11 removed it: use cons_tres).",
        Update.RESTART,
        default="cons_tres",
    )
    select_type_parameters: list[Annotated[str, Field(pattern=r"^[A-Za-z_]+$")]] = spec(
        "SelectTypeParameters, e.g. [CR_Core_Memory] (cores and memory are consumable), "
        "[CR_CPU]; empty: not written.",
        Update.RESTART,
        default_factory=lambda: ["CR_Core_Memory"],
    )
    preemption: Preemption | None = spec(
        "Preemption (PreemptType, PreemptMode, PreemptExemptTime); omit for none.",
        Update.RESTART,
        default=None,
    )
    prolog: list[Annotated[str, Field(pattern=r"^\S+$")]] = spec(
        "Prolog: programs slurmd runs as root on a job's nodes before it starts; each a path or a "
        "glob such as /etc/slurm/prolog.d/* (a directory of them). Slurm >= 24.05 takes several "
        "(one line each); older releases one. With cluster.slurm.health.prolog, the health check "
        "runs first.",
        Update.RECONFIGURE,
        default_factory=list,
    )
    epilog: list[Annotated[str, Field(pattern=r"^\S+$")]] = spec(
        "Epilog: programs slurmd runs as root on a job's nodes after it ends (as `prolog`).",
        Update.RECONFIGURE,
        default_factory=list,
    )
    prolog_flags: list[PrologFlag] = spec(
        "PrologFlags, e.g. [Alloc, Contain, Serial]. cluster.slurm.node_ssh adds Contain.",
        Update.RESTART,
        default_factory=list,
    )
    timeouts: Timeouts = spec("Slurm's timers.", Update.RECONFIGURE, default_factory=Timeouts)
    daemons: Daemons = spec(
        "Ports, files and log levels of slurmctld and slurmd.", Update.RESTART, default_factory=Daemons
    )
    power_save: PowerSave | None = spec(
        "Power saving (SuspendProgram, ResumeProgram, their timers); cloud nodes are "
        "cluster.nodes[].state: cloud. Omit for none.",
        Update.RECONFIGURE,
        default=None,
    )
    propagate_resource_limits: list[Annotated[str, Field(pattern=FLAG_RE)]] | None = spec(
        "PropagateResourceLimits: the submitting shell's limits jobs take (ALL, NONE, or e.g. "
        "[CORE, NOFILE]); default ALL.",
        Update.RECONFIGURE,
        default=None,
    )
    propagate_resource_limits_except: list[Annotated[str, Field(pattern=FLAG_RE)]] = spec(
        "PropagateResourceLimitsExcept, e.g. [MEMLOCK] (jobs keep the node's RDMA memory limit).",
        Update.RECONFIGURE,
        default_factory=list,
    )
    slurmctld_parameters: list[Annotated[str, Field(pattern=FLAG_RE)]] = spec(
        "SlurmctldParameters (after enable_configless, which cluster.slurm.configless sets), e.g. "
        "[idle_on_node_suspend, cloud_dns].",
        Update.RESTART,
        default_factory=list,
    )
    slurmd_parameters: list[Annotated[str, Field(pattern=FLAG_RE)]] = spec(
        "SlurmdParameters (after config_overrides, which cluster.slurm.config_overrides sets), "
        "e.g. [numa_node_as_socket].",
        Update.RESTART,
        default_factory=list,
    )
    config_overrides: StrictBool = spec(
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
    no_default_partition: bool = spec(
        "No partition is the default, on purpose: every job must name its partition (`-p`), and "
        "one that names none is refused (slurmctld: `default partition not set`). Off, an "
        "inventory without a default partition is refused; on, it is a warning.",
        Update.RECONFIGURE,
        default=False,
    )
    several_default_partitions: bool = spec(
        "Several partitions say `default: true`, as some sites' slurm.conf do: slurmctld keeps the "
        "last of them as the default (logging that it changes the default partition), and the "
        "others' Default=YES changes nothing. Off, that is refused; on, it is a warning.",
        Update.RECONFIGURE,
        default=False,
    )
    hosts_in_no_partition: list[str] = spec(
        "Inventory hosts or groups that are Slurm nodes in no partition, on purpose (a site's "
        "service or login hosts running slurmd): no job runs there until a partition names them. "
        "Off the list, a Slurm node in no partition is refused; on it, a warning.",
        Update.RECONFIGURE,
        default_factory=list,
    )
    plugstack: list[
        Annotated[str, Field(pattern=r"^(required|optional)\s+\S+(\s+\S.*)?$|^include\s+\S+$")]
    ] = spec(
        "plugstack.conf lines of the site's own SPANK plugins, in order: `required|optional "
        "PLUGIN [ARGUMENTS]` or `include PATTERN` (a directory the hosts hold themselves). "
        "cluster.slurm.containers.pyxis adds gpucluster's Pyxis after them.",
        Update.RESTART,
        default_factory=list,
    )
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
    containers: ContainerSettings | None = spec(
        "Containers in jobs: Slurm's OCI support with rootless crun, and Pyxis + enroot. Omit for none.",
        Update.RESTART,
        default=None,
    )
    extra: dict[Annotated[str, Field(pattern=r"^[A-Za-z][A-Za-z0-9]*$")], str | int] = spec(
        "Further slurm.conf keys, written verbatim after the generated ones: keys of the target "
        "release that no setting of the inventory writes or models (a key the model has a place "
        "for is refused here, naming that place).",
        Update.RECONFIGURE,
        default_factory=dict,
    )

    @property
    def state_dir(self) -> str:
        return self.state_save_location or DEFAULT_STATE_SAVE_LOCATION

    @property
    def slurmctld_pid_file(self) -> str:
        return self.daemons.slurmctld_pid_file or self.release.packaging.slurmctld_pid_file

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
    shared_pools: list[SharedPool] = spec(SHARED_POOLS_DOC, Update.MOVE, default_factory=list)
    # Sections of the layers built on this model. The core keeps them opaque: gpucluster.layers
    # validates each present section with its layer's own model and puts the result here.
    gate: GateSettings | None = spec("The return-to-service gate: a node comes back (from the health check's drain, a reboot, new, an upgrade, a move, a repair) only after a burn-in passes; omit for none.", Update.RECONFIGURE, default=None)  # fmt: skip
    kubernetes: Any = spec(KUBERNETES_SECTION, Update.KUBERNETES, default=None)
    cloud: Any = spec(CLOUD_SECTION, Update.REBUILD, default=None)
    monitoring: Any = spec(MONITORING_SECTION, Update.SERVICE, default=None)


class ClusterFile(Strict):
    """The top level of the group_vars file: only `cluster` is ours; other Ansible variables pass."""

    model_config = ConfigDict(extra="allow", frozen=True)
    cluster: ClusterSpec
