"""hosts/users.yaml: the Unix groups and users every Slurm host gets with the same ids (cluster.groups,
cluster.users), applied by the users role. Private groups are written out, so the role needs no
model of its own."""

from __future__ import annotations

from typing import Any

from gpucluster import yamlout
from gpucluster.cluster import Cluster
from gpucluster.render.templating import header

USERS_FILE = "hosts/users.yaml"
HOME_ROOT = "/home"


def desired_accounts(cluster: Cluster) -> dict[str, list[dict[str, Any]]]:
    """Groups (declared, then users' private ones) and users, in inventory order."""
    spec = cluster.spec
    groups = [{"name": g.name, "gid": g.gid} for g in spec.groups]
    groups += [{"name": u.name, "gid": u.uid} for u in spec.users if u.group is None]
    users = [
        {
            "name": u.name,
            "uid": u.uid,
            "group": u.primary_group,
            "groups": list(u.groups),
            "shell": u.shell,
            "home": f"{HOME_ROOT}/{u.name}",
            "ssh_authorized_keys": list(u.ssh_authorized_keys),
        }
        for u in spec.users
    ]
    return {"groups": groups, "users": users}


def render_users(cluster: Cluster) -> dict[str, str]:
    """Nothing when the inventory declares no accounts (a directory service provides them)."""
    if not cluster.spec.users and not cluster.spec.groups:
        return {}
    text = header(cluster.source) + "\n" + yamlout.dump(desired_accounts(cluster), width=4096)
    return {USERS_FILE: text}
