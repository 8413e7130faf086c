"""hosts/storage.yaml and hosts/nfs-exports/<server>.exports: the shared filesystems of
cluster.storage as the roles apply them. shared_storage mounts each filesystem on its hosts (a bind
mount of the export on its NFS server), nfs_server installs the exports file of its host."""

from __future__ import annotations

from typing import Any

from gpucluster import yamlout
from gpucluster.model.cluster import Cluster
from gpucluster.model.powered import cloud_hosts
from gpucluster.model.storage import DEFAULT_OPTIONS, SharedFilesystem
from gpucluster.render.templating import header

STORAGE_FILE = "hosts/storage.yaml"
EXPORTS_DIR = "hosts/nfs-exports"
# Root squash: root on a client is nobody on the export (the server's root creates the homes).
# sync: a write is on disk when the client is told so. no_subtree_check: the export is a whole
# filesystem or a directory nobody renames under it.
EXPORT_OPTIONS = "rw,sync,root_squash,no_subtree_check"


def server_address(cluster: Cluster, fs: SharedFilesystem) -> str:
    server = fs.nfs_server
    assert server is not None
    if server.address:
        return server.address
    address = cluster.inventory.hostvars.get(server.host, {}).get("ansible_host")
    return str(address) if address else server.host


def mount_entry(cluster: Cluster, fs: SharedFilesystem) -> dict[str, Any]:
    """What every host of the filesystem does: mount source at mount (`server`, `export`: the NFS
    server bind-mounts its export instead), or check that the site mounted it."""
    entry: dict[str, Any] = {"name": fs.name, "mount": fs.mount, "site_managed": fs.site_managed}
    if fs.nfs_server is not None:
        entry["source"] = f"{server_address(cluster, fs)}:{fs.nfs_server.export}"
        entry["type"] = "nfs"
    elif not fs.site_managed:
        entry["source"] = fs.source
        entry["type"] = fs.type
    if not fs.site_managed:
        entry["options"] = fs.options or DEFAULT_OPTIONS
    entry["server"] = fs.nfs_server.host if fs.nfs_server else None
    entry["export"] = fs.nfs_server.export if fs.nfs_server else None
    entry["hosts"] = mounting_hosts(cluster, fs)
    return entry


def mounting_hosts(cluster: Cluster, fs: SharedFilesystem) -> list[str]:
    """The hosts the shared_storage role mounts it on: not the instances Slurm makes on demand
    (cluster.nodes[].power cloud), which their boot configuration mounts, and whose names no
    server resolves before they exist."""
    instances = set(cloud_hosts(cluster))
    return [h for h in cluster.storage_hosts.get(fs.name, []) if h not in instances]


def export_clients(cluster: Cluster, fs: SharedFilesystem) -> list[str]:
    """Who may mount: the entry's clients, else every host that mounts it but the server."""
    assert fs.nfs_server is not None
    if fs.nfs_server.clients:
        return list(fs.nfs_server.clients)
    return [h for h in mounting_hosts(cluster, fs) if h != fs.nfs_server.host]


def render_exports(cluster: Cluster, server: str, served: list[SharedFilesystem]) -> str:
    """/etc/exports.d/gpucluster.exports of one server: one export per filesystem, one client per
    line (exports(5) continues a line ending in a backslash)."""
    lines = [header(cluster.name)]
    for fs in served:
        assert fs.nfs_server is not None
        clients = export_clients(cluster, fs)
        lines.append(f"# {fs.name}: mounted at {fs.mount}")
        if not clients:
            lines.append(f"# no client mounts {fs.nfs_server.export}: nothing exported")
            continue
        rows = [fs.nfs_server.export, *(f"{client}({EXPORT_OPTIONS})" for client in clients)]
        lines.append(" \\\n    ".join(rows))
    return "\n".join(lines) + "\n"


def render_storage(cluster: Cluster) -> dict[str, str]:
    """Nothing when the inventory shares no filesystem with bare-metal hosts."""
    mounted = [fs for fs in cluster.spec.storage if cluster.storage_hosts.get(fs.name)]
    if not mounted:
        return {}
    by_server: dict[str, list[SharedFilesystem]] = {}
    for fs in mounted:
        if fs.nfs_server is not None:
            by_server.setdefault(fs.nfs_server.host, []).append(fs)
    data = {
        "filesystems": [mount_entry(cluster, fs) for fs in mounted],
        "exports": [
            {"host": server, "paths": [fs.nfs_server.export for fs in served if fs.nfs_server]}
            for server, served in sorted(by_server.items())
        ],
    }
    files = {STORAGE_FILE: header(cluster.name) + "\n" + yamlout.dump(data, width=4096)}
    for server, served in by_server.items():
        files[f"{EXPORTS_DIR}/{server}.exports"] = render_exports(cluster, server, served)
    return files
