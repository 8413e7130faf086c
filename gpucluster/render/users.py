"""hosts/users.yaml: the Unix groups and users every Slurm host gets with the same ids (cluster.groups,
cluster.users), applied by the users role. Private groups are written out, so the role needs no
model of its own. With shared homes (cluster.storage), `shared_homes` says which one host creates
the homes of each shared filesystem; the other hosts that mount it create the accounts only."""

from __future__ import annotations

from typing import Any

from gpucluster import yamlout
from gpucluster.model.cluster import Cluster
from gpucluster.model.storage import SharedFilesystem, filesystem_of, home_directory
from gpucluster.render.templating import header

USERS_FILE = "hosts/users.yaml"


def home_creator(fs: SharedFilesystem, hosts: list[str]) -> str:
    """The one host that creates homes on a shared filesystem: its NFS server (root there is not
    squashed), else the first host in name order that mounts it."""
    return fs.nfs_server.host if fs.nfs_server else hosts[0]


def shared_homes(cluster: Cluster, homes: list[str]) -> list[dict[str, Any]]:
    """The shared filesystems holding some home that bare-metal hosts mount."""
    storage = cluster.spec.storage
    holding = {fs.name: fs for home in homes if (fs := filesystem_of(home, storage))}
    entries = []
    for fs in storage:
        hosts = cluster.storage_hosts.get(fs.name, [])
        if fs.name in holding and hosts:
            entries.append({"mount": fs.mount, "created_on": home_creator(fs, hosts), "hosts": list(hosts)})
    return entries


def desired_accounts(cluster: Cluster) -> dict[str, Any]:
    """Groups (declared, then users' private ones), users in inventory order, and the shared homes."""
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
            "home": home_directory(u.name, u.home, spec.storage),
            "ssh_authorized_keys": list(u.ssh_authorized_keys),
        }
        for u in spec.users
    ]
    accounts: dict[str, Any] = {"groups": groups, "users": users}
    homes = [home_directory(u.name, u.home, spec.storage) for u in spec.users]
    shared = shared_homes(cluster, homes)
    if shared:
        accounts["shared_homes"] = shared
    return accounts


def render_users(cluster: Cluster) -> dict[str, str]:
    """Nothing when the inventory declares no accounts (a directory service provides them)."""
    if not cluster.spec.users and not cluster.spec.groups:
        return {}
    text = header(cluster.name) + "\n" + yamlout.dump(desired_accounts(cluster), width=4096)
    return {USERS_FILE: text}
