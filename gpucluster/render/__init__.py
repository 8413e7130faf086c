"""Renderers: Cluster -> {relative path: file content}. One entry point serves the CLI,
the Ansible roles and the Pulumi stacks, so every consumer gets byte-identical files."""

from __future__ import annotations

from gpucluster.cluster import Cluster
from gpucluster.render.files import sync_tree, write_tree


def render_files(cluster: Cluster, only: list[str] | None = None) -> dict[str, str]:
    """Every generated file of the cluster, keyed by path relative to the output directory."""
    from gpucluster.layers import renderers

    files: dict[str, str] = {}
    for name, renderer in renderers(cluster).items():
        if only and name not in only:
            continue
        files.update(renderer(cluster))
    return dict(sorted(files.items()))


__all__ = ["render_files", "sync_tree", "write_tree"]
