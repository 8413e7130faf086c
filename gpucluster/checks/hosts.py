"""Checks of the hosts: node types' GPU device lists, the controllers, and every host of hosts.yml with a part in the cluster."""

from __future__ import annotations

import re

import hostlist

from gpucluster.errors import Problem
from gpucluster.hostlists import compress, expand
from gpucluster.model.cluster import Cluster, device_list_problem
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
    if gpus.types is not None and not _check_types(r, node_type, parts):
        return
    if effective_autodetect(gpus.autodetect, gpus.sharing) == "off" and not gpus.devices:
        r.fail([*parts, "devices"], "device files are required unless autodetect is nvml")
        return
    if gpus.devices:
        problem = device_list_problem(gpus.devices, gpus.count)
        if problem:
            r.fail([*parts, "devices"], problem)


def _check_types(r: Resolution, node_type: NodeType, parts: list[str | int]) -> bool:
    """GPUs of several types on one node: at least two types, each named once, their counts and
    device files adding up to the node's; no sharing (shards, MPS and MIG are of one type)."""
    gpus = node_type.gpus
    assert gpus is not None and gpus.types is not None
    types = gpus.types
    ok = True
    if len(types) < 2:
        r.fail([*parts, "types"], "types lists GPUs of several types: for one type, say model and count")
        return False
    if gpus.model is not None:
        r.fail([*parts, "model"], "with types, each type names its model: leave gpus.model out")
        ok = False
    if gpus.sharing is not None:
        r.fail(
            [*parts, "sharing"],
            "shards, MPS and MIG share GPUs of one type: a node of several GPU types shares none "
            "(give the shared GPUs a node type of their own)",
        )
        ok = False
    models = [t.model for t in types]
    for index, kind in enumerate(types):
        if models.index(kind.model) != index:
            r.fail([*parts, "types", index, "model"], f"{kind.model} is listed twice: give it one entry")
            ok = False
    total = sum(t.count for t in types)
    if total != gpus.count:
        r.fail([*parts, "count"], f"count is {gpus.count} but the types have {total} GPUs: leave count out")
        ok = False
    given = [t.devices is not None for t in types]
    if any(given) and not all(given):
        index = given.index(False)
        r.fail([*parts, "types", index, "devices"], "give every type its device files, or none (autodetect)")
        return False
    if not all(given):
        return ok
    seen: dict[str, int] = {}
    for index, kind in enumerate(types):
        assert kind.devices is not None
        try:
            names = expand(kind.devices)
        except hostlist.BadHostlist as exc:
            r.fail([*parts, "types", index, "devices"], f"not a valid device list: {exc}")
            return False
        if len(names) != kind.count:
            r.fail(
                [*parts, "types", index, "devices"],
                f"{kind.devices} names {len(names)} device(s) but this type's count is {kind.count}",
            )
            ok = False
        for name in names:
            if name in seen:
                r.fail(
                    [*parts, "types", index, "devices"],
                    f"{name} is also a device of {types[seen[name]].model}: each GPU has one type",
                )
                return False
            seen[name] = index
    if ok and gpus.devices is not None and set(expand(gpus.devices)) != set(seen):
        r.fail(
            [*parts, "devices"],
            f"{gpus.devices} is not the types' device files ({compress(seen)}): leave devices out",
        )
        ok = False
    return ok


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


def host_warnings(cluster: Cluster) -> list[Problem]:
    """What the hosts' settings allow but is worth a word: a node state Slurm advises against."""
    file = cluster.inventory.cluster_file
    return [
        file.problem(
            f"cluster.nodes[{index}].state",
            "State=IDLE: slurmctld counts these nodes idle before their slurmd registers (Slurm's "
            "documentation advises UNKNOWN, the default, which slurmd's registration makes IDLE)",
        )
        for index, entry in enumerate(cluster.spec.nodes)
        if entry.state == "idle"
    ]
