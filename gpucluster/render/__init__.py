"""Renderers: Cluster -> {relative path: file content}. One entry point serves the CLI,
the Ansible roles and the Pulumi stacks, so every consumer gets byte-identical files."""

from __future__ import annotations

from collections.abc import Callable

from gpucluster.cluster import Cluster
from gpucluster.k8s.render import render_helm, render_kubernetes
from gpucluster.render.files import write_tree
from gpucluster.render.slurm import render_slurm

Renderer = Callable[[Cluster], dict[str, str]]

# Each renderer owns a top-level folder of the output tree.
RENDERERS: dict[str, Renderer] = {
    "slurm": render_slurm,
    "kubernetes": render_kubernetes,
    "helm": render_helm,
}


def render_files(cluster: Cluster, only: list[str] | None = None) -> dict[str, str]:
    """Every generated file of the cluster, keyed by path relative to the output directory."""
    files: dict[str, str] = {}
    for name, renderer in RENDERERS.items():
        if only and name not in only:
            continue
        files.update(renderer(cluster))
    return dict(sorted(files.items()))


__all__ = ["RENDERERS", "render_files", "write_tree"]
