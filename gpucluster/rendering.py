"""Every rendered file of a cluster: Cluster -> {relative path: file content}. One entry point
serves the CLI, the Ansible roles and the Pulumi stacks, so every consumer gets byte-identical files.

Each renderer owns a top-level folder of the output tree: the core's here, the layers' from
gpucluster.layers (loaded only for the layers a cluster uses).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from gpucluster.layers import layer_slurm_conf, layers_of, load_ref
from gpucluster.model.cluster import Cluster
from gpucluster.nodesoftware.render import render_nodes
from gpucluster.render.hosts import render_hosts
from gpucluster.render.power import render_power
from gpucluster.slurm.containers import render_containers
from gpucluster.slurm.render import render_slurm
from gpucluster.slurm.sharing import render_mig

Renderer = Callable[[Cluster], dict[str, str]]

CORE_RENDERERS: dict[str, Renderer] = {
    "slurm": render_slurm,
    # hosts/users.yaml: the Unix accounts the users role creates on every Slurm host;
    # hosts/node_ssh.yaml: who may ssh to compute nodes without a job.
    # hosts/storage.yaml and hosts/nfs-exports/: the shared filesystems and their NFS exports.
    "hosts": render_hosts,
    # containers/: Pyxis' plugstack entry, enroot's configuration and the container roles' settings.
    "containers": render_containers,
    # nodes/: the GPU node software of each node type (role gpu_driver), IMEX domains per block.
    "nodes": render_nodes,
    # mig/: the MIG layouts of bare-metal Slurm's MIG nodes (role gpu_mig).
    "mig": render_mig,
    # power/: gpucluster-power.json, what the power program knows of each power-saved node (role
    # slurm_power, on the controllers).
    "power": render_power,
}


def renderers(cluster: Cluster) -> dict[str, Renderer]:
    """Output folder -> renderer, for the core and the layers this cluster uses."""
    found = dict(CORE_RENDERERS)
    for layer in layers_of(cluster):
        found.update({folder: load_ref(ref) for folder, ref in layer.renderers.items()})
    sections = list(layer_slurm_conf(cluster).values())
    if sections:
        found["slurm"] = partial(render_slurm, layer_sections=sections)
    return found


def render_files(cluster: Cluster, only: list[str] | None = None) -> dict[str, str]:
    """Every generated file of the cluster, keyed by path relative to the output directory."""
    files: dict[str, str] = {}
    for name, renderer in renderers(cluster).items():
        if only and name not in only:
            continue
        files.update(renderer(cluster))
    return dict(sorted(files.items()))
