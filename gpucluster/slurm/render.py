"""Slurm files: slurm.conf, topology.conf or topology.yaml, gres.conf, cgroup.conf, healthcheck.conf."""

from __future__ import annotations

from dataclasses import dataclass

from gpucluster import yamlout
from gpucluster.cluster import Cluster
from gpucluster.hostlists import compress
from gpucluster.model import NodeType, Owner
from gpucluster.render.health import HEALTH_CONF, HEALTH_PROGRAM, bare_metal_health_conf, health_timeout
from gpucluster.render.templating import header, render_template
from gpucluster.slurm.accounts import desired_associations
from gpucluster.slurm.gpus import gres_lines, per_gpu_defaults
from gpucluster.slurm.releases import configless_serves_topology_yaml
from gpucluster.slurm.restapi import controller_key_path

# Topology names in topology.yaml. Slurm on Kubernetes places each dynamic node with its Topology=
# option, `<topology>:<unit>` (gpucluster.k8s.objects.slinky_topology_spec), which names these.
TREE_TOPOLOGY = "fabric-tree"
BLOCK_TOPOLOGY = "nvlink-blocks"

# What slurmctld sends a configless slurmd (Slurm 22.05, src/slurmctld/proc_req.c
# slurmd_config_files): never Prolog, Epilog or HealthCheckProgram scripts, nor our healthcheck.conf.
CONFIGLESS_SERVED = (
    "slurm.conf", "acct_gather.conf", "cgroup.conf", "cli_filter.lua", "ext_sensors.conf",
    "gres.conf", "helpers.conf", "job_container.conf", "knl_cray.conf", "mpi.conf", "oci.conf",
    "plugstack.conf", "topology.conf",
)  # fmt: skip
# Every file render_slurm may install in /etc/slurm (accounts.yaml stays with slurm_accounts).
SLURM_FILES = (
    "slurm.conf", "cgroup.conf", "plugstack.conf", "gres.conf", "topology.conf", "topology.yaml", HEALTH_CONF,
)  # fmt: skip


@dataclass(frozen=True)
class NodeLine:
    hosts: str
    type_name: str
    node_type: NodeType


def topology_kind(cluster: Cluster) -> str | None:
    """`tree`, `block` or None: the default topology Slurm should use for these hosts."""
    present = {"block": bool(cluster.blocks), "tree": bool(cluster.switches)}
    chosen = cluster.spec.fabric.default
    if chosen != "auto" and present[chosen]:
        return chosen
    return next((kind for kind in ("block", "tree") if present[kind]), None)


def uses_topology_yaml(cluster: Cluster) -> bool:
    return cluster.release.topology_yaml and topology_kind(cluster) is not None


def block_sizes(cluster: Cluster) -> list[int]:
    sizes = cluster.spec.fabric.block_sizes
    if sizes:
        return list(sizes)
    return [min(len(hosts) for hosts in cluster.blocks.values())] if cluster.blocks else []


def configless_served(cluster: Cluster) -> list[str]:
    """The files of SLURM_FILES that slurmctld serves to a configless slurmd of this release."""
    served = (
        [*CONFIGLESS_SERVED, "topology.yaml"]
        if configless_serves_topology_yaml(cluster.version)
        else CONFIGLESS_SERVED
    )
    return [name for name in SLURM_FILES if name in served]


def conf_server(cluster: Cluster) -> str:
    """slurmd's `--conf-server` value: the controllers in priority order, at SlurmctldPort's default."""
    return ",".join(cluster.spec.slurm.controller)


def slurmctld_parameters(cluster: Cluster) -> tuple[str, dict[str, str | int]]:
    """SlurmctldParameters (enable_configless first, then the site's own from `extra`) and the rest
    of `extra`: two SlurmctldParameters lines would leave Slurm only the last one."""
    slurm = cluster.spec.slurm
    extra = dict(slurm.extra)
    site = str(extra.pop("SlurmctldParameters", "")) if slurm.configless else ""
    values = (["enable_configless"] if slurm.configless else []) + [v for v in site.split(",") if v]
    return ",".join(dict.fromkeys(values)), extra


def node_lines(cluster: Cluster) -> list[NodeLine]:
    return [
        NodeLine(compress(hosts), type_name, cluster.spec.node_types[type_name])
        for type_name, hosts in sorted(cluster.hosts_by_type.items())
    ]


def _context(cluster: Cluster) -> dict[str, object]:
    slurm = cluster.spec.slurm
    has_gpus = any(cluster.spec.node_types[t].gpus for t in cluster.hosts_by_type)
    ctld_parameters, extra = slurmctld_parameters(cluster)
    return {
        "header": header(cluster.name),
        "cluster": cluster,
        "spec": cluster.spec,
        "slurm": slurm,
        "node_lines": node_lines(cluster),
        "partitions": [
            (p, compress(cluster.partitions[p.name]), *per_gpu_defaults(cluster, p))
            for p in cluster.spec.partitions
            if p.name in cluster.partitions
        ],
        "gres_lines": gres_lines,
        "topology": topology_kind(cluster),
        "topology_yaml": uses_topology_yaml(cluster),
        "switches": [(s.name, compress(s.switches), compress(s.nodes)) for s in cluster.switches],
        "blocks": [(name, compress(hosts)) for name, hosts in sorted(cluster.blocks.items())],
        "block_sizes": block_sizes(cluster),
        "tree_topology": TREE_TOPOLOGY,
        "block_topology": BLOCK_TOPOLOGY,
        "dynamic_nodes": False,
        "has_gpus": has_gpus,
        "release": cluster.release,
        "task_plugin": ",".join(f"task/{name}" for name in slurm.task_plugins),
        "jobacct_gather": "cgroup" if slurm.proctrack == "cgroup" else "linux",
        "gres_types": ["gpu"] if has_gpus else [],
        "health_program": HEALTH_PROGRAM,
        "health_timeout": health_timeout(cluster, slurm.health) if slurm.health else None,
        "jwt_key": controller_key_path(slurm) if slurm.rest_api else None,
        "slurmctld_parameters": ctld_parameters,
        "extra": extra,
    }


def render_topology_yaml(cluster: Cluster, dynamic_nodes: bool = False) -> str | None:
    """topology.yaml (Slurm >= 25.05 format) whatever the target version.

    With `dynamic_nodes` (Slurm on Kubernetes) it defines the topologies - switch tree with its
    children, blocks with block_sizes - and names no node. Slinky's slurmd pods are Slurm dynamic
    nodes called `<nodeset>-<ordinal>`, never the inventory host names, so a `nodes:` list of hosts
    would name nodes that do not exist in that Slurm. Slurm documents the other way for dynamic nodes
    (dynamic_nodes.html, "Dynamic Nodes + Topology"): each node joins topologies defined in
    topology.yaml through its `Topology=<topology>:<unit>,...` node option (Slurm 25.05+), and
    Slinky's operator sets it from the Kubernetes node annotation `topology.slinky.slurm.net/spec`
    (gpucluster.k8s.objects.slinky_topology_spec), which names the leaf switch and the block defined
    here. Slurm accepts such definitions (topology/tree switch_record.c, topology/block block_record.c
    of 25.11): a switch with neither nodes nor children is an empty leaf
    switch, the unit of a tree must be a leaf, and blocks may start empty when block_sizes is set
    (always rendered here; the smallest block otherwise).
    """
    context = _context(cluster)
    if context["topology"] is None:
        return None
    if dynamic_nodes:
        context["dynamic_nodes"] = True
        context["switches"] = [(s.name, compress(s.switches), "") for s in cluster.switches]
        context["blocks"] = [(name, "") for name in sorted(cluster.blocks)]
    return render_template("slurm/topology.yaml.j2", **context)


def render_accounts(cluster: Cluster) -> str:
    """The associations the slurm_accounts role makes true (YAML, sorted)."""
    return header(cluster.name) + "\n" + yamlout.dump(desired_associations(cluster), width=80)


def render_slurm(cluster: Cluster) -> dict[str, str]:
    """Bare-metal Slurm's files, naming only the hosts it owns; none when it owns no host."""
    cluster = cluster.owned_by(Owner.SLURM)
    if not cluster.hosts:
        return {}
    context = _context(cluster)
    files = {
        "slurm/accounts.yaml": render_accounts(cluster),
        "slurm/slurm.conf": render_template("slurm/slurm.conf.j2", **context),
        "slurm/cgroup.conf": render_template("slurm/cgroup.conf.j2", **context),
        "slurm/plugstack.conf": render_template("slurm/plugstack.conf.j2", **context),
    }
    if context["has_gpus"]:
        files["slurm/gres.conf"] = render_template("slurm/gres.conf.j2", **context)
    health = bare_metal_health_conf(cluster)
    if health is not None:
        files[f"slurm/{HEALTH_CONF}"] = health
    if context["topology_yaml"]:
        files["slurm/topology.yaml"] = render_template("slurm/topology.yaml.j2", **context)
    elif context["topology"]:
        files["slurm/topology.conf"] = render_template("slurm/topology.conf.j2", **context)
    return files
