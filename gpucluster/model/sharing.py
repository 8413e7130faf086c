"""Sharing a GPU: one declaration per node type (`gpus.sharing`), and what each scheduler makes of it.

A node type's GPUs are whole, or shared one way per scheduler:
- `mig`: NVIDIA Multi-Instance GPU, a layout of hardware-isolated slices per GPU. Slurm schedules
  each slice as a typed GPU (`gpu:1g.10gb`), Kubernetes as `nvidia.com/mig-1g.10gb` (or
  `nvidia.com/gpu` with the single strategy); the layout stays when a node changes scheduler.
- `shard`: Slurm's gres/shard, N jobs on one GPU without fencing (Slurm only).
- `mps`: Slurm's gres/mps, CUDA MPS clients sharing a GPU's SMs by percentage (Slurm only).
- `time_slicing`: the NVIDIA device plugin advertising each GPU N times (Kubernetes only).

A tenant's GPU quota and limit stay in GPUs; each scheduler turns them into its shared units by
the share of its GPUs each node kind holds (`tenant_units`), unless the tenant gives a number of
its own (`GpuQuota.units`).

The MIG profiles are facts of the hardware, from NVIDIA's Multi-Instance GPU User Guide
("Supported MIG Profiles", docs.nvidia.com/datacenter/tesla/mig-user-guide/supported-mig-profiles.html)
and the placements `nvidia-smi mig -lgip` prints for each profile: one table, MIG_GPUS.

No `from __future__ import annotations`: pydantic would evaluate every annotation string (spec.py).
"""

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import Field, model_validator

from gpucluster.model.base import Strict, Update, spec

# --- the hardware: MIG profiles per GPU product ------------------------------------------------


@dataclass(frozen=True)
class MigShape:
    """A GPU instance profile's shape, the same on every 7-slice GPU (A100, H100, H200, B200,
    GB200): compute slices (the `g`), memory slices of 8 it takes, where it may start (in memory
    slices), and how many fit one GPU."""

    compute: int
    memory: int
    starts: tuple[int, ...]
    most: int


# `nvidia-smi mig -lgip` placements `{starts}:size` of each profile of the 7-slice GPUs.
SHAPE_1G = MigShape(1, 1, (0, 1, 2, 3, 4, 5, 6), 7)
SHAPE_1G_DOUBLE = MigShape(1, 2, (0, 2, 4, 6), 4)  # one compute slice with twice the memory
SHAPE_2G = MigShape(2, 2, (0, 2, 4), 3)
SHAPE_3G = MigShape(3, 4, (0, 4), 2)
SHAPE_4G = MigShape(4, 4, (0,), 1)
SHAPE_7G = MigShape(7, 8, (0,), 1)
COMPUTE_SLICES = 7


@dataclass(frozen=True)
class MigGpu:
    """A MIG-capable GPU product and its profiles (name -> shape). The `+me` profiles (media
    extensions) are left out: Slurm matches a configured GPU type to the detected profile by
    substring, so `1g.10gb` would also name `1g.10gb+me`."""

    name: str
    family: str  # the token a GPU model name carries (gpus.model `h100`, `H100_80GB`, ...)
    memory_gb: int
    profiles: dict[str, MigShape]

    def shape(self, profile: str) -> MigShape | None:
        return self.profiles.get(profile)


def _mig_gpu(name: str, family: str, memory_gb: int, sizes: tuple[str, str, str, str]) -> MigGpu:
    """A product whose profiles are named by their memory: 1/8, 2/8, 4/8 and all of it (GB)."""
    eighth, quarter, half, whole = sizes
    return MigGpu(
        name,
        family,
        memory_gb,
        {
            f"1g.{eighth}gb": SHAPE_1G,
            f"1g.{quarter}gb": SHAPE_1G_DOUBLE,
            f"2g.{quarter}gb": SHAPE_2G,
            f"3g.{half}gb": SHAPE_3G,
            f"4g.{half}gb": SHAPE_4G,
            f"7g.{whole}gb": SHAPE_7G,
        },
    )


MIG_GPUS: dict[str, MigGpu] = {
    g.name: g
    for g in (
        _mig_gpu("A100-40GB", "a100", 40, ("5", "10", "20", "40")),
        _mig_gpu("A100-80GB", "a100", 80, ("10", "20", "40", "80")),
        _mig_gpu("H100-80GB", "h100", 80, ("10", "20", "40", "80")),
        _mig_gpu("H100-94GB", "h100", 94, ("12", "24", "47", "94")),
        _mig_gpu("H200-141GB", "h200", 141, ("18", "35", "71", "141")),
        _mig_gpu("B200-180GB", "b200", 180, ("23", "45", "90", "180")),
        _mig_gpu("GB200-186GB", "gb200", 186, ("23", "47", "93", "186")),
    )
}
MigGpuName = Literal[
    "A100-40GB", "A100-80GB", "H100-80GB", "H100-94GB", "H200-141GB", "B200-180GB", "GB200-186GB"
]
# GPUs sites run that have no MIG (NVIDIA's MIG user guide lists the ones that do).
NO_MIG = ("l40s", "l40", "l4", "a10", "a40", "t4", "v100", "p100", "rtx", "quadro", "titan", "gtx")


def mig_family(model: str | None) -> str | None:
    """The MIG family a GPU model name names (`h100`, `gb200`), longest token first."""
    text = (model or "").lower()
    for family in sorted({g.family for g in MIG_GPUS.values()}, key=len, reverse=True):
        if re.search(rf"(^|[^a-z0-9]|nvidia){family}", text) or text.startswith(family):
            return family
    return None


def no_mig_model(model: str | None) -> bool:
    text = (model or "").lower()
    return any(re.search(rf"(^|[^a-z0-9]){name}(\d|$|[^a-z0-9])", text) for name in NO_MIG)


def mig_gpu_of(model: str | None, memory_gb: int | None) -> MigGpu | None:
    """The product a node type's GPUs are, from gpus.model and gpus.memory_gb (None: unknown or
    ambiguous: several products of the family and no memory size that picks one)."""
    family = mig_family(model)
    if family is None:
        return None
    products = [g for g in MIG_GPUS.values() if g.family == family]
    if len(products) == 1 and memory_gb is None:
        return products[0]
    return next((g for g in products if g.memory_gb == memory_gb), None)


def fits(gpu: MigGpu, layout: dict[str, int]) -> bool:
    """Whether one GPU holds this many instances of each profile: each placed where the hardware
    allows it, no two on the same memory slices, at most 7 compute slices in all."""
    shapes = [gpu.profiles[name] for name, count in layout.items() for _ in range(count)]
    if sum(s.compute for s in shapes) > COMPUTE_SLICES:
        return False
    # Largest first: the fewest places to try.
    shapes.sort(key=lambda s: (-s.memory, -s.compute))

    def place(index: int, used: frozenset[int]) -> bool:
        if index == len(shapes):
            return True
        shape = shapes[index]
        for start in shape.starts:
            slots = frozenset(range(start, start + shape.memory))
            if not slots & used and place(index + 1, used | slots):
                return True
        return False

    return place(0, frozenset())


def layout_problem(gpu: MigGpu, layout: dict[str, int]) -> str | None:
    """Why one GPU cannot hold this layout (None: it can)."""
    unknown = [name for name in layout if name not in gpu.profiles]
    if unknown:
        return (
            f"{', '.join(unknown)}: not a MIG profile of the {gpu.name} (its profiles: "
            f"{', '.join(gpu.profiles)})"
        )
    for name, count in layout.items():
        if count > gpu.profiles[name].most:
            return f"{count} x {name}: a {gpu.name} holds at most {gpu.profiles[name].most}"
    if not fits(gpu, layout):
        compute = sum(gpu.profiles[name].compute * count for name, count in layout.items())
        why = (
            f"{compute} compute slices of {COMPUTE_SLICES}"
            if compute > COMPUTE_SLICES
            else "their memory slices overlap wherever they are placed"
        )
        text = " + ".join(f"{count} x {name}" for name, count in layout.items())
        return f"{text} does not fit one {gpu.name}: {why}"
    return None


# --- the declaration -------------------------------------------------------------------------

MIG_PROFILE_RE = r"^[1-7]g\.\d+gb$"
GPU_INDEXES_RE = r"^\d+(-\d+)?(,\d+(-\d+)?)*$"


def gpu_indexes(text: str) -> list[int]:
    """`0-3,6` -> [0, 1, 2, 3, 6]."""
    found: list[int] = []
    for item in text.split(","):
        first, _, last = item.partition("-")
        found.extend(range(int(first), int(last or first) + 1))
    return found


class MigLayout(Strict):
    """Which MIG instances some of a node's GPUs hold."""

    gpus: Annotated[str, Field(pattern=GPU_INDEXES_RE)] = spec(
        'GPU indexes (nvidia-smi\'s, from 0) this layout is for, e.g. "0-3" or "4,5".',
        Update.GPU_LAYOUT,
    )
    profiles: dict[Annotated[str, Field(pattern=MIG_PROFILE_RE)], Annotated[int, Field(ge=1, le=7)]] = spec(
        "MIG profile -> instances on each of these GPUs, e.g. {1g.10gb: 7} or {3g.40gb: 2}.",
        Update.GPU_LAYOUT,
        min_length=1,
    )


class MigSharing(Strict):
    """A MIG layout: the same on every GPU of the node (`layout`), or per GPU (`per_gpu`)."""

    gpu: MigGpuName | None = spec(
        "The GPU product whose MIG profiles apply. Default: from gpus.model (a100, h100, h200, "
        "b200, gb200) and gpus.memory_gb where the family has several sizes (A100 40/80, H100 "
        "80/94).",
        Update.GPU_LAYOUT,
        default=None,
    )
    layout: dict[Annotated[str, Field(pattern=MIG_PROFILE_RE)], Annotated[int, Field(ge=1, le=7)]] | None = (
        spec(
            "MIG profile -> instances on every GPU of the node, e.g. {1g.10gb: 7} (seven slices) or "
            "{3g.40gb: 2, 1g.10gb: 1}: profiles of the GPU product, at most 7 compute slices, placed "
            "as the hardware allows (a combination that cannot be placed is refused, naming why).",
            Update.GPU_LAYOUT,
            default=None,
        )
    )
    per_gpu: list[MigLayout] = spec(
        "Layouts of some GPUs each, instead of `layout`: every GPU of the node in exactly one "
        "(a whole GPU is the one-slice 7g profile: Slurm matches GPU types by substring, so a "
        "GPU left out of MIG would also match the node's MIG types).",
        Update.GPU_LAYOUT,
        default_factory=list,
    )

    @model_validator(mode="after")
    def _one_form(self) -> "MigSharing":
        if (self.layout is None) == (not self.per_gpu):
            raise ValueError("give `layout` (every GPU) or `per_gpu` (some GPUs each), one of them")
        return self

    def layouts(self, count: int) -> list[dict[str, int]]:
        """Each GPU's layout, in GPU order (GPUs no `per_gpu` entry names: empty)."""
        if self.layout is not None:
            return [dict(self.layout) for _ in range(count)]
        by_index: dict[int, dict[str, int]] = {}
        for entry in self.per_gpu:
            for index in gpu_indexes(entry.gpus):
                by_index.setdefault(index, dict(entry.profiles))
        return [by_index.get(index, {}) for index in range(count)]


class GpuSharing(Strict):
    """How the GPUs of a node type are shared: at most one way per scheduler."""

    mig: MigSharing | None = spec(
        "MIG: each GPU split into hardware-isolated instances. Slurm schedules each instance as a "
        "GPU of its profile's type (Gres=gpu:1g.10gb:56, gres.conf AutoDetect=nvml), Kubernetes "
        "as nvidia.com/mig-<profile> (the GPU Operator's MIG manager applies the layout there, "
        "the gpu_mig role on bare metal). Changing it re-partitions the GPUs: drained nodes, a "
        "batch at a time.",
        Update.GPU_LAYOUT,
        default=None,
    )
    shard: Annotated[int, Field(ge=1, le=1024)] | None = spec(
        "Slurm shards per GPU (gres/shard): that many jobs may share one GPU, unfenced (no memory "
        "or compute limit between them). A job asks `--gres=shard:N` (N at most this, one GPU).",
        Update.RESTART,
        default=None,
    )
    mps: Annotated[int, Field(ge=1, le=10000)] | None = spec(
        "Slurm gres/mps per GPU: CUDA MPS shares, usually 100 (a job's `--gres=mps:25` is then 25% "
        "of one GPU's SMs, CUDA_MPS_ACTIVE_THREAD_PERCENTAGE). The Prolog starts an MPS control "
        "daemon for the job's GPU, the Epilog stops it when no job uses it.",
        Update.RESTART,
        default=None,
    )
    mps_daemon: Literal["gpucluster", "site"] = spec(
        "Who starts the MPS control daemons: `gpucluster` (gpucluster-mps as Prolog, Epilog and "
        "TaskProlog, a daemon per GPU and tenant) or `site` (the site's own Prolog and Epilog in "
        "cluster.slurm.prolog/epilog; gpucluster writes no hook). Changing it rewrites slurm.conf's "
        "Prolog lines.",
        Update.RECONFIGURE,
        default="gpucluster",
    )
    mps_between_tenants: bool = spec(
        "Let jobs of different tenants use one MPS control daemon (one GPU's MPS server). Off: "
        "each tenant's jobs get a daemon of their own on the GPU.",
        Update.RECONFIGURE,
        default=False,
    )
    time_slicing: Annotated[int, Field(ge=2, le=64)] | None = spec(
        "Kubernetes: the device plugin advertises each GPU this many times (nvidia.com/gpu), pods "
        "take turns on it, with no memory limit between them. Kueue quotas count these replicas.",
        Update.KUBERNETES,
        default=None,
    )

    @model_validator(mode="after")
    def _combinations(self) -> "GpuSharing":
        if self.mig is not None and self.mps is not None:
            raise ValueError(
                "mig and mps together: a MIG instance shared by MPS clients loses the isolation MIG is "
                "for; give one of them"
            )
        if self.mig is not None and self.time_slicing is not None:
            raise ValueError(
                "mig and time_slicing together: time-slicing a MIG instance loses the isolation MIG is "
                "for; give one of them"
            )
        if self.shard is not None and self.mps is not None:
            raise ValueError(
                "shard and mps together: Slurm hands a GPU out one sharing way per node type here; "
                "give one of them"
            )
        if self.mps_between_tenants and self.mps is None:
            raise ValueError("mps_between_tenants without mps")
        if self.mps_between_tenants and self.mps_daemon == "site":
            raise ValueError("mps_between_tenants with mps_daemon site: the site's own hooks decide that")
        return self


SHARING_DOC = (
    "How these GPUs are shared, one way per scheduler: `mig` (hardware slices, Slurm and "
    "Kubernetes), `shard` or `mps` (Slurm), `time_slicing` (Kubernetes). Omit for whole GPUs."
)

# A tenant's own number of a shared unit: `shard`, `mps`, or a MIG profile (`1g.10gb`).
UNIT_RE = r"^(shard|mps|[1-7]g\.\d+gb)$"
TenantUnits = dict[Annotated[str, Field(pattern=UNIT_RE)], Annotated[int, Field(ge=0)]]
TENANT_UNITS_DOC = (
    "Most shared units the tenant may hold at once in this scheduler, where its GPU limit turned "
    "into them is not what you want: `shard` (Slurm gres/shard), `mps` (Slurm gres/mps), or a MIG "
    "profile (`1g.10gb`: Slurm gres/gpu:1g.10gb, Kubernetes nvidia.com/mig-1g.10gb). Default: the "
    "limit split over the scheduler's GPUs by kind, each share in that kind's units."
)


# --- what each scheduler makes of it ---------------------------------------------------------

SlurmTres = str  # "gres/gpu", "gres/shard", "gres/mps", "gres/gpu:1g.10gb"


@dataclass(frozen=True)
class NodeGres:
    """A node's GPUs as Slurm counts them: its Gres= entries and the TRES they make."""

    entries: tuple[tuple[str, int], ...]  # ("gpu:h100", 8), ("shard", 32), ("gpu:1g.10gb", 56)

    @property
    def text(self) -> str:
        return ",".join(f"{name}:{count}" for name, count in self.entries)

    def tres(self, mig: bool) -> dict[SlurmTres, int]:
        """TRES name -> count on the node: gres/gpu counts whole GPUs and MIG instances alike;
        with `mig`, each instance also counts as gres/gpu:<profile>."""
        out: dict[SlurmTres, int] = {}
        for name, count in self.entries:
            kind, _, typ = name.partition(":")
            out[f"gres/{kind}"] = out.get(f"gres/{kind}", 0) + count
            if mig and kind == "gpu" and typ:
                out[f"gres/gpu:{typ}"] = out.get(f"gres/gpu:{typ}", 0) + count
        return out


def effective_autodetect(autodetect: str, sharing: GpuSharing | None) -> str:
    """gres.conf AutoDetect of GPUs: nvml with MIG (nothing else finds the instances)."""
    return "nvml" if sharing is not None and sharing.mig is not None else autodetect


def mig_counts(mig: MigSharing, count: int) -> dict[str, int]:
    """MIG profile -> instances on a node of `count` GPUs, in the order profiles first appear."""
    totals: dict[str, int] = {}
    for layout in mig.layouts(count):
        for name, number in layout.items():
            totals[name] = totals.get(name, 0) + number
    return totals


def slurm_gres(kinds: tuple[tuple[str | None, int], ...], sharing: GpuSharing | None) -> NodeGres:
    """A node's Gres= entries: its GPUs of each kind (type, count), or MIG instances by profile,
    then shards or MPS (sharing is of one kind: the checks refuse it with several)."""
    count = sum(n for _, n in kinds)
    if sharing is not None and sharing.mig is not None:
        return NodeGres(tuple((f"gpu:{name}", n) for name, n in mig_counts(sharing.mig, count).items()))
    entries: list[tuple[str, int]] = [(f"gpu:{model}" if model else "gpu", n) for model, n in kinds]
    if sharing is not None and sharing.shard is not None:
        entries.append(("shard", sharing.shard * count))
    if sharing is not None and sharing.mps is not None:
        entries.append(("mps", sharing.mps * count))
    return NodeGres(tuple(entries))


KUBE_GPU = "nvidia.com/gpu"


def kubernetes_units(count: int, sharing: GpuSharing | None, mig_strategy: str) -> dict[str, int]:
    """Extended resource -> how many a Kubernetes node of `count` GPUs advertises: its GPUs (times
    the time-slicing replicas), or its MIG instances (nvidia.com/mig-<profile> with the mixed
    strategy; nvidia.com/gpu with single, which needs one profile on the whole node)."""
    if sharing is not None and sharing.mig is not None:
        counts = mig_counts(sharing.mig, count)
        if mig_strategy == "single":
            return {KUBE_GPU: sum(counts.values())}
        return {f"nvidia.com/mig-{name}": n for name, n in counts.items()}
    replicas = sharing.time_slicing if sharing is not None and sharing.time_slicing else 1
    return {KUBE_GPU: count * replicas}


def split(total: int, capacities: list[int]) -> list[int]:
    """`total` split across capacities in proportion (largest remainder, ties to the first)."""
    whole = sum(capacities)
    if whole == 0:
        return [0 for _ in capacities]
    shares = [total * c // whole for c in capacities]
    rests = sorted(range(len(capacities)), key=lambda i: (-(total * capacities[i] % whole), i))
    for i in rests[: total - sum(shares)]:
        shares[i] += 1
    return shares


@dataclass(frozen=True)
class NodeKind:
    """GPUs of one kind in one scheduler: how many physical GPUs, and the units they make."""

    name: str
    gpus: int
    units: dict[str, int]  # unit -> count over all these GPUs


def tenant_units(kinds: list[NodeKind], gpus: int, own: dict[str, int] | None = None) -> dict[str, int]:
    """A tenant's `gpus` (quota or limit, in GPUs) in the scheduler's units: split over the node
    kinds by their GPUs, each share turned into that kind's units; a unit the tenant gives a
    number of its own (`own`) keeps it."""
    shares = split(gpus, [k.gpus for k in kinds])
    out: dict[str, int] = {}
    for kind, share in zip(kinds, shares, strict=True):
        for unit, count in kind.units.items():
            out[unit] = out.get(unit, 0) + (count * share // kind.gpus if kind.gpus else 0)
    for unit, number in (own or {}).items():
        out[unit] = number
    return out


def describe(sharing: GpuSharing | None, count: int) -> str:
    """One line for `show`: how a node type's GPUs are shared."""
    if sharing is None:
        return "whole GPUs"
    parts: list[str] = []
    if sharing.mig is not None:
        layouts = sharing.mig.layouts(count)
        groups: dict[str, list[int]] = {}
        for index, layout in enumerate(layouts):
            text = " + ".join(f"{n} x {p}" for p, n in layout.items())
            groups.setdefault(text, []).append(index)
        mig = "; ".join(
            f"{text} per GPU" if len(indexes) == count else f"GPUs {_ranges(indexes)}: {text}"
            for text, indexes in groups.items()
        )
        parts.append(f"MIG {mig}")
    if sharing.shard is not None:
        parts.append(f"{sharing.shard} Slurm shards per GPU")
    if sharing.mps is not None:
        who = "tenants share a daemon" if sharing.mps_between_tenants else "a daemon per tenant"
        parts.append(f"MPS {sharing.mps} per GPU ({who})")
    if sharing.time_slicing is not None:
        parts.append(f"time-slicing x{sharing.time_slicing} on Kubernetes")
    return ", ".join(parts)


def _ranges(indexes: list[int]) -> str:
    runs: list[str] = []
    for start, end in _runs(indexes):
        runs.append(str(start) if start == end else f"{start}-{end}")
    return ",".join(runs)


def _runs(indexes: list[int]) -> Iterator[tuple[int, int]]:
    ordered = sorted(indexes)
    start = prev = ordered[0]
    for value in ordered[1:]:
        if value != prev + 1:
            yield start, prev
            start = value
        prev = value
    yield start, prev
