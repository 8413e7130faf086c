"""What a GPU site sets for Slurm's GPUs, derived from the node types unless the inventory says:
the cores near each GPU (gres.conf Cores=) and the CPUs and memory a job gets per GPU when it asks
for none (a partition's DefCpuPerGPU and DefMemPerGPU)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpucluster.hostlists import compress, expand
from gpucluster.model.sharing import effective_autodetect
from gpucluster.slurm.sharing import gres_unit_count, shared_gres_lines, shares_unfenced

if TYPE_CHECKING:
    from gpucluster.model.cluster import Cluster
    from gpucluster.model.spec import GpuSpec, NodeType, Partition


def core_range(first: int, last: int) -> str:
    return str(first) if first == last else f"{first}-{last}"


def parse_cores(text: str) -> list[int]:
    """`0-3,8` -> [0, 1, 2, 3, 8] (the model's pattern has checked the form)."""
    cores: list[int] = []
    for item in text.split(","):
        first, _, last = item.partition("-")
        cores.extend(range(int(first), int(last or first) + 1))
    return cores


def devices_in_order(gpus: GpuSpec) -> list[str]:
    """The device files in GPU order (/dev/nvidia0 first); checks made them /dev/nvidia0..N-1."""
    return [f"/dev/nvidia{n}" for n in range(gpus.count)]


def gpu_cores(node_type: NodeType) -> list[str] | None:
    """The cores of each GPU in device order, as Slurm core lists; None: no Cores= (no affinity
    asked, or slurmd detects it)."""
    gpus = node_type.gpus
    if (
        gpus is None
        or effective_autodetect(gpus.autodetect, gpus.sharing) != "off"
        or gpus.affinity == "none"
    ):
        return None
    if isinstance(gpus.affinity, list):
        return list(gpus.affinity)
    if node_type.sockets is None or node_type.cores_per_socket is None:
        # Only a CPU count: which cores sit near which GPU is unknown unless listed.
        return None
    # `socket`, the default: GPUs split evenly over the sockets, in order.
    per_socket = gpus.count // node_type.sockets
    cores = node_type.cores_per_socket
    return [
        core_range(socket * cores, socket * cores + cores - 1)
        for socket in range(node_type.sockets)
        for _ in range(per_socket)
    ]


@dataclass(frozen=True)
class GresLine:
    model: str | None  # gres.conf Type=
    devices: str  # a hostlist of device files
    cores: str | None


def gres_lines(node_type: NodeType) -> list[GresLine]:
    """gres.conf File= lines in device order, one per run of GPUs of one type sharing their cores
    (the order sites write and slurmd numbers the GPUs in)."""
    gpus = node_type.gpus
    assert gpus is not None and gpus.devices is not None
    cores = gpu_cores(node_type)
    if not gpus.types and cores is None:
        return [GresLine(gpus.model, gpus.devices, None)]
    kinds: list[tuple[str | None, str]] = (
        [(t.model, t.devices or "") for t in gpus.types] if gpus.types else [(gpus.model, gpus.devices)]
    )
    type_of: dict[int, str | None] = {}
    for kind, listed in kinds:
        for name in expand(listed):
            type_of[int(name.removeprefix("/dev/nvidia"))] = kind
    order = sorted(type_of)
    key = [(type_of[n], cores[n] if cores is not None else None) for n in order]
    lines: list[GresLine] = []
    start = 0
    for index in range(1, len(order) + 1):
        if index == len(order) or key[index] != key[start]:
            lines.append(
                GresLine(
                    key[start][0], compress(f"/dev/nvidia{n}" for n in order[start:index]), key[start][1]
                )
            )
            start = index
    return lines


def socket_split_problem(node_type: NodeType) -> str | None:
    gpus = node_type.gpus
    if gpus is None or node_type.sockets is None or gpus.count % node_type.sockets == 0:
        return None
    return (
        f"{gpus.count} GPUs do not split evenly over {node_type.sockets} sockets: list the cores of each "
        'GPU (affinity: ["0-13", ...], as `nvidia-smi topo -m` shows them) or say affinity: none'
    )


def share(node_type: NodeType) -> tuple[int, int | None] | None:
    """(CPUs, MiB) per GPU of a node type as Slurm counts its GPUs (MIG instances each one; MiB
    None without memory_mb); None without GPUs."""
    if node_type.gpus is None:
        return None
    units = gres_unit_count(node_type)
    memory = None if node_type.memory_mb is None else node_type.memory_mb // units
    return node_type.total_cpus // units, memory


def gpu_node_types(cluster: Cluster, partition: str) -> list[str]:
    types = {cluster.node_type_of[h] for h in cluster.partitions.get(partition, [])}
    return sorted(t for t in types if cluster.spec.node_types[t].gpus)


def gpu_hardware(cluster: Cluster, partition: str) -> list[tuple[str, NodeType]]:
    """The distinct GPU hardware of a partition's hosts, with its node type's name: their node
    types, with the overrides of their cluster.nodes entries."""
    if not cluster.entry_of:
        return [(t, cluster.spec.node_types[t]) for t in gpu_node_types(cluster, partition)]
    seen: dict[int, tuple[str, NodeType]] = {}
    for host in cluster.partitions.get(partition, []):
        node_type = cluster.node_type(host)
        if node_type.gpus:
            seen.setdefault(id(node_type), (cluster.node_type_of[host], node_type))
    return list(seen.values())


def per_gpu_defaults(cluster: Cluster, partition: Partition) -> tuple[int | None, int | None]:
    """(DefCpuPerGPU, DefMemPerGPU) of a partition: as set (0: none), else the smallest share of
    its GPU hardware, so that a job using every GPU of any of its nodes still fits that node. None
    for a partition without GPU nodes, for CPUs where a node has fewer CPUs than GPUs, and for
    memory where a node has no memory_mb or the partition sets another memory default (Slurm
    takes one of DefMemPerCPU, DefMemPerNode and DefMemPerGPU)."""
    shares = [s for _, t in gpu_hardware(cluster, partition.name) if (s := share(t))]
    if not shares:
        return None, None
    cpus = partition.cpus_per_gpu if partition.cpus_per_gpu is not None else min(c for c, _ in shares)
    memory: int | None = partition.memory_per_gpu_mb
    other_memory_default = (
        partition.def_mem_per_cpu_mb is not None or partition.def_mem_per_node_mb is not None
    )
    if memory is None and not other_memory_default and all(m is not None for _, m in shares):
        if unfenced_sharing(cluster, partition.name):
            return cpus or None, None  # DefMemPerCPU instead (memory_per_cpu)
        memory = min(m for _, m in shares if m is not None)
    return cpus or None, memory or None


def unfenced_sharing(cluster: Cluster, partition: str) -> bool:
    return any(shares_unfenced(t) for _, t in gpu_hardware(cluster, partition))


def memory_per_cpu(cluster: Cluster, partition: Partition) -> int | None:
    """DefMemPerCPU of a partition whose nodes share GPUs by shards or MPS, where it sets no
    memory default: DefMemPerGPU never applies to those jobs (gres/gpu only), which would each
    take a node's whole memory. The smallest memory per CPU of its GPU nodes: a job of one GPU
    and DefCpuPerGPU CPUs then gets about its GPU's share, as with DefMemPerGPU."""
    if (
        partition.memory_per_gpu_mb is not None
        or partition.def_mem_per_cpu_mb is not None
        or partition.def_mem_per_node_mb is not None
        or not unfenced_sharing(cluster, partition.name)
    ):
        return None
    hardware = [t for _, t in gpu_hardware(cluster, partition.name)]
    if not hardware or any(t.memory_mb is None for t in hardware):
        return None
    return min((t.memory_mb or 0) // t.total_cpus for t in hardware) or None


def gres_conf_lines(node_type: NodeType) -> list[str]:
    """gres.conf lines of a NodeName line's hosts (each after `NodeName=<hosts> `): AutoDetect or
    the GPUs' File= lines with their cores, then their shards or MPS shares."""
    gpus = node_type.gpus
    assert gpus is not None
    autodetect = effective_autodetect(gpus.autodetect, gpus.sharing)
    if gpus.sharing is not None and gpus.sharing.mig is not None:
        # NVML reports each instance with its profile; a Count= line would ask for the sanity
        # check Slurm does not support with MIG.
        return [f"AutoDetect={autodetect}"]
    lines = []
    if autodetect != "off":
        lines.append(f"AutoDetect={autodetect}")
        if not gpus.devices:
            lines.extend(f"Name=gpu{_type(model)} Count={count}" for model, count in gpus.kinds())
            return lines + shared_gres_lines(node_type, None)
        # A site's File= lines beside AutoDetect are kept: slurmd checks the detected GPUs by them.
    for gres in gres_lines(node_type):
        cores = f" Cores={gres.cores}" if gres.cores else ""
        lines.append(f"Name=gpu{_type(gres.model)} File={gres.devices}{cores}")
    return lines + shared_gres_lines(node_type, devices_in_order(gpus))


def _type(model: str | None) -> str:
    return f" Type={model}" if model else ""
