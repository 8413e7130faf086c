"""Checks of the Slurm settings: what the target release supports, login hosts, node ssh, the
REST API, health checks, configless serving and QOS. gpucluster.layers.CHECKS runs each after the
hosts are resolved; they see the cluster only through gpucluster.model.checking.CheckContext."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpucluster.model.base import Owner
from gpucluster.model.powered import node_state
from gpucluster.model.releases import RELEASES, configless_serves_topology_yaml
from gpucluster.slurm.gpus import gpu_hardware, parse_cores, socket_split_problem
from gpucluster.slurm.settings import prolog_flags
from gpucluster.slurm.sharing import uses_mps
from gpucluster.slurm.written import (
    CGROUP_MODELLED,
    NODE_MODELLED,
    NODE_PER_HOST,
    PARTITION_MODELLED,
    modelled,
    option_problem,
    written_keys,
)

if TYPE_CHECKING:
    from gpucluster.model.checking import CheckContext


def check_accounting_host(ctx: CheckContext) -> None:
    if ctx.spec.slurm.accounting and ctx.spec.slurm.accounting.host not in ctx.inv.hostvars:
        ctx.fail(
            ["slurm", "accounting", "host"],
            f"accounting host `{ctx.spec.slurm.accounting.host}` is not a host of {ctx.inv.hosts_file.file}",
        )


def check_state_save(ctx: CheckContext) -> None:
    """With a backup controller, StateSaveLocation on one filesystem of cluster.storage that every
    controller mounts: a backup that reads other state (its own disk, or a filesystem it does not
    mount) takes over without the jobs, and the primary's return overwrites what it did. Runs after
    the storage checks (Cluster.storage_hosts)."""
    from gpucluster.model.storage import filesystem_of

    slurm = ctx.spec.slurm
    path = slurm.state_save_location
    if len(slurm.controller) < 2 or path is None or len(set(slurm.controller)) != len(slurm.controller):
        return
    parts: list[str | int] = ["slurm", "state_save_location"]
    controllers = ", ".join(slurm.controller)
    fs = filesystem_of(path, ctx.spec.storage)
    if fs is None:
        mount = _parent_mount(path)
        where = (
            f"declare the shared filesystem that holds it in cluster.storage with the controllers among "
            f"its hosts (e.g. {{name: slurm-state, mount: {mount}, source: filer:/export/slurm, type: nfs4, "
            f"hosts: [{controllers}]}}, or `site_managed: true` where the site mounts it)"
            if mount is not None
            # A directory of the system takes no shared filesystem (the storage checks refuse it).
            else "move it onto a shared filesystem outside the system's directories (e.g. "
            "state_save_location: /shared/slurm/statesave with {name: slurm-state, mount: /shared, source: "
            f"filer:/export/slurm, type: nfs4, hosts: [{controllers}]}} in cluster.storage)"
        )
        ctx.fail(
            parts,
            f"{path} is on no filesystem of cluster.storage, but {len(slurm.controller)} controllers "
            f"({controllers}) must all read and write it: {where}",
        )
        return
    index = ctx.spec.storage.index(fs)
    mounted = set(ctx.cluster.storage_hosts.get(fs.name, []))
    missing = [host for host in slurm.controller if host not in mounted]
    if missing:
        which = (
            f"controller `{missing[0]}` does" if len(missing) == 1 else f"controllers {', '.join(missing)} do"
        )
        ctx.fail(
            parts,
            f"{path} is on `{fs.name}` (cluster.storage[{index}]), which {which} not mount: every "
            f"controller reads and writes the state there; add {'it' if len(missing) == 1 else 'them'} to "
            f"that filesystem's `hosts`",
        )


def _parent_mount(path: str) -> str | None:
    """A mount point to suggest for a state path: its first directory (`/shared/slurm` -> `/shared`);
    None where that is a directory of the system, or the path itself (no filesystem may go there)."""
    from gpucluster.checks.storage import SYSTEM_DIRS

    first = path.strip("/").split("/")[0]
    mount = f"/{first}"
    return None if mount in SYSTEM_DIRS or mount == path.rstrip("/") else mount


def check_release(ctx: CheckContext) -> None:
    """Settings the target release cannot carry out."""
    slurm = ctx.spec.slurm
    facts = slurm.release
    fabric = ctx.spec.fabric
    if fabric.blocks and not facts.block_sizes:
        why = (
            "has topology/block only with BlockLevels, which gpucluster does not render"
            if facts.block_topology
            else "has no topology/block"
        )
        ctx.fail(
            ["fabric", "blocks"],
            f"NVLink blocks need topology/block with BlockSizes (Slurm >= 24.05); Slurm {slurm.release.name} {why}",
        )
    if slurm.select_type == "cons_res" and not facts.cons_res:
        ctx.fail(
            ["slurm", "select_type"],
            f"Slurm {facts.name} has no select/cons_res (removed in 23.11): use cons_tres, which "
            "schedules the same resources and GPUs too",
        )
    if (
        slurm.mpi_default.startswith("pmix")
        and not facts.packaging.pmix
        and slurm.packages.repository is None
    ):
        ctx.fail(
            ["slurm", "mpi_default"],
            f"the packages of Slurm {facts.name} carry no mpi/pmix plugin (srun --mpi offers pmi2 and "
            "cray_shasta there): use pmi2, or packages built with PMIx (cluster.slurm.packages)",
        )
    health = slurm.health
    if health is not None:
        for index, state in enumerate(health.node_state):
            if state not in facts.health_node_states:
                ctx.fail(
                    ["slurm", "health", "node_state", index],
                    f"Slurm {facts.name} knows no HealthCheckNodeState `{state}` "
                    f"(it knows {', '.join(facts.health_node_states)})",
                )
        for index, state in enumerate(health.heavy_node_state):
            if state not in facts.health_node_states:
                ctx.fail(
                    ["slurm", "health", "heavy_node_state", index],
                    f"Slurm {facts.name} knows no HealthCheckNodeState `{state}` "
                    f"(it knows {', '.join(facts.health_node_states)})",
                )
        if health.timeout is not None and not facts.health_check_timeout:
            ctx.fail(
                ["slurm", "health", "timeout"],
                f"Slurm {facts.name} kills the health check after {facts.health_check_kill_after} s and "
                "has no HealthCheckTimeout (Slurm >= 26.05): remove the timeout",
            )
        elif health.timeout is not None and health.timeout >= health.interval:
            ctx.fail(
                ["slurm", "health", "timeout"],
                f"HealthCheckTimeout {health.timeout} must be below HealthCheckInterval {health.interval} "
                f"(slurmctld {facts.name} logs an error otherwise)",
            )
        elif health.interval < 2:
            ctx.fail(["slurm", "health", "interval"], "an interval of 1 s leaves the health check no time")


def check_gate(ctx: CheckContext) -> None:
    """cluster.gate on Slurm's nodes runs inside gpucluster-healthcheck; a burn-in rate needs the
    ports it applies to."""
    spec = ctx.spec
    if spec.gate is not None and spec.slurm.health is None and ctx.cluster.hosts_owned_by(Owner.SLURM):
        ctx.fail(
            ["gate"],
            "the gate runs inside the health check on Slurm's nodes: set cluster.slurm.health too "
            "(`health: {}` takes its defaults)",
        )
    for name, node_type in spec.node_types.items():
        if node_type.burn_in.infiniband_rate_gbps and not node_type.health.infiniband:
            ctx.fail(
                ["node_types", name, "burn_in", "infiniband_rate_gbps"],
                "a rate for no port: list the ports in node_types.<type>.health.infiniband (e.g. mlx5_0:1)",
            )
        if node_type.burn_in.nccl_busbw_gbps and node_type.gpus is not None and node_type.gpus.count == 1:
            ctx.fail(
                ["node_types", name, "burn_in", "nccl_busbw_gbps"],
                "a floor no node of one GPU can meet: nccl-tests scales all_reduce's bus bandwidth "
                "by 2(n-1)/n, 0 for one GPU; leave it out (the run is still checked and its "
                "bandwidth recorded)",
            )


def check_plugins(ctx: CheckContext) -> None:
    plugins = ctx.spec.slurm.task_plugins
    if "none" in plugins and len(plugins) > 1:
        ctx.fail(["slurm", "task_plugins"], "`none` cannot be combined with other task plugins")


def check_memory_enforcement(ctx: CheckContext) -> None:
    """slurmctld and slurmd stop when JobAcctGatherParams=OverMemoryKill meets the cgroup's memory
    confinement (task/cgroup with ConstrainRAMSpace or ConstrainSwapSpace): two mechanisms that
    kill a job over its memory, of which Slurm allows one."""
    slurm = ctx.spec.slurm
    params = str(slurm.extra.get("JobAcctGatherParams", ""))
    if "overmemorykill" not in [p.strip().lower() for p in params.split(",")]:
        return
    swap = str(slurm.cgroup.extra.get("ConstrainSwapSpace", "no")).lower() in ("yes", "true", "1")
    if "cgroup" in slurm.task_plugins and (slurm.cgroup.constrain_ram_space or swap):
        ctx.fail(
            ["slurm", "extra", "JobAcctGatherParams"],
            "OverMemoryKill beside the cgroup's memory limit (task/cgroup with "
            f"{'ConstrainRAMSpace' if slurm.cgroup.constrain_ram_space else 'ConstrainSwapSpace'}): slurmctld "
            "refuses to start with both; drop OverMemoryKill (the cgroup enforces the limit) or set "
            "cluster.slurm.cgroup.constrain_ram_space: false",
        )


def check_login(ctx: CheckContext) -> None:
    """Login hosts submit jobs and run none: a node of cluster.nodes would run slurmd there.
    A controller may double as login host (small sites)."""
    seen: set[str] = set()
    for index, host in enumerate(ctx.spec.slurm.login):
        parts: list[str | int] = ["slurm", "login", index]
        if host in seen:
            ctx.fail(parts, f"login host `{host}` is listed twice")
            continue
        seen.add(host)
        if host not in ctx.inv.hostvars:
            ctx.fail(parts, f"login host `{host}` is not a host of {ctx.inv.hosts_file.file}")
        elif host in ctx.cluster.node_type_of:
            ctx.fail(
                parts,
                f"login host `{host}` is a node of cluster.nodes (type "
                f"`{ctx.cluster.node_type_of[host]}`): it would run jobs; remove it from its node group",
            )


def check_node_ssh(ctx: CheckContext) -> None:
    """pam_slurm_adopt puts an ssh session into the job's cgroup: it needs proctrack/cgroup.
    Admins must be accounts the inventory creates (when it creates any)."""
    node_ssh = ctx.spec.slurm.node_ssh
    if node_ssh is None:
        return
    if ctx.spec.slurm.proctrack != "cgroup":
        ctx.fail(
            ["slurm", "proctrack"],
            f"slurm.node_ssh needs proctrack `cgroup` (is `{ctx.spec.slurm.proctrack}`): "
            "pam_slurm_adopt adopts ssh sessions into the job's cgroup",
        )
    declared = {user.name for user in ctx.spec.users}
    if not declared:
        return
    for index, admin in enumerate(node_ssh.admins):
        if admin != "root" and admin not in declared:
            ctx.fail(
                ["slurm", "node_ssh", "admins", index],
                f"admin `{admin}` is not a user of cluster.users",
            )


def check_rest_api(ctx: CheckContext) -> None:
    """slurmrestd needs slurm.conf and a path to slurmctld: a controller or a login host. Its port
    must be free there; the keys it renders must not come from `extra` too."""
    slurm = ctx.spec.slurm
    rest = slurm.rest_api
    if rest is None:
        return
    parts: list[str | int] = ["slurm", "rest_api"]
    if rest.host not in ctx.inv.hostvars:
        ctx.fail([*parts, "host"], f"REST API host `{rest.host}` is not a host of {ctx.inv.hosts_file.file}")
    elif rest.host not in slurm.controller and rest.host not in slurm.login:
        ctx.fail(
            [*parts, "host"],
            f"REST API host `{rest.host}` is neither a controller nor a login host "
            "(cluster.slurm.controller, cluster.slurm.login): slurmrestd runs where the Slurm "
            "configuration is and no job runs",
        )
    first, _, last = str(slurm.daemons.slurmctld_port).partition("-")
    if rest.host in slurm.controller and int(first) <= rest.port <= int(last or first):
        ctx.fail([*parts, "port"], f"port {rest.port} is slurmctld's (SlurmctldPort) on `{rest.host}`")
    if slurm.accounting and slurm.accounting.host == rest.host and slurm.accounting.port == rest.port:
        ctx.fail(
            [*parts, "port"],
            f"port {rest.port} is slurmdbd's (cluster.slurm.accounting.port) on `{rest.host}`",
        )


def check_gpus(ctx: CheckContext) -> None:
    """gres.conf's affinity and the partitions' per-GPU defaults: what the target release and the
    node types can carry. Only node types bare-metal Slurm runs get a gres.conf."""
    facts = ctx.spec.slurm.release
    cluster = ctx.cluster
    slurm_types = {cluster.node_type_of[h] for h in cluster.hosts_owned_by(Owner.SLURM)}
    for name, node_type in ctx.spec.node_types.items():
        gpus = node_type.gpus
        if gpus is None:
            continue
        parts: list[str | int] = ["node_types", name, "gpus"]
        if gpus.autodetect == "nvidia" and not facts.autodetect_nvidia and name in slurm_types:
            since = min((r for r in RELEASES.values() if r.autodetect_nvidia), key=lambda r: r.version)
            ctx.fail(
                [*parts, "autodetect"],
                f"gres.conf AutoDetect=nvidia needs Slurm {since.name} or later (target: {facts.name}): "
                "use nvml (slurmd then needs the NVML library) or device files",
            )
        if gpus.autodetect != "off":
            if gpus.affinity is not None:
                ctx.fail(
                    [*parts, "affinity"],
                    "with autodetect, slurmd finds each GPU's cores itself: leave affinity out",
                )
            continue
        if name not in slurm_types:
            continue
        if isinstance(gpus.affinity, list):
            if len(gpus.affinity) != gpus.count:
                ctx.fail(
                    [*parts, "affinity"],
                    f"{len(gpus.affinity)} core lists for {gpus.count} GPUs: give one per GPU",
                )
            total = node_type.total_cores
            for index, cores in enumerate(gpus.affinity):
                if max(parse_cores(cores)) >= total:
                    ctx.fail(
                        [*parts, "affinity", index],
                        f"core {max(parse_cores(cores))} does not exist: the node has {total} cores (0-{total - 1})",
                    )
        elif gpus.affinity != "none":
            problem = socket_split_problem(node_type)
            if problem:
                ctx.fail([*parts, "affinity"], problem)
    for index, partition in enumerate(ctx.spec.partitions):
        asked = {"cpus_per_gpu": partition.cpus_per_gpu, "memory_per_gpu_mb": partition.memory_per_gpu_mb}
        if not any(asked.values()):
            continue
        hardware = gpu_hardware(cluster, partition.name)
        if not hardware and partition.name in cluster.partitions:
            key = next(k for k, v in asked.items() if v)
            ctx.fail(["partitions", index, key], "the partition has no GPU nodes")
        for type_name, node_type in hardware:
            assert node_type.gpus is not None
            count = node_type.gpus.count
            for key, value, has, unit in (
                ("cpus_per_gpu", partition.cpus_per_gpu, node_type.total_cpus, "CPUs"),
                ("memory_per_gpu_mb", partition.memory_per_gpu_mb, node_type.memory_mb, "MiB"),
            ):
                if value and has is not None and value * count > has:
                    ctx.fail(
                        ["partitions", index, key],
                        f"a job using all {count} GPUs of a `{type_name}` node would get {count} x {value} = "
                        f"{count * value} {unit}; the node has {has}",
                    )


def check_extra(ctx: CheckContext) -> None:
    """`extra` sets keys of the target release's slurm.conf that gpucluster does not write itself:
    an unknown key (a misspelling, or a key of another release) and a second line of a key gpucluster
    writes would otherwise reach slurmctld, which ignores the first or refuses to start."""
    extra = ctx.spec.slurm.extra
    if not extra:
        return
    from gpucluster.slurm.conf_keys import KEYS  # only when there is something to check

    facts = ctx.spec.slurm.release
    known = KEYS[facts.name]
    by_lower = {key.lower(): key for key in known}
    written = {key.lower(): (key, setting) for key, setting in written_keys(ctx.spec).items()}
    for key in extra:
        parts = ["slurm", "extra", key]
        home = modelled(key)
        if home is not None:
            ctx.fail(parts, f"{home[0]} is {home[1]}: set it there")
        elif key.lower() in written:
            name, setting = written[key.lower()]
            ctx.fail(
                parts,
                f"{name} is written by {setting}; remove it here (Slurm would keep one of the two lines)",
            )
        elif key not in known:
            ctx.fail(parts, unknown_key_message(key, facts.name, by_lower))


def unknown_key_message(key: str, release_name: str, by_lower: dict[str, str]) -> str:
    from gpucluster.keyhints import closest
    from gpucluster.slurm.conf_keys import KEYS

    if key.lower() in by_lower:
        return f"Slurm spells it `{by_lower[key.lower()]}`"
    elsewhere = [name for name, keys in KEYS.items() if key in keys]
    if elsewhere:
        return (
            f"`{key}` is not a slurm.conf key of Slurm {release_name} (Slurm {', '.join(elsewhere)} "
            "had it; see slurm.conf(5) of the release)"
        )
    guess = closest(key, sorted(by_lower.values()))
    hint = f": did you mean `{guess}`?" if guess else " (slurm.conf(5) of the release lists its keys)"
    return f"`{key}` is not a slurm.conf key of Slurm {release_name}{hint}"


def check_configless(ctx: CheckContext) -> None:
    """A configless slurmd reads only what slurmctld serves; topology.yaml is served only from
    a maintenance release on (25.05.2), which the version must then name."""
    slurm = ctx.spec.slurm
    fabric = ctx.spec.fabric
    if not slurm.configless or not (fabric.tree or fabric.blocks) or not slurm.release.topology_yaml:
        return
    if not configless_serves_topology_yaml(slurm.target):
        since = slurm.release.configless_topology_yaml_since
        fix = f"target {since} or later" if since else "target a release that does"
        ctx.fail(
            ["slurm", "configless"],
            f"Slurm {slurm.version} renders topology.yaml, which its slurmctld does not serve to configless "
            f"nodes: {fix}, or turn configless off",
        )


def check_qos(ctx: CheckContext) -> None:
    names: set[str] = set()
    for index, qos in enumerate(ctx.spec.qos):
        if qos.name in names:
            ctx.fail(["qos", index, "name"], f"QOS `{qos.name}` is defined twice")
        names.add(qos.name)
    for index, qos in enumerate(ctx.spec.qos):
        for n, other in enumerate(qos.preempt):
            if other not in names:
                ctx.fail(["qos", index, "preempt", n], f"unknown QOS `{other}`")


def check_prologs(ctx: CheckContext) -> None:
    """Prolog lines the release can take, and PrologFlags it knows and can combine."""
    slurm = ctx.spec.slurm
    facts = slurm.release
    if not facts.several_prologs:
        mps = uses_mps(ctx.spec)
        for field, programs in (("prolog", slurm.prolog), ("epilog", slurm.epilog)):
            given = []
            if field == "prolog" and slurm.health and slurm.health.prolog:
                given.append("the health check's (cluster.slurm.health.prolog)")
            if mps:
                given.append("gpucluster-mps's (a node type's gpus.sharing.mps)")
            if programs:
                given.append(
                    f"cluster.slurm.{field}"
                    if len(programs) == 1
                    else f"{len(programs)} in cluster.slurm.{field}"
                )
            if len(given) + max(0, len(programs) - 1) < 2:
                continue
            ctx.fail(
                ["slurm", field],
                f"Slurm {facts.name} takes one {field.capitalize()} ({' and '.join(given)} given; several "
                f"from 24.05): give one program or a glob of a directory of them (e.g. /etc/slurm/{field}.d/*)",
            )
    flags = prolog_flags(ctx.spec)
    for index, flag in enumerate(slurm.prolog_flags):
        if flag not in facts.prolog_flags:
            ctx.fail(
                ["slurm", "prolog_flags", index],
                f"Slurm {facts.name} knows no PrologFlags `{flag}` (it knows {', '.join(facts.prolog_flags)})",
            )
    if "RunInJob" in flags and "Serial" in flags:
        ctx.fail(
            ["slurm", "prolog_flags"], "PrologFlags RunInJob and Serial exclude each other (slurm.conf(5))"
        )
    if "X11" in flags and slurm.proctrack == "linuxproc":
        ctx.fail(
            ["slurm", "prolog_flags"],
            "PrologFlags X11 does not work with cluster.slurm.proctrack linuxproc (slurm.conf(5)): use cgroup",
        )
    if "NoHold" in flags and "Alloc" not in flags:
        ctx.fail(["slurm", "prolog_flags"], "PrologFlags NoHold needs Alloc (slurm.conf(5))")


def check_daemons(ctx: CheckContext) -> None:
    """Files the release's daemons can write where its packages run them."""
    slurm = ctx.spec.slurm
    packaging = slurm.release.packaging
    pid_file = slurm.daemons.slurmctld_pid_file
    if pid_file is not None and packaging.daemons_run_as_slurm:
        directory = packaging.slurmctld_pid_file.rsplit("/", 1)[0]
        if pid_file.rsplit("/", 1)[0] not in (directory, directory.replace("/run/", "/var/run/", 1)):
            ctx.fail(
                ["slurm", "daemons", "slurmctld_pid_file"],
                f"the packages of Slurm {slurm.release.name} run slurmctld as SlurmUser with only "
                f"{directory} writable for it: put the pid file there ({packaging.slurmctld_pid_file})",
            )


def check_power_save(ctx: CheckContext) -> None:
    power = ctx.spec.slurm.power_save
    cloud = [i for i, entry in enumerate(ctx.spec.nodes) if node_state(entry) == "cloud"]
    for index in cloud:
        entry = ctx.spec.nodes[index]
        node_type = ctx.spec.node_types.get(entry.type)
        gpus = entry.gpus or (node_type.gpus if node_type else None)
        if gpus is not None and gpus.autodetect != "off":
            where: list[str | int] = ["nodes", index, "gpus"]
            if entry.gpus is None:
                where = ["node_types", entry.type, "gpus", "autodetect"]
            ctx.fail(
                where,
                f"cloud nodes (cluster.nodes[{index}]) cannot have their GPUs autodetected (slurmctld: "
                '"Cannot use AutoDetect on cloud/dynamic node"): give their device files',
            )
    sites = [i for i in cloud if ctx.spec.nodes[i].power is None]
    if sites and (power is None or power.resume_program is None):
        ctx.fail(
            ["nodes", sites[0], "state"],
            "cloud nodes are started by slurmctld's ResumeProgram: set cluster.slurm.power_save.resume_program",
        )
    if power is None:
        return
    names = set(ctx.inv.group_hosts) | set(ctx.inv.group_children) | set(ctx.inv.hostvars)
    for index, name in enumerate(power.exclude_nodes):
        if name not in names:
            ctx.fail(
                ["slurm", "power_save", "exclude_nodes", index],
                f"`{name}` is not a host or group of {ctx.inv.hosts_file.file}",
            )
    partitions = {p.name for p in ctx.spec.partitions}
    for index, name in enumerate(power.exclude_partitions):
        if name not in partitions:
            ctx.fail(["slurm", "power_save", "exclude_partitions", index], f"unknown partition `{name}`")


def check_release_keys(ctx: CheckContext) -> None:
    """Settings whose key the target release does not have (a removed or a newer key)."""
    from gpucluster.slurm.conf_keys import KEYS
    from gpucluster.slurm.settings import POWER_SAVE_KEYS, PRIORITY_KEYS, TIMEOUT_KEYS

    slurm = ctx.spec.slurm
    known = KEYS[slurm.release.name]
    groups: list[tuple[str, object, dict[str, str]]] = [("timeouts", slurm.timeouts, TIMEOUT_KEYS)]
    if slurm.power_save is not None:
        groups.append(("power_save", slurm.power_save, POWER_SAVE_KEYS))
    if slurm.priority is not None:
        groups.append(("priority", slurm.priority, PRIORITY_KEYS))
    if slurm.preemption is not None:
        groups.append(("preemption", slurm.preemption, {"parameters": "PreemptParameters"}))
    for section, settings, keys in groups:
        for field, key in keys.items():
            if getattr(settings, field) not in (None, []) and key not in known:
                ctx.fail(
                    ["slurm", section, field],
                    f"Slurm {slurm.release.name} has no {key} (slurm.conf(5) of the release): remove it",
                )


def check_options(ctx: CheckContext) -> None:
    """The `extra` options of node types, partitions and cgroup.conf: options of the target
    release that no key of the model sets."""
    from gpucluster.slurm.conf_keys import CGROUP_KEYS, NODE_KEYS, PARTITION_KEYS

    release = ctx.spec.slurm.release.name
    for name, node_type in ctx.spec.node_types.items():
        for key in node_type.extra:
            if key in NODE_PER_HOST:
                problem: str | None = f"{key} names one address per host: give it in DNS or /etc/hosts"
            else:
                problem = option_problem(key, NODE_MODELLED, NODE_KEYS[release], "NodeName lines", release)
            if problem:
                ctx.fail(["node_types", name, "extra", key], problem)
    for index, partition in enumerate(ctx.spec.partitions):
        for key in partition.extra:
            problem = option_problem(
                key, PARTITION_MODELLED, PARTITION_KEYS[release], "PartitionName lines", release
            )
            if problem:
                ctx.fail(["partitions", index, "extra", key], problem)
    for key in ctx.spec.slurm.cgroup.extra:
        problem = option_problem(key, CGROUP_MODELLED, CGROUP_KEYS[release], "cgroup.conf", release)
        if problem:
            ctx.fail(["slurm", "cgroup", "extra", key], problem)


def check_plugstack(ctx: CheckContext) -> None:
    """The site's SPANK plugins, and gpucluster's Pyxis once: two lines loading spank_pyxis.so
    would make slurmd load it twice."""
    slurm = ctx.spec.slurm
    if slurm.containers is None or slurm.containers.pyxis is None:
        return
    for index, line in enumerate(slurm.plugstack):
        words = line.split()
        if words[0] != "include" and words[1].rsplit("/", 1)[-1] == "spank_pyxis.so":
            ctx.fail(
                ["slurm", "plugstack", index],
                "cluster.slurm.containers.pyxis loads Pyxis already: remove one of the two",
            )


def check_values(ctx: CheckContext) -> None:
    """Values written verbatim (the `extra` options) that slurm.conf or cgroup.conf can hold:
    Slurm's parser reads a value in double quotes when it has a blank, with no quote inside, and no
    value across lines."""
    from gpucluster.slurm.parse import unreadable_value

    places: list[tuple[list[str | int], dict[str, object]]] = [
        (["slurm", "extra"], dict(ctx.spec.slurm.extra)),
        (["slurm", "cgroup", "extra"], dict(ctx.spec.slurm.cgroup.extra)),
    ]
    places += [(["node_types", name, "extra"], dict(t.extra)) for name, t in ctx.spec.node_types.items()]
    places += [(["partitions", i, "extra"], dict(p.extra)) for i, p in enumerate(ctx.spec.partitions)]
    for parts, values in places:
        for key, value in values.items():
            problem = unreadable_value(value)
            if problem:
                ctx.fail([*parts, key], f"{problem}: Slurm would not read this value back")
