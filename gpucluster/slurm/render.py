"""Slurm files: slurm.conf, topology.conf or topology.yaml, gres.conf, cgroup.conf, healthcheck.conf."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from hostlist import numeric_sort_key

from gpucluster import yamlout
from gpucluster.hostlists import compress, expand
from gpucluster.model.cluster import Cluster, block_topologies, default_topology
from gpucluster.model.powered import node_state
from gpucluster.model.releases import configless_serves_topology_yaml
from gpucluster.model.spec import (
    BLOCK_TOPOLOGY,
    CONTROLLER_ADDR,
    DBD_ADDR,
    FLAT_TOPOLOGY,
    NODE_ADDR,
    NODE_HOSTNAME,
    TREE_TOPOLOGY,
    NodeType,
    Owner,
    Partition,
)
from gpucluster.render.health import (
    HEALTH_CONF,
    HEALTH_PROGRAM,
    REBOOT_PROGRAM,
    bare_metal_health_conf,
    health_timeout,
)
from gpucluster.render.power import power_save_lines
from gpucluster.render.templating import header, render_template
from gpucluster.slurm import keys
from gpucluster.slurm.accounts import desired_associations
from gpucluster.slurm.containers import render_oci
from gpucluster.slurm.gpus import gres_conf_lines, memory_per_cpu, per_gpu_defaults
from gpucluster.slurm.parse import quote_value
from gpucluster.slurm.restapi import controller_key_path
from gpucluster.slurm.settings import (
    TIMEOUT_KEYS,
    job_acct_gather,
    priority_lines,
    prolog_flags,
    scheduler_parameters,
    slurmctld_parameters,
    slurmd_parameters,
)
from gpucluster.slurm.sharing import (
    MPS_CONF,
    accounted_tres,
    gres_types,
    mps_section,
    node_gres,
    render_mps_conf,
)
from gpucluster.slurm.written import FIXED

# Slurm's SlurmctldPort when slurm.conf names none (and gpucluster's default).
DEFAULT_SLURMCTLD_PORT = 6817

# Topology names in topology.yaml (gpucluster.model.spec). Slurm on Kubernetes places each dynamic
# node with its Topology= option, `<topology>:<unit>` (gpucluster.k8s.objects.slinky_topology_spec).
__all__ = ["BLOCK_TOPOLOGY", "TREE_TOPOLOGY"]

# What slurmctld sends a configless slurmd (Slurm 22.05, src/slurmctld/proc_req.c
# slurmd_config_files): never Prolog, Epilog or HealthCheckProgram scripts, nor our healthcheck.conf.
CONFIGLESS_SERVED = (
    "slurm.conf", "acct_gather.conf", "cgroup.conf", "cli_filter.lua", "ext_sensors.conf",
    "gres.conf", "helpers.conf", "job_container.conf", "knl_cray.conf", "mpi.conf", "oci.conf",
    "plugstack.conf", "topology.conf",
)  # fmt: skip
# Every file render_slurm may install in /etc/slurm (accounts.yaml stays with slurm_accounts).
SLURM_FILES = (
    "slurm.conf", "cgroup.conf", "plugstack.conf", "gres.conf", "topology.conf", "topology.yaml", HEALTH_CONF,
    "oci.conf", MPS_CONF,
)  # fmt: skip


@dataclass(frozen=True)
class NodeLine:
    hosts: str
    type_name: str
    node_type: NodeType  # with the overrides of the hosts' cluster.nodes entry
    first: str  # the first host, for the order of the lines
    state: str | None = None


def topology_kind(cluster: Cluster) -> str | None:
    """`tree`, `block` or None: the kind of the default topology Slurm should use for these hosts
    (before 25.05, the one topology plugin of topology.conf)."""
    name = default_topology(cluster)
    if name is None or name == FLAT_TOPOLOGY:
        return None
    return "tree" if name == TREE_TOPOLOGY else "block"


def uses_topology_yaml(cluster: Cluster) -> bool:
    return cluster.release.topology_yaml and bool(block_topologies(cluster) or cluster.switches)


def block_sizes(cluster: Cluster, topology: str | None = None) -> list[int]:
    """BlockSizes of a block topology (the only one without block_sets): as given, else its
    smallest block."""
    sets = cluster.spec.fabric.block_sets
    blocks = block_topologies(cluster)
    name = topology or next(iter(blocks), None)
    if name is None or name not in blocks:
        return []
    given = sets[name].block_sizes if name in sets else cluster.spec.fabric.block_sizes
    if given:
        return list(given)
    return [min(len(cluster.blocks[block]) for block in blocks[name])]


def flat_used(cluster: Cluster) -> bool:
    """A partition, or the cluster's default, places jobs with no topology (topology.yaml's `flat`)."""
    return default_topology(cluster) == FLAT_TOPOLOGY or any(
        p.topology == FLAT_TOPOLOGY for p in cluster.spec.partitions if p.name in cluster.partitions
    )


def configless_served(cluster: Cluster) -> list[str]:
    """The files of SLURM_FILES that slurmctld serves to a configless slurmd of this release."""
    served = (
        [*CONFIGLESS_SERVED, "topology.yaml"]
        if configless_serves_topology_yaml(cluster.version)
        else CONFIGLESS_SERVED
    )
    return [name for name in SLURM_FILES if name in served]


def conf_server(cluster: Cluster) -> str:
    """slurmd's `--conf-server` value: the controllers in priority order, with SlurmctldPort where
    it is not Slurm's default (the first port of a range)."""
    port = str(cluster.spec.slurm.daemons.slurmctld_port).split("-")[0]
    suffix = "" if port == str(DEFAULT_SLURMCTLD_PORT) else f":{port}"
    return ",".join(f"{host}{suffix}" for host in cluster.spec.slurm.controller)


def node_lines(cluster: Cluster) -> list[NodeLine]:
    """One NodeName line per node type, and per set of settings or state that cluster.nodes
    entries give some of its hosts, in the order of their first hosts."""
    lines: list[NodeLine] = []
    kinds: dict[int, tuple[str, str | None]] = {}  # entry -> what its hosts' line depends on
    for entry in set(cluster.entry_of.values()):
        group = cluster.spec.nodes[entry]
        kinds[entry] = (repr(sorted(group.overrides.items())), node_state(group))
    for type_name, hosts in cluster.hosts_by_type.items():
        by_kind: dict[tuple[str, str | None] | None, tuple[int | None, list[str]]] = {}
        for host in hosts:
            index = cluster.entry_of.get(host)
            kind = None if index is None else kinds[index]
            by_kind.setdefault(kind, (index, []))[1].append(host)
        for index, members in by_kind.values():
            node_type = cluster.spec.node_types[type_name]
            state = None
            if index is not None:
                node_type = cluster.overridden_types.get(index, node_type)
                state = node_state(cluster.spec.nodes[index])
            lines.append(NodeLine(compress(members), type_name, node_type, members[0], state))
    return sorted(lines, key=lambda line: numeric_sort_key(line.first))


def node_options(line: NodeLine, addresses: HostVars | None = None) -> list[tuple[str, object]]:
    """The options of a NodeName line after its names, in slurm.conf's order (the table of keys):
    a key the node type holds as a plain value is written from it; the others as NODE_VALUES says."""
    t = line.node_type
    options: list[tuple[str, object]] = []
    for key in keys.NODE_KEYS[1:]:
        if key.name in NODE_VALUES:
            options += NODE_VALUES[key.name](line, addresses or {})
        else:
            value = getattr(t, key.field)
            if value is not None and value != []:
                options.append((key.name, ",".join(value) if isinstance(value, list) else value))
        if key.name == "CpuSpecList":
            options += sorted(t.extra.items())
    return options


HostVars = dict[str, dict[str, object]]


def _per_host(var: str, key: str) -> Callable[[NodeLine, HostVars], list[tuple[str, object]]]:
    """NodeAddr / NodeHostname: each host's from hosts.yml (its name where it has none), in the
    order of the line's hosts, or nothing when no host of the line has one."""

    def values(line: NodeLine, hostvars: HostVars) -> list[tuple[str, object]]:
        hosts = expand(line.hosts)
        found = [hostvars.get(host, {}).get(var) for host in hosts]
        if not any(found):
            return []
        return [(key, ",".join(str(value or host) for value, host in zip(found, hosts, strict=True)))]

    return values


def _cpus(line: NodeLine, hostvars: HostVars) -> list[tuple[str, object]]:
    return [("CPUs", line.node_type.total_cpus)]


def _layout(name: str) -> Callable[[NodeLine, HostVars], list[tuple[str, object]]]:
    """SocketsPerBoard and CoresPerSocket where the node type gives its layout; ThreadsPerCore
    then, or alone where it is not 1."""

    def values(line: NodeLine, hostvars: HostVars) -> list[tuple[str, object]]:
        t = line.node_type
        if name == "ThreadsPerCore":
            return [(name, t.threads_per_core)] if t.layout or t.threads_per_core != 1 else []
        if not t.layout:
            return []
        return [(name, t.sockets if name == "SocketsPerBoard" else t.cores_per_socket)]

    return values


def _gres(line: NodeLine, hostvars: HostVars) -> list[tuple[str, object]]:
    return [("Gres", gres_of(line.node_type))] if line.node_type.gpus else []


def _weight(line: NodeLine, hostvars: HostVars) -> list[tuple[str, object]]:
    weight = line.node_type.weight
    return [("Weight", weight)] if weight and weight != 1 else []  # 1: Slurm's own


def _node_state(line: NodeLine, hostvars: HostVars) -> list[tuple[str, object]]:
    return [("State", (line.state or "unknown").upper())]


def _none(line: NodeLine, hostvars: HostVars) -> list[tuple[str, object]]:
    return []


# NodeName options that are not one plain setting of the node type.
NODE_VALUES: dict[str, Callable[[NodeLine, HostVars], list[tuple[str, object]]]] = {
    "NodeAddr": _per_host(NODE_ADDR, "NodeAddr"),
    "NodeHostname": _per_host(NODE_HOSTNAME, "NodeHostname"),
    "CPUs": _cpus,
    "Sockets": _none,  # written as SocketsPerBoard
    "SocketsPerBoard": _layout("SocketsPerBoard"),
    "CoresPerSocket": _layout("CoresPerSocket"),
    "ThreadsPerCore": _layout("ThreadsPerCore"),
    "Gres": _gres,
    "Weight": _weight,
    "State": _node_state,
}


def gres_of(node_type: NodeType) -> str:
    return node_gres(node_type)


def _yes(value: bool) -> str:
    return "YES" if value else "NO"


def partition_options(
    cluster: Cluster, p: Partition, hosts: str, cpus_per_gpu: int | None, memory_per_gpu: int | None
) -> list[tuple[str, object]]:
    """The options of a PartitionName line after its name, in slurm.conf's order (the table of
    keys): a plain setting of the partition is written from it (a flag as YES where on), the others
    as computed here."""
    computed: dict[str, object] = {
        "Nodes": hosts,
        "Default": _yes(p.default),
        "AllowAccounts": ",".join([*p.tenants, *p.allow_accounts]) or None,
        "DefCpuPerGPU": cpus_per_gpu or None,
        "DefMemPerGPU": memory_per_gpu or None,
        "DefMemPerCPU": p.def_mem_per_cpu_mb
        if p.def_mem_per_cpu_mb is not None
        else memory_per_cpu(cluster, p),
        "State": p.state,
        "Topology": p.topology if cluster.release.topology_yaml else None,
        **_exclusive(cluster, p),
    }
    options: list[tuple[str, object]] = []
    for key in keys.PARTITION_KEYS[1:]:
        if not key.model:
            continue
        if key.name == "State":
            options += sorted(p.extra.items())
        value = computed[key.name] if key.name in computed else getattr(p, key.field)
        if value is True:
            value = "YES"
        elif isinstance(value, list):
            value = ",".join(value) or None
        if value is not None and value is not False:
            options.append((key.name, value))
    return options


def _exclusive(cluster: Cluster, p: Partition) -> dict[str, object]:
    """Exclusive=NODE from 26.05 (OverSubscribe=EXCLUSIVE before), or OverSubscribe as set."""
    if p.exclusive:
        exclusive = cluster.release.exclusive_key
        return {
            "Exclusive": "NODE" if exclusive else None,
            "OverSubscribe": None if exclusive else "EXCLUSIVE",
        }
    return {"Exclusive": None, "OverSubscribe": p.over_subscribe}


Line = tuple[str, object]  # (key, value); key "#" for a comment line


def named_hosts(cluster: Cluster, name: str) -> list[str]:
    """The hosts an inventory name stands for: a group's members, or the host itself."""
    inventory = cluster.inventory
    if name in inventory.group_hosts or name in inventory.group_children:
        return inventory.members(name)
    return [name]


def _listed(key: str, values: Sequence[str]) -> list[Line]:
    return [(key, ",".join(values))] if values else []


def _core_section(cluster: Cluster, has_gpus: bool, topology: str | None) -> list[Line]:
    """The keys of the table that gpucluster always writes (those of the model outside the
    sections below, and the fixed ones), in the table's order: a plain model setting from the
    model (a list on one line, or one line per item for keys written once per value), the others
    as CORE_VALUES computes them."""
    lines: list[Line] = [("#", f"Target Slurm {cluster.spec.slurm.version}.")]
    context = _Core(cluster, has_gpus, topology)
    for key in keys.SLURM_CONF_KEYS:
        if not _in_core(key):
            continue
        if key.name in CORE_VALUES:
            lines += CORE_VALUES[key.name](context)
        else:
            lines += _model_lines(key, _model_value(cluster.spec, key.model))
    return lines


def _in_core(key: keys.Key) -> bool:
    if key.written_by:
        return key.written_by == keys.CORE
    return key.model.startswith(
        ("cluster.name", f"{keys.S}.", "the node types", "cluster.fabric")
    ) and not any(key.model.startswith(f"{keys.S}.{section}") for section in SECTIONS)


# Model settings whose keys have a slurm.conf section of their own (written after the core).
SECTIONS = ("accounting", "priority", "power_save", "timeouts")


def _model_value(spec: object, path: str) -> object:
    """The value at a model path (`cluster.slurm.daemons.slurmd_port`); None where a section on
    the way is unset."""
    value: object = spec
    for part in path.split(".")[1:]:
        value = getattr(value, part, None)
        if value is None:
            return None
    return value


def _model_lines(key: keys.Key, value: object) -> list[Line]:
    """A model value as slurm.conf lines of `key`: none where unset or empty; a list on one line
    (comma-separated) for a list key, else one line per item; a plugin with its type."""
    if value is None or value == []:
        return []
    items = value if isinstance(value, list) else [value]
    if key.plugin:
        items = [item if "/" in str(item) else f"{key.plugin}/{item}" for item in items]
    if key.kind in (keys.SET, keys.LIST, keys.PLUGINS):
        return [(key.name, ",".join(str(item) for item in items))]
    return [(key.name, item) for item in items]


class _Core:
    """What the computed keys of the core section read."""

    def __init__(self, cluster: Cluster, has_gpus: bool, topology: str | None) -> None:
        self.cluster, self.spec, self.slurm = cluster, cluster.spec, cluster.spec.slurm
        self.has_gpus, self.topology = has_gpus, topology


def _controllers(c: _Core) -> list[Line]:
    """SlurmctldHost=name, or name(address) where hosts.yml gives the controller an address."""
    hostvars = c.cluster.inventory.hostvars
    lines: list[Line] = []
    for host in c.slurm.controller:
        address = hostvars.get(host, {}).get(CONTROLLER_ADDR)
        lines.append(("SlurmctldHost", f"{host}({address})" if address else host))
    return lines


def _task_plugins(c: _Core) -> list[Line]:
    plugins = [name for name in c.slurm.task_plugins if name != "none" or c.cluster.release.none_plugins]
    return _listed("TaskPlugin", [f"task/{name}" for name in plugins])


def _job_acct_gather(c: _Core) -> list[Line]:
    gather = job_acct_gather(c.spec)
    return (
        [("JobAcctGatherType", f"jobacct_gather/{gather}")]
        if gather != "none" or c.cluster.release.none_plugins
        else []
    )


def _prolog_flags(c: _Core) -> list[Line]:
    flags = prolog_flags(c.spec)
    if not flags:
        return []
    lines: list[Line] = []
    if c.slurm.node_ssh:
        lines.append(
            (
                "#",
                'Every job starts with an "extern" step on its nodes; pam_slurm_adopt puts ssh sessions there',
            )
        )
    return [*lines, ("PrologFlags", ",".join(flags))]


def _fixed(name: str, value: str) -> Callable[[_Core], list[Line]]:
    return lambda c: [(name, value)]


CORE_VALUES: dict[str, Callable[[_Core], list[Line]]] = {
    "ClusterName": lambda c: [("ClusterName", c.slurm.cluster_name or c.spec.name)],
    "SlurmctldHost": _controllers,
    **{name: _fixed(name, value) for name, value in FIXED.items()},
    "StateSaveLocation": lambda c: [("StateSaveLocation", c.slurm.state_dir)],
    "SlurmctldPidFile": lambda c: [("SlurmctldPidFile", c.slurm.slurmctld_pid_file)],
    "TaskPlugin": _task_plugins,
    "JobAcctGatherType": _job_acct_gather,
    "PrologFlags": _prolog_flags,
    "SlurmdParameters": lambda c: _listed("SlurmdParameters", slurmd_parameters(c.spec)),
    "SchedulerParameters": lambda c: _listed("SchedulerParameters", scheduler_parameters(c.spec)),
    "SlurmctldParameters": lambda c: _listed("SlurmctldParameters", slurmctld_parameters(c.spec)),
    "GresTypes": lambda c: [("GresTypes", ",".join(gres_types(c.cluster)))] if c.has_gpus else [],
    "TopologyPlugin": lambda c: (
        [("TopologyPlugin", f"topology/{c.topology}")]
        if c.topology and not uses_topology_yaml(c.cluster)
        else []
    ),
}


def _accounting_section(cluster: Cluster, has_gpus: bool) -> list[Line]:
    spec = cluster.spec
    accounting = spec.slurm.accounting
    priority = priority_lines(spec)
    lines: list[Line] = []
    if accounting is not None:
        comment = "Accounting (slurmdbd) and multifactor priority" if priority else "Accounting (slurmdbd)"
        lines += [
            ("#", comment),
            ("AccountingStorageType", "accounting_storage/slurmdbd"),
            (
                "AccountingStorageHost",
                cluster.inventory.hostvars.get(accounting.host, {}).get(DBD_ADDR) or accounting.host,
            ),
            ("AccountingStoragePort", accounting.port),
        ]
        tres = (
            accounting.tres if accounting.tres is not None else (accounted_tres(cluster) if has_gpus else [])
        )
        lines += _listed("AccountingStorageTRES", tres)
        lines += _listed("AccountingStorageEnforce", list(accounting.enforce))
    elif priority:
        lines.append(("#", "Job priority (cluster.slurm.priority)"))
    return lines + list(priority)


def _health_section(cluster: Cluster) -> list[Line]:
    health = cluster.spec.slurm.health
    if health is None:
        return []
    lines: list[Line] = [
        ("#", "GPU health checks (cluster.slurm.health): a failing node is drained with a reason starting"),
        ("#", '"[health]" and resumed once healthy; what each node must have is in healthcheck.conf'),
        ("HealthCheckProgram", HEALTH_PROGRAM),
        ("HealthCheckInterval", health.interval),
        ("HealthCheckNodeState", ",".join(health.node_state)),
    ]
    if cluster.release.health_check_timeout:
        lines.append(("HealthCheckTimeout", health_timeout(cluster, health)))
    if health.prolog:
        lines.append(("Prolog", HEALTH_PROGRAM))
    if cluster.spec.gate is not None:
        lines += [
            ("#", "The return-to-service gate (cluster.gate): `scontrol reboot` puts the node in the gate"),
            ("#", "(a reservation of its own and a [gate] drain) before the host reboots"),
            ("RebootProgram", REBOOT_PROGRAM),
        ]
    return lines


def _rest_api_section(cluster: Cluster) -> list[Line]:
    slurm = cluster.spec.slurm
    if slurm.rest_api is None:
        return []
    return [
        (
            "#",
            "REST API (cluster.slurm.rest_api): slurmctld also accepts the JWT tokens of `scontrol token`;",
        ),
        ("#", "the slurm_restd role makes the key once (owner slurm, mode 0600)"),
        ("AuthAltTypes", "auth/jwt"),
        ("AuthAltParameters", f"jwt_key={controller_key_path(slurm)}"),
    ]


def _power_save_section(cluster: Cluster) -> list[Line]:
    power = cluster.spec.slurm.power_save
    named = [h for name in (power.exclude_nodes if power else []) for h in named_hosts(cluster, name)]
    return power_save_lines(cluster, named)


def _timeouts_section(cluster: Cluster) -> list[Line]:
    timeouts = cluster.spec.slurm.timeouts
    lines: list[Line] = [
        (key, getattr(timeouts, field))
        for field, key in TIMEOUT_KEYS.items()
        if getattr(timeouts, field) is not None
    ]
    return [("#", "Timers (cluster.slurm.timeouts)"), *lines] if lines else []


def _extra_section(cluster: Cluster) -> list[Line]:
    extra = cluster.spec.slurm.extra
    if not extra:
        return []
    return [("#", "Site settings (cluster.slurm.extra)"), *sorted(extra.items())]


def conf_sections(
    cluster: Cluster, has_gpus: bool, topology: str | None, layer_sections: Sequence[Sequence[Line]] = ()
) -> list[list[Line]]:
    """slurm.conf's global settings, in sections (a blank line between two), before the nodes; the
    layers' sections (gpucluster.layers composes them) before the site's own settings."""
    sections = [
        _core_section(cluster, has_gpus, topology),
        _accounting_section(cluster, has_gpus),
        _health_section(cluster),
        mps_section(cluster),
        _rest_api_section(cluster),
        _power_save_section(cluster),
        _timeouts_section(cluster),
        *[list(section) for section in layer_sections],
        _extra_section(cluster),
    ]
    return [section for section in sections if section]


def quoted(lines: Sequence[Line]) -> list[Line]:
    """Lines with each value written as Slurm reads it back (gpucluster.slurm.parse.quote_value)."""
    return [(key, value if key == "#" else quote_value(value)) for key, value in lines]


def _context(cluster: Cluster, layer_sections: Sequence[Sequence[Line]] = ()) -> dict[str, object]:
    slurm = cluster.spec.slurm
    lines = node_lines(cluster)
    has_gpus = any(line.node_type.gpus for line in lines)
    topology = topology_kind(cluster)
    return {
        "header": header(cluster.name),
        "cluster": cluster,
        "spec": cluster.spec,
        "slurm": slurm,
        "sections": [
            quoted(section) for section in conf_sections(cluster, has_gpus, topology, layer_sections)
        ],
        "node_lines": [(line, quoted(node_options(line, cluster.inventory.hostvars))) for line in lines],
        "partitions": [
            (
                p,
                quoted(
                    partition_options(
                        cluster, p, compress(cluster.partitions[p.name]), *per_gpu_defaults(cluster, p)
                    )
                ),
            )
            for p in cluster.spec.partitions
            if p.name in cluster.partitions
        ],
        "cgroup_extra": quoted(sorted(slurm.cgroup.extra.items())),
        "gres_conf_lines": gres_conf_lines,
        "topology": topology,
        "topology_yaml": uses_topology_yaml(cluster),
        "switches": [
            (s.name, compress(s.switches), compress([*s.nodes, *s.placeholders])) for s in cluster.switches
        ],
        "blocks": [(name, compress(hosts)) for name, hosts in sorted(cluster.blocks.items())],
        "block_sizes": block_sizes(cluster),
        # topology.yaml: each block topology (name, sizes, its blocks), the default's name, flat.
        "block_topologies": [
            (name, block_sizes(cluster, name), [(b, compress(cluster.blocks[b])) for b in sorted(blocks)])
            for name, blocks in block_topologies(cluster).items()
        ],
        "default_topology": default_topology(cluster),
        "flat_topology": FLAT_TOPOLOGY if flat_used(cluster) else None,
        "tree_topology": TREE_TOPOLOGY,
        "dynamic_nodes": False,
        "has_gpus": has_gpus,
        "release": cluster.release,
        "pyxis": cluster.spec.slurm.containers.pyxis if cluster.spec.slurm.containers else None,
    }


def render_topology_yaml(cluster: Cluster, dynamic_nodes: bool = False) -> str | None:
    """topology.yaml (Slurm >= 25.05 format) whatever the target version.

    With `dynamic_nodes` (Slurm on Kubernetes) it defines the topologies - switch tree with its
    children, blocks with block_sizes - and names no node. Slinky's slurmd pods are Slurm dynamic
    nodes called `<nodeset>-<ordinal>`, never the inventory host names, so a `nodes:` list of hosts
    would name nodes that do not exist in that Slurm. Slurm documents the other way for dynamic nodes
    (dynamic_nodes.html, "Dynamic Nodes + Topology"): each node joins topologies defined in
    topology.yaml through its `Topology=<topology>:<unit>,...` node option (Slurm 25.05+), and
    Slinky's operator sets it from the Kubernetes node annotation `topology.slinky.slurm.net/spec`
    (gpucluster.k8s.objects.slinky_topology_spec), which names the leaf switch and the block defined
    here. Slurm accepts such definitions (topology/tree switch_record.c, topology/block block_record.c
    of 25.11): a switch with neither nodes nor children is an empty leaf
    switch, the unit of a tree must be a leaf, and blocks may start empty when block_sizes is set
    (always rendered here; the smallest block otherwise).
    """
    context = _context(cluster)
    if not (block_topologies(cluster) or cluster.switches):
        return None
    if dynamic_nodes:
        context["dynamic_nodes"] = True
        context["switches"] = [(s.name, compress(s.switches), "") for s in cluster.switches]
        context["block_topologies"] = [
            (name, sizes, [(block, "") for block, _ in blocks])
            for name, sizes, blocks in context["block_topologies"]  # type: ignore[attr-defined]
        ]
    return render_template("slurm/topology.yaml.j2", **context)


def render_accounts(cluster: Cluster) -> str:
    """The associations the slurm_accounts role makes true (YAML, sorted)."""
    return header(cluster.name) + "\n" + yamlout.dump(desired_associations(cluster), width=80)


def render_slurm(cluster: Cluster, layer_sections: Sequence[Sequence[Line]] = ()) -> dict[str, str]:
    """Bare-metal Slurm's files, naming only the hosts it owns; none when it owns no host.
    `layer_sections`: the slurm.conf lines the layers add (gpucluster.layers.renderers)."""
    cluster = cluster.owned_by(Owner.SLURM)
    if not cluster.hosts:
        return {}
    context = _context(cluster, layer_sections)
    files = {
        "slurm/accounts.yaml": render_accounts(cluster),
        "slurm/slurm.conf": render_template("slurm/slurm.conf.j2", **context),
        "slurm/cgroup.conf": render_template("slurm/cgroup.conf.j2", **context),
        "slurm/plugstack.conf": render_template("slurm/plugstack.conf.j2", **context),
    }
    files.update(render_oci(cluster))
    if context["has_gpus"]:
        files["slurm/gres.conf"] = render_template("slurm/gres.conf.j2", **context)
    health = bare_metal_health_conf(cluster)
    if health is not None:
        files[f"slurm/{HEALTH_CONF}"] = health
    mps = render_mps_conf(cluster, header(cluster.name))
    if mps is not None:
        files[f"slurm/{MPS_CONF}"] = mps
    if context["topology_yaml"]:
        files["slurm/topology.yaml"] = render_template("slurm/topology.yaml.j2", **context)
    elif context["topology"]:
        files["slurm/topology.conf"] = render_template("slurm/topology.conf.j2", **context)
    return files
