"""The `hosts/` folder: what the roles apply to the hosts themselves, beside Slurm's own files:
the Unix accounts (hosts/users.yaml), the shared filesystems (hosts/storage.yaml, the exports of
each NFS server) and who may ssh to the compute nodes without a job (hosts/node_ssh.yaml)."""

from __future__ import annotations

from gpucluster.model.cluster import Cluster
from gpucluster.render.node_ssh import render_node_ssh
from gpucluster.render.storage import render_storage
from gpucluster.render.users import render_users


def render_hosts(cluster: Cluster) -> dict[str, str]:
    return {**render_users(cluster), **render_storage(cluster), **render_node_ssh(cluster)}
