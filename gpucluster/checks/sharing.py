"""Checks of shared GPUs (gpus.sharing of node types and cluster.nodes entries): a MIG layout is
one the GPU product holds, on every GPU of the node, and tenants number only units their
schedulers have. What one scheduler cannot do is its layer's check (slurm/checks.py,
k8s/checks.py)."""

from __future__ import annotations

from gpucluster.model.base import Owner
from gpucluster.model.sharing import (
    MIG_GPUS,
    MigGpu,
    gpu_indexes,
    layout_problem,
    mig_family,
    mig_gpu_of,
    no_mig_model,
)
from gpucluster.model.spec import GpuSpec, NodeType
from gpucluster.resolve import Resolution


def mig_gpu(gpus: GpuSpec) -> MigGpu | None:
    """The MIG product of these GPUs: as named in sharing.mig.gpu, else from model and memory."""
    assert gpus.sharing is not None and gpus.sharing.mig is not None
    if gpus.sharing.mig.gpu is not None:
        return MIG_GPUS[gpus.sharing.mig.gpu]
    return mig_gpu_of(gpus.model, gpus.memory_gb)


def check_gpu_sharing(r: Resolution) -> None:
    """Each node type's sharing, and that of the GPUs a cluster.nodes entry overrides."""
    for type_name, node_type in r.spec.node_types.items():
        _check(r, node_type, ["node_types", type_name, "gpus", "sharing"])
    for index, node_type in r.cluster.overridden_types.items():
        if r.spec.nodes[index].gpus is not None:
            _check(r, node_type, ["nodes", index, "gpus", "sharing"])


def check_one_sharing_gres(r: Resolution) -> None:
    """Shards and MPS in one Slurm cluster (GresTypes=gpu,shard,mps): seen on the lab's 26.05, a
    shard job then runs without CUDA_VISIBLE_DEVICES (the MPS plugin, holding nothing of the job,
    unsets what the shard plugin set) and an MPS job gets CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=0."""
    cluster = r.cluster
    for owner in (Owner.SLURM, Owner.SLURM_ON_KUBERNETES):
        # shard / mps -> where the first host sharing that way gets it: its node type, or the
        # cluster.nodes entry that overrides its GPUs.
        found: dict[str, tuple[list[str | int], str]] = {}
        for host in cluster.hosts:
            gpus = cluster.node_type(host).gpus
            if cluster.owner_of.get(host) != owner or gpus is None or gpus.sharing is None:
                continue
            entry = cluster.entry_of.get(host)
            if (
                entry is not None
                and entry in cluster.overridden_types
                and r.spec.nodes[entry].gpus is not None
            ):
                where: tuple[list[str | int], str] = (["nodes", entry], f"cluster.nodes[{entry}]")
            else:
                name = cluster.node_type_of[host]
                where = (["node_types", name], f"node type {name}")
            for kind in ("shard", "mps"):
                if getattr(gpus.sharing, kind) is not None:
                    found.setdefault(kind, where)
        if len(found) == 2:
            parts, mps_name = found["mps"]
            r.fail(
                [*parts, "gpus", "sharing", "mps"],
                f"{found['shard'][1]} shares its GPUs by shards and {mps_name} by MPS in one Slurm "
                "cluster: Slurm then runs shard jobs without CUDA_VISIBLE_DEVICES and gives MPS jobs "
                "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=0 (both plugins set and unset the same variables); "
                "share GPUs one of the two ways per Slurm cluster",
            )


def _check(r: Resolution, node_type: NodeType, parts: list[str | int]) -> None:
    gpus = node_type.gpus
    if gpus is None or gpus.sharing is None or gpus.sharing.mig is None:
        return
    mig = gpus.sharing.mig
    if gpus.autodetect == "nvidia":
        r.fail(
            [*parts[:-1], "autodetect"],
            "AutoDetect=nvidia does not find MIG instances (gres.conf(5)): leave autodetect out or "
            "set nvml, which a MIG node type uses anyway",
        )
    gpu = mig_gpu(gpus)
    if gpu is None:
        if mig.gpu is None and no_mig_model(gpus.model) and mig_family(gpus.model) is None:
            r.fail(
                [*parts, "mig"],
                f"{gpus.model} has no MIG (NVIDIA's MIG user guide lists A100, H100, H200, B200, "
                "GB200 and A30): share it with shard or mps (Slurm) or time_slicing (Kubernetes)",
            )
        else:
            known = ", ".join(MIG_GPUS)
            r.fail(
                [*parts, "mig", "gpu"],
                f"which GPU is `{gpus.model}`{_memory(gpus)}? name it for its MIG profiles: one of {known}",
            )
        return
    if mig.per_gpu:
        seen: dict[int, int] = {}
        for position, entry in enumerate(mig.per_gpu):
            for index in gpu_indexes(entry.gpus):
                if index >= gpus.count:
                    r.fail(
                        [*parts, "mig", "per_gpu", position, "gpus"],
                        f"GPU {index}: the node has {gpus.count} (0-{gpus.count - 1})",
                    )
                elif index in seen:
                    r.fail(
                        [*parts, "mig", "per_gpu", position, "gpus"],
                        f"GPU {index} is also in per_gpu[{seen[index]}]: each GPU has one layout",
                    )
                else:
                    seen[index] = position
        missing = [i for i in range(gpus.count) if i not in seen]
        if missing:
            r.fail(
                [*parts, "mig", "per_gpu"],
                f"GPUs {','.join(map(str, missing))} have no layout: every GPU of a MIG node needs one "
                "(Slurm matches a GPU type to NVML's profile names by substring, so a whole GPU's type "
                "would match MIG instances too; a whole GPU in MIG mode is the 7g profile)",
            )
        for position, entry in enumerate(mig.per_gpu):
            problem = layout_problem(gpu, dict(entry.profiles))
            if problem:
                r.fail([*parts, "mig", "per_gpu", position, "profiles"], problem)
    elif mig.layout is not None:
        problem = layout_problem(gpu, dict(mig.layout))
        if problem:
            r.fail([*parts, "mig", "layout"], problem)


def _memory(gpus: GpuSpec) -> str:
    return f" with {gpus.memory_gb} GB" if gpus.memory_gb else " (no memory_gb)"


def check_tenant_units(r: Resolution) -> None:
    """A tenant's own numbers of shared units name units its scheduler's GPUs make."""
    for index, tenant in enumerate(r.spec.tenants):
        for owner, quota in tenant.gpus.items():
            if not quota.units:
                continue
            made = _units_of(r, owner.value)
            for unit in quota.units:
                if unit not in made:
                    has = ", ".join(sorted(made)) or "none"
                    r.fail(
                        ["tenants", index, "gpus", owner.value, "units", unit],
                        f"no {owner.value} GPU makes `{unit}` (its shared units: {has})",
                    )


def _units_of(r: Resolution, owner: str) -> set[str]:
    """The shared units the GPUs of one scheduler make: shard and mps (Slurm), MIG profiles."""
    found: set[str] = set()
    for host, who in r.cluster.owner_of.items():
        if who.value != owner:
            continue
        gpus = r.cluster.node_type(host).gpus
        if gpus is None or gpus.sharing is None:
            continue
        sharing = gpus.sharing
        if sharing.mig is not None:
            for layout in sharing.mig.layouts(gpus.count):
                found.update(layout)
        if owner != "kubernetes":
            found.update(kind for kind in ("shard", "mps") if getattr(sharing, kind) is not None)
    return found
