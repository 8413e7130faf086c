"""The one place that composes the core model with the layers built on it, and runs every check.

Dependencies run one way: the layers (Slurm, node software, Kubernetes, cloud, monitoring) import
the ground floor (gpucluster.model) and the resolver, and nothing below this module imports it.
CHECKS is every step from a parsed cluster.yml to a valid Cluster, core and layer alike, in the
order it runs; LAYERS names each optional section of cluster.yml with its model, renderers,
warnings and summaries.
"""

from __future__ import annotations

import gc
import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError, create_model

from gpucluster.checks.fabric import (
    check_block_sets,
    check_block_sizes,
    check_nvlink_domains,
    check_partition_topologies,
    check_split_tree,
    check_topology_default,
    core_warnings,
)
from gpucluster.checks.hosts import (
    check_addresses,
    check_controllers,
    check_gpu_devices,
    check_roles,
    host_warnings,
)
from gpucluster.checks.partitions import check_default_partition, check_partitioned, partition_warnings
from gpucluster.checks.pools import check_pools
from gpucluster.checks.power import check_power, check_power_release
from gpucluster.checks.sharing import check_gpu_sharing, check_one_sharing_gres, check_tenant_units
from gpucluster.checks.storage import check_storage
from gpucluster.checks.tenants import check_quotas, check_tenant_cycles, check_tenants
from gpucluster.checks.users import check_users
from gpucluster.errors import InventoryError, Problem, format_path
from gpucluster.inventory import load_inventory
from gpucluster.model.base import Update, spec
from gpucluster.model.cluster import Cluster
from gpucluster.model.spec import (
    CLOUD_SECTION,
    KUBERNETES_SECTION,
    MONITORING_SECTION,
    ClusterFile,
    ClusterSpec,
)
from gpucluster.nodesoftware.checks import check_node_software
from gpucluster.resolve import (
    Resolution,
    parse_spec,
    pydantic_problems,
    resolve,
    resolve_blocks,
    resolve_nodes,
    resolve_partitions,
    resolve_tenant_gpus,
    resolve_tree,
)
from gpucluster.slurm import checks as slurm
from gpucluster.slurm import sharing as slurm_sharing
from gpucluster.slurm.container_checks import check_containers

Step = Callable[[Resolution], None]


def load_ref(ref: str) -> Any:
    module, name = ref.split(":")
    return getattr(importlib.import_module(module), name)


# Optional layers are named "module:function": a layer costs more to import than validating a
# whole inventory without it (the cloud model alone, more than a superpod), so it loads when used.
def _layer_check(ref: str) -> Step:
    def run(resolution: Resolution) -> None:
        resolution.problems += load_ref(ref)(resolution.cluster)

    return run


def _every_host_has_a_part(resolution: Resolution) -> None:
    parts = {
        layer.part: set(load_ref(layer.part_hosts)(resolution.cluster))
        for layer in LAYERS
        if layer.part_hosts and getattr(resolution.spec, layer.key, None) is not None
    }
    check_roles(resolution, parts)


def _layer_lines(resolution: Resolution) -> None:
    resolution.problems += layer_slurm_conf_problems(resolution.cluster)


@dataclass(frozen=True)
class Check:
    name: str  # what it resolves or checks, as a reader looks for it
    run: Step
    section: str | None = None  # runs only when cluster.<section> is given


# Every step from a parsed cluster.yml to a valid Cluster, in the order it runs: the resolve_* steps
# fill in the Cluster that the checks after them read. Problems are sorted before they are shown.
CHECKS: tuple[Check, ...] = (
    Check("node groups: hosts, node types, owners", resolve_nodes),
    Check("GPU device lists", check_gpu_devices),
    Check("GPU sharing: MIG layouts", check_gpu_sharing),
    Check("GPU sharing: shards or MPS per Slurm cluster", check_one_sharing_gres),
    Check("controllers", check_controllers),
    Check("partitions: their hosts", resolve_partitions),
    Check("partitions: every Slurm host in one", check_partitioned),
    Check("partitions: one default", check_default_partition),
    Check("switch tree", resolve_tree),
    Check("switch tree: one root", check_split_tree),
    Check("NVLink blocks", resolve_blocks),
    Check("default topology", check_topology_default),
    Check("block sets", check_block_sets),
    Check("block sizes", check_block_sizes),
    Check("partitions: their topologies", check_partition_topologies),
    Check("NVLink domains", check_nvlink_domains),
    Check("Unix users and groups", check_users),
    Check("tenants", check_tenants),
    Check("tenants: parents", check_tenant_cycles),
    Check("tenants: GPUs per scheduler", resolve_tenant_gpus),
    Check("tenants: quotas and limits", check_quotas),
    Check("tenants: shared units", check_tenant_units),
    Check("Slurm: plugins", slurm.check_plugins),
    Check("Slurm: release", slurm.check_release),
    Check("Slurm: login hosts", slurm.check_login),
    Check("Slurm: ssh to compute nodes", slurm.check_node_ssh),
    Check("Slurm: containers", check_containers),
    Check("Slurm: accounting host", slurm.check_accounting_host),
    Check("Slurm: REST API", slurm.check_rest_api),
    Check("Slurm: QOS", slurm.check_qos),
    Check("Slurm: configless", slurm.check_configless),
    Check("Slurm: GPUs", slurm.check_gpus),
    Check("Slurm: shared GPUs", slurm_sharing.check_sharing),
    Check("Slurm: extra keys", slurm.check_extra),
    Check("Slurm: one way of enforcing memory", slurm.check_memory_enforcement),
    Check("Slurm: prologs and epilogs", slurm.check_prologs),
    Check("Slurm: daemons", slurm.check_daemons),
    Check("Slurm: power saving", slurm.check_power_save),
    Check("power-saved nodes: BMCs, clouds, ResumeTimeout", check_power),
    Check("power saving: keys of the release", check_power_release),
    Check("the return-to-service gate", slurm.check_gate),
    Check("shared pools: hosts, owners, bounds", check_pools),
    Check("Slurm: keys of the release", slurm.check_release_keys),
    Check("Slurm: node and partition options", slurm.check_options),
    Check("Slurm: values Slurm reads back", slurm.check_values),
    Check("Slurm: the site's SPANK plugins", slurm.check_plugstack),
    Check("GPU node software", check_node_software),
    Check("shared storage: mounts and their hosts", check_storage),
    Check("Slurm: the controllers' shared state", slurm.check_state_save),  # reads storage_hosts
    Check("Kubernetes", _layer_check("gpucluster.k8s.checks:check_kubernetes"), "kubernetes"),
    Check(
        "shared pools: Kueue flavor and queues",
        _layer_check("gpucluster.k8s.pools:check_pool_kueue"),
        "kubernetes",
    ),
    # After Kubernetes: the cloud checks read the Kubernetes section (who owns the GPU driver).
    Check("cloud", _layer_check("gpucluster.cloud.guardrails:check_cloud"), "cloud"),
    Check("monitoring", _layer_check("gpucluster.monitoring.checks:check_monitoring"), "monitoring"),
    # After the layers: a layer's section gives hosts a part too (the monitoring host).
    Check("every host has a part", _every_host_has_a_part),
    Check("addresses of the hosts for Slurm", check_addresses),
    Check("slurm.conf lines of the layers", _layer_lines),
)


@dataclass(frozen=True)
class Layer:
    key: str  # its section under `cluster:`
    description: str
    update: Update
    model: str  # "module:Class" validating the section
    renderers: dict[str, str] = field(default_factory=dict)  # output folder -> "module:function"
    warnings: str | None = None  # "module:function": what is valid but worth a word (Problem list)
    summary: str | None = None  # "module:function": its entry in `show --json`
    summary_table: str | None = None  # "module:function": its table in `show`
    # "module:function": the lines it adds to bare-metal Slurm's slurm.conf, one section of
    # (key, value) pairs ("#": a comment); the core renderer writes them and knows no layer.
    slurm_conf: str | None = None
    # "module:function": the hosts of hosts.yml its section gives a part, and what that part is
    # called (a host with no part anywhere is refused).
    part_hosts: str | None = None
    part: str = ""


LAYERS = (
    Layer(
        "kubernetes",
        KUBERNETES_SECTION,
        Update.KUBERNETES,
        "gpucluster.k8s.model:KubernetesSpec",
        {
            "kubernetes": "gpucluster.k8s.render:render_kubernetes",
            "helm": "gpucluster.k8s.render:render_helm",
        },
        "gpucluster.k8s.checks:kubernetes_warnings",
        "gpucluster.k8s.summary:summary",
        "gpucluster.k8s.summary:summary_table",
    ),
    Layer(
        "cloud",
        CLOUD_SECTION,
        Update.REBUILD,
        "gpucluster.cloud.model:CloudSpec",
    ),
    Layer(
        "monitoring",
        MONITORING_SECTION,
        Update.SERVICE,
        "gpucluster.monitoring.model:MonitoringSpec",
        {"monitoring": "gpucluster.monitoring.render:render_monitoring"},
        "gpucluster.monitoring.checks:monitoring_warnings",
        summary="gpucluster.monitoring.summary:summary",
        summary_table="gpucluster.monitoring.summary:summary_table",
        slurm_conf="gpucluster.monitoring.slurm_conf:slurm_conf_lines",
        part_hosts="gpucluster.monitoring.checks:monitoring_host",
        part="monitoring",
    ),
)


def _raw_section(data: Any, key: str) -> Any:
    cluster = data.get("cluster") if isinstance(data, dict) else None
    return cluster.get(key) if isinstance(cluster, dict) else None


def load_cluster(directory: str | Path) -> Cluster:
    """Inventory directory -> validated Cluster, or InventoryError listing every problem."""
    # Loading makes many objects and no garbage cycles: the cyclic collector would only rescan
    # them (a quarter of the CPU of validating 20,000 tenants).
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _load_cluster(directory)
    finally:
        if enabled:
            gc.enable()


def _load_cluster(directory: str | Path) -> Cluster:
    inv = load_inventory(directory)
    file = inv.cluster_file
    problems: list[Problem] = []
    core: ClusterSpec | None = None
    try:
        core = parse_spec(file)
    except InventoryError as exc:
        problems += exc.problems
    sections: dict[str, BaseModel] = {}
    for layer in LAYERS:
        raw = _raw_section(file.data, layer.key)
        if raw is None:
            continue
        try:
            model = load_ref(layer.model)
            sections[layer.key] = model.model_validate(raw)
        except ValidationError as exc:
            problems += pydantic_problems(file, exc, ("cluster", layer.key), model)
    if core is None or problems:
        raise InventoryError(problems)
    steps = [check.run for check in CHECKS if check.section is None or check.section in sections]
    cluster, problems = resolve(inv, core.model_copy(update=sections), steps)
    if problems:
        raise InventoryError(problems)
    return cluster


def layer_slurm_conf(cluster: Cluster) -> dict[str, list[tuple[str, object]]]:
    """Section key -> the slurm.conf lines its layer adds, for the layers that add any."""
    found = {
        layer.key: load_ref(layer.slurm_conf)(cluster) for layer in layers_of(cluster) if layer.slurm_conf
    }
    return {key: lines for key, lines in found.items() if lines}


def layer_slurm_conf_problems(cluster: Cluster) -> list[Problem]:
    """A line a layer writes may not also come from the Slurm section: Slurm keeps one of two lines
    of a key (the layer would silently lose), and runs a Prolog or Epilog named twice twice (an
    inventory imported from a slurm.conf gpucluster rendered holds both kinds as the site's)."""
    slurm = cluster.spec.slurm
    programs = {"Prolog": ("prolog", slurm.prolog), "Epilog": ("epilog", slurm.epilog)}
    extra = {key.lower(): key for key in slurm.extra}
    file = cluster.inventory.cluster_file
    problems: list[Problem] = []
    for section, lines in layer_slurm_conf(cluster).items():
        for key, value in lines:
            if key in programs:
                name, values = programs[key]
                problems += [
                    file.problem(
                        format_path(["cluster", "slurm", name, index]),
                        f"{key}={value} is written by cluster.{section}; remove it here (slurmd would run it twice)",
                    )
                    for index, given in enumerate(values)
                    if given == value
                ]
            elif key.lower() in extra:
                problems.append(
                    file.problem(
                        format_path(["cluster", "slurm", "extra", extra[key.lower()]]),
                        f"{key} is written by cluster.{section}; remove it here (Slurm would keep one of the two lines)",
                    )
                )
    return problems


def layers_of(cluster: Cluster) -> list[Layer]:
    return [layer for layer in LAYERS if getattr(cluster.spec, layer.key) is not None]


def layer_warnings(cluster: Cluster) -> list[Problem]:
    """What the core and the layers of a valid cluster find worth a warning (printed, never an
    exit code)."""
    found: list[Problem] = core_warnings(cluster) + partition_warnings(cluster) + host_warnings(cluster)
    for layer in layers_of(cluster):
        if layer.warnings:
            found += load_ref(layer.warnings)(cluster)
    return sorted(set(found), key=lambda p: (p.file, p.line or 0, p.path, p.message))


def layer_summaries(cluster: Cluster) -> dict[str, Any]:
    """Section key -> what `show --json` says of each layer that has something to say."""
    return {layer.key: load_ref(layer.summary)(cluster) for layer in layers_of(cluster) if layer.summary}


def layer_tables(cluster: Cluster) -> list[str]:
    return [load_ref(layer.summary_table)(cluster) for layer in layers_of(cluster) if layer.summary_table]


@cache
def full_model() -> type[ClusterFile]:
    """ClusterFile with every layer's section typed: for the JSON Schema and the key reference."""
    fields: dict[str, Any] = {
        layer.key: (load_ref(layer.model) | None, spec(layer.description, layer.update, default=None))
        for layer in LAYERS
    }
    full_spec = create_model("ClusterSpec", __base__=ClusterSpec, **fields)
    model: type[ClusterFile] = create_model("ClusterFile", __base__=ClusterFile, cluster=(full_spec, ...))
    return model
