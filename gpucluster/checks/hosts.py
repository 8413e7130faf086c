"""Checks of the hosts: node types' GPU device lists, the controllers, and every host of hosts.yml with a part in the cluster."""

from __future__ import annotations

from gpucluster.hostlists import compress
from gpucluster.model.cluster import device_list_problem
from gpucluster.model.sharing import effective_autodetect
from gpucluster.model.spec import NodeType
from gpucluster.resolve import Resolution


def check_gpu_devices(r: Resolution) -> None:
    """Each node type's GPU device list, and the GPUs a cluster.nodes entry overrides."""
    for type_name, node_type in r.spec.node_types.items():
        _check_gpus(r, node_type, ["node_types", type_name, "gpus"])
    for index, node_type in r.cluster.overridden_types.items():
        if r.spec.nodes[index].gpus is not None:
            _check_gpus(r, node_type, ["nodes", index, "gpus"])


def _check_gpus(r: Resolution, node_type: NodeType, parts: list[str | int]) -> None:
    gpus = node_type.gpus
    if gpus is None:
        return
    if effective_autodetect(gpus.autodetect, gpus.sharing) == "off" and not gpus.devices:
        r.fail([*parts, "devices"], "device files are required unless autodetect is nvml")
        return
    if gpus.devices:
        problem = device_list_problem(gpus.devices, gpus.count)
        if problem:
            r.fail([*parts, "devices"], problem)


def check_controllers(r: Resolution) -> None:
    """Controllers that are hosts of the inventory, each once, sharing their state when several."""
    slurm = r.spec.slurm
    for index, host in enumerate(slurm.controller):
        if host not in r.inv.hostvars:
            r.fail(
                ["slurm", "controller", index],
                f"controller `{host}` is not a host of {r.inv.hosts_file.file}",
            )
    if len(set(slurm.controller)) != len(slurm.controller):
        r.fail(["slurm", "controller"], "a controller is listed twice")
    elif len(slurm.controller) > 1 and slurm.state_save_location is None:
        # Each controller's own /var/lib/slurm would leave the backup without the jobs.
        r.fail(
            ["slurm", "state_save_location"],
            f"{len(slurm.controller)} controllers ({', '.join(slurm.controller)}) need a "
            "StateSaveLocation they all share: set it to a path on a shared filesystem every "
            "controller mounts read/write",
        )


def check_roles(r: Resolution) -> None:
    """Every host of hosts.yml has a part in cluster.yml: a host in none is a mistake (a group
    left out of cluster.nodes, a misspelt controller) that would otherwise pass unnoticed."""
    slurm = r.spec.slurm
    used = set(r.cluster.node_type_of) | set(slurm.controller) | set(slurm.login)
    used |= {slurm.accounting.host} if slurm.accounting else set()
    used |= {slurm.rest_api.host} if slurm.rest_api else set()
    for fs in r.spec.storage:
        used |= set(r.cluster.storage_hosts.get(fs.name, []))
        used |= {fs.nfs_server.host} if fs.nfs_server else set()
    idle: dict[str, list[str]] = {}
    for host in r.inv.hostvars:
        if host not in used:
            idle.setdefault(r.inv.declared_at.get(host, "all"), []).append(host)
    for path, hosts in idle.items():
        which = f"host `{hosts[0]}` has" if len(hosts) == 1 else f"hosts {compress(hosts)} have"
        r.problems.append(
            r.inv.hosts_file.problem(
                path,
                f"{which} no part in {r.file.file}: in no group of cluster.nodes, and no "
                "controller, login, accounting, REST API or storage host (give them one, or "
                "remove them)",
            )
        )
