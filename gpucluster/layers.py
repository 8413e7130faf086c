"""The one place that composes the core model with the layers built on it.

Dependencies run one way: a layer (Kubernetes, cloud) imports the core; the core imports no layer.
Each layer names its section of cluster.yml, the model that validates it, its checks, its
renderers and the lines it adds to slurm.conf, by module path, so a layer is imported only when an
inventory uses it (the cloud SDK-facing model costs more to import than validating a whole superpod
inventory).
"""

from __future__ import annotations

import gc
import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache, partial
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError, create_model

from gpucluster.cluster import Cluster, core_warnings, parse_spec, pydantic_problems, resolve
from gpucluster.errors import InventoryError, Problem, format_path
from gpucluster.inventory import load_inventory
from gpucluster.model import CLOUD_SECTION, KUBERNETES_SECTION, MONITORING_SECTION, ClusterFile, ClusterSpec
from gpucluster.modelbase import Update, spec

Renderer = Callable[[Cluster], dict[str, str]]
Check = Callable[[Cluster], list[Problem]]


@dataclass(frozen=True)
class Layer:
    key: str  # its section under `cluster:`
    description: str
    update: Update
    model: str  # "module:Class" validating the section
    checks: str  # "module:function" run after the core checks
    renderers: dict[str, str] = field(default_factory=dict)  # output folder -> "module:function"
    warnings: str | None = None  # "module:function": what is valid but worth a word (Problem list)
    summary: str | None = None  # "module:function": its entry in `show --json`
    summary_table: str | None = None  # "module:function": its table in `show`
    # "module:function": the lines it adds to bare-metal Slurm's slurm.conf, one section of
    # (key, value) pairs ("#": a comment); the core renderer writes them and knows no layer.
    slurm_conf: str | None = None


LAYERS = (
    Layer(
        "kubernetes",
        KUBERNETES_SECTION,
        Update.KUBERNETES,
        "gpucluster.k8s.model:KubernetesSpec",
        "gpucluster.k8s.checks:check_kubernetes",
        {
            "kubernetes": "gpucluster.k8s.render:render_kubernetes",
            "helm": "gpucluster.k8s.render:render_helm",
        },
        "gpucluster.k8s.checks:kubernetes_warnings",
        "gpucluster.k8s.summary:summary",
        "gpucluster.k8s.summary:summary_table",
    ),
    # After kubernetes: the cloud checks read the Kubernetes section (who owns the GPU driver).
    Layer(
        "cloud",
        CLOUD_SECTION,
        Update.REBUILD,
        "gpucluster.cloud.model:CloudSpec",
        "gpucluster.cloud.guardrails:check_cloud",
    ),
    Layer(
        "monitoring",
        MONITORING_SECTION,
        Update.SERVICE,
        "gpucluster.monitoring.model:MonitoringSpec",
        "gpucluster.monitoring.checks:check_monitoring",
        {"monitoring": "gpucluster.monitoring.render:render_monitoring"},
        "gpucluster.monitoring.checks:monitoring_warnings",
        summary="gpucluster.monitoring.summary:summary",
        summary_table="gpucluster.monitoring.summary:summary_table",
        slurm_conf="gpucluster.monitoring.slurm_conf:slurm_conf_lines",
    ),
)

# Renderers of the core model; each owns a top-level folder of the output tree.
CORE_RENDERERS: dict[str, str] = {
    "slurm": "gpucluster.slurm.render:render_slurm",
    # hosts/users.yaml: the Unix accounts the users role creates on every Slurm host;
    # hosts/node_ssh.yaml: who may ssh to compute nodes without a job.
    # hosts/storage.yaml and hosts/nfs-exports/: the shared filesystems and their NFS exports.
    "hosts": "gpucluster.render.hosts:render_hosts",
    # containers/: Pyxis' plugstack entry, enroot's configuration and the container roles' settings.
    "containers": "gpucluster.slurm.containers:render_containers",
    # nodes/: the GPU node software of each node type (role gpu_driver), IMEX domains per block.
    "nodes": "gpucluster.nodesoftware.render:render_nodes",
}


def _load(ref: str) -> Any:
    module, name = ref.split(":")
    return getattr(importlib.import_module(module), name)


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
            model = _load(layer.model)
            sections[layer.key] = model.model_validate(raw)
        except ValidationError as exc:
            problems += pydantic_problems(file, exc, ("cluster", layer.key), model)
    if core is None or problems:
        raise InventoryError(problems)
    cluster, problems = resolve(inv, core.model_copy(update=sections))
    for layer in LAYERS:
        if layer.key in sections:
            check: Check = _load(layer.checks)
            problems += check(cluster)
    problems += _check_layer_slurm_conf(cluster)
    if problems:
        raise InventoryError(problems)
    return cluster


def layer_slurm_conf(cluster: Cluster) -> dict[str, list[tuple[str, object]]]:
    """Section key -> the slurm.conf lines its layer adds, for the layers that add any."""
    found = {layer.key: _load(layer.slurm_conf)(cluster) for layer in layers_of(cluster) if layer.slurm_conf}
    return {key: lines for key, lines in found.items() if lines}


def _check_layer_slurm_conf(cluster: Cluster) -> list[Problem]:
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
    found: list[Problem] = core_warnings(cluster)
    for layer in layers_of(cluster):
        if layer.warnings:
            found += _load(layer.warnings)(cluster)
    return sorted(set(found), key=lambda p: (p.file, p.line or 0, p.path, p.message))


def layer_summaries(cluster: Cluster) -> dict[str, Any]:
    """Section key -> what `show --json` says of each layer that has something to say."""
    return {layer.key: _load(layer.summary)(cluster) for layer in layers_of(cluster) if layer.summary}


def layer_tables(cluster: Cluster) -> list[str]:
    return [_load(layer.summary_table)(cluster) for layer in layers_of(cluster) if layer.summary_table]


def renderers(cluster: Cluster) -> dict[str, Renderer]:
    """Output folder -> renderer, for the core and the layers this cluster uses."""
    found = {folder: _load(ref) for folder, ref in CORE_RENDERERS.items()}
    for layer in layers_of(cluster):
        found.update({folder: _load(ref) for folder, ref in layer.renderers.items()})
    sections = list(layer_slurm_conf(cluster).values())
    if sections:
        found["slurm"] = partial(found["slurm"], layer_sections=sections)
    return found


@cache
def full_model() -> type[ClusterFile]:
    """ClusterFile with every layer's section typed: for the JSON Schema and the key reference."""
    fields: dict[str, Any] = {
        layer.key: (_load(layer.model) | None, spec(layer.description, layer.update, default=None))
        for layer in LAYERS
    }
    full_spec = create_model("ClusterSpec", __base__=ClusterSpec, **fields)
    model: type[ClusterFile] = create_model("ClusterFile", __base__=ClusterFile, cluster=(full_spec, ...))
    return model
