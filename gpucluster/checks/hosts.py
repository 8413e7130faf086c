"""Checks of the hosts: node types' GPU device lists, the controllers, and every host of hosts.yml with a part in the cluster."""

from __future__ import annotations

import re

from gpucluster.hostlists import compress
from gpucluster.model.cluster import device_list_problem
from gpucluster.model.sharing import effective_autodetect
from gpucluster.model.spec import (
    CONTROLLER_ADDR,
    DBD_ADDR,
    NODE_ADDR,
    NODE_HOSTNAME,
    SLURM_ADDRESS_VARS,
    NodeType,
)
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
        if host in r.group_names:
            hosts = r.inv.members(host)
            r.fail(
                ["slurm", "controller", index],
                f"`{host}` is a group of {r.inv.hosts_file.file}: name the controllers themselves, the "
                f"primary first (e.g. `controller: [{', '.join(hosts[:2]) or 'ctl01, ctl02'}]`)",
            )
        elif host not in r.inv.hostvars:
            r.fail(
                ["slurm", "controller", index],
                f"controller `{host}` is not a host of {r.inv.hosts_file.file}",
            )
    _one_controller_of_a_group(r)
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


def _one_controller_of_a_group(r: Resolution) -> None:
    """`controller: ctl01`, one name where hosts.yml groups ctl01 with hosts that have no part in
    Slurm: the others were meant as backups (a list names them; a single name makes no backup)."""
    slurm = r.spec.slurm
    raw = r.file.data.get("cluster", {}).get("slurm", {}) if isinstance(r.file.data, dict) else {}
    if not isinstance(raw, dict) or not isinstance(raw.get("controller"), str) or len(slurm.controller) != 1:
        return
    primary = slurm.controller[0]
    roles = {*r.cluster.node_type_of, *slurm.login, primary}
    if slurm.accounting is not None:
        roles.add(slurm.accounting.host)
    for group, hosts in sorted(r.inv.group_hosts.items()):
        idle = [h for h in hosts if h not in roles] if primary in hosts else []
        if idle:
            r.fail(
                ["slurm", "controller"],
                f"one controller, `{primary}`, where {r.inv.hosts_file.file} groups it in `{group}` with "
                f"{', '.join(idle)}, which Slurm gives no part: to make {'it a backup' if len(idle) == 1 else 'them backups'}, "
                f"list {'it' if len(idle) == 1 else 'them'} after the primary (`controller: [{', '.join([primary, *idle])}]`), "
                f"or write `controller: [{primary}]` to run no backup",
            )
            return


def check_roles(r: Resolution, layer_parts: dict[str, set[str]] | None = None) -> None:
    """Every host of hosts.yml has a part in cluster.yml: a host in none is a mistake (a group
    left out of cluster.nodes, a misspelt controller) that would otherwise pass unnoticed.
    `layer_parts`: the hosts each layer's section gives a part (the monitoring host), by what it is."""
    slurm = r.spec.slurm
    parts = layer_parts or {}
    used = set(r.cluster.node_type_of) | set(slurm.controller) | set(slurm.login)
    for given in parts.values():
        used |= given
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
                f"controller, login, accounting, REST API{''.join(f', {what}' for what in sorted(parts))} or "
                "storage host (give them one, or remove them)",
            )
        )


_ADDRESS_RE = re.compile(r"^[A-Za-z0-9_.:%-]+$")


def check_addresses(r: Resolution) -> None:
    """The addresses hosts.yml gives Slurm's daemons: one name or IP address each (no blank,
    comma or bracket: Slurm reads them as hostlists), on the hosts that have that part."""
    slurm = r.spec.slurm
    holders = {
        NODE_ADDR: set(r.cluster.node_type_of),
        NODE_HOSTNAME: set(r.cluster.node_type_of),
        CONTROLLER_ADDR: set(slurm.controller),
        DBD_ADDR: {slurm.accounting.host} if slurm.accounting else set(),
    }
    for host, variables in r.inv.hostvars.items():
        for var, who in SLURM_ADDRESS_VARS.items():
            if var not in variables:
                continue
            value = variables[var]
            path = f"{r.inv.declared_at.get(host, 'all')}.{var}"
            if not isinstance(value, str) or not _ADDRESS_RE.match(value):
                r.problems.append(
                    r.inv.hosts_file.problem(path, f"{host}: {var} must be one host name or IP address")
                )
            elif host not in holders[var]:
                r.problems.append(
                    r.inv.hosts_file.problem(path, f"{host}: {var} is for {who}, which it is not")
                )
