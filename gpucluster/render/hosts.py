"""The hosts/ folder: files for the roles that set up the hosts themselves rather than Slurm."""

from __future__ import annotations

from gpucluster.cluster import Cluster
from gpucluster.render.node_ssh import render_node_ssh
from gpucluster.render.users import render_users


def render_hosts(cluster: Cluster) -> dict[str, str]:
    return {**render_users(cluster), **render_node_ssh(cluster)}
