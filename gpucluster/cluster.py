"""The core of the model: an inventory resolved into hosts, partitions, fabric and tenants.

It knows nothing of the layers built on it (Kubernetes, cloud): gpucluster.layers parses their
sections, runs their checks after these, and raises one InventoryError listing every problem,
so a user fixes them in one pass.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

import hostlist
from pydantic import BaseModel, ValidationError

from gpucluster.errors import InventoryError, Problem, format_path
from gpucluster.hostlists import compress
from gpucluster.inventory import Inventory
from gpucluster.keyhints import model_problems
from gpucluster.model import (
    UNIX_ID_RANGES,
    UNIX_ID_RANGES_TEXT,
    ClusterFile,
    ClusterSpec,
    GpuQuota,
    NodeType,
    Owner,
    Tenant,
)
from gpucluster.nodesoftware.checks import check_node_software
from gpucluster.slurm.checks import check_slurm, check_state_save
from gpucluster.slurm.releases import Release, SlurmVersion
from gpucluster.storage_checks import check_storage
from gpucluster.yamlfile import LoadedYaml

# Built without validating: validating it would build GpuQuota's validator at import time, which
# every command pays for (the models' validators are built on first use).
NO_GPUS = GpuQuota.model_construct()


@dataclass(frozen=True)
class Switch:
    name: str
    switches: tuple[str, ...]
    nodes: tuple[str, ...]


@dataclass
class Cluster:
    """The inventory resolved to hosts: what each renderer needs, computed once."""

    spec: ClusterSpec
    source: str
    inventory: Inventory
    node_type_of: dict[str, str] = field(default_factory=dict)
    hosts_by_type: dict[str, list[str]] = field(default_factory=dict)
    partitions: dict[str, list[str]] = field(default_factory=dict)
    switches: list[Switch] = field(default_factory=list)
    switch_path: dict[str, tuple[str, ...]] = field(default_factory=dict)
    blocks: dict[str, list[str]] = field(default_factory=dict)
    block_of: dict[str, str] = field(default_factory=dict)
    # The one scheduler of each host, and each tenant's GPU numbers per scheduler.
    owner_of: dict[str, Owner] = field(default_factory=dict)
    tenant_gpus: dict[str, dict[Owner, GpuQuota]] = field(default_factory=dict)
    # Shared filesystem name -> the hosts that mount it (its NFS server included), in name order.
    storage_hosts: dict[str, list[str]] = field(default_factory=dict)
    # Hosts of a cluster.nodes entry that overrides node type settings or sets a state: host ->
    # the entry's index; and each such entry's node type with its overrides applied.
    entry_of: dict[str, int] = field(default_factory=dict)
    overridden_types: dict[int, NodeType] = field(default_factory=dict)
    # Set on a view made by owned_by(): every host, partition, switch and quota here is that owner's.
    domain: Owner | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def hosts(self) -> list[str]:
        """Compute hosts, naturally sorted."""
        return sort_hosts(self.node_type_of)

    def node_type(self, host: str) -> NodeType:
        """The host's node type, with the overrides of its cluster.nodes entry applied."""
        entry = self.entry_of.get(host)
        if entry is not None and entry in self.overridden_types:
            return self.overridden_types[entry]
        return self.spec.node_types[self.node_type_of[host]]

    @property
    def total_gpus(self) -> int:
        total = 0
        for type_name, hosts in self.hosts_by_type.items():
            gpus = self.spec.node_types[type_name].gpus
            total += len(hosts) * gpus.count if gpus else 0
        return total

    @property
    def version(self) -> SlurmVersion:
        """The Slurm version the inventory targets."""
        return self.spec.slurm.target

    @property
    def release(self) -> Release:
        """What the target Slurm release supports and requires."""
        return self.spec.slurm.release

    @property
    def tenants_by_name(self) -> dict[str, Tenant]:
        return {t.name: t for t in self.spec.tenants}

    def gpus_of(self, hosts: Iterable[str]) -> int:
        return sum(g.count for h in hosts if (g := self.node_type(h).gpus))

    def hosts_owned_by(self, owner: Owner) -> list[str]:
        return [h for h in self.hosts if self.owner_of.get(h) == owner]

    @property
    def owners(self) -> list[Owner]:
        """Owners with at least one host, in declaration order of the Owner enum."""
        present = set(self.owner_of.values())
        return [o for o in Owner if o in present]

    def quota(self, tenant: str) -> GpuQuota:
        """The tenant's GPU numbers in this view's scheduler (zero where it has none there)."""
        assert self.domain is not None, "quotas are per scheduler: take a view with owned_by()"
        return self.tenant_gpus.get(tenant, {}).get(self.domain, NO_GPUS)

    def owned_by(self, owner: Owner) -> Cluster:
        """This cluster as one scheduler sees it: only its hosts, the partitions, switches and blocks
        that hold some of them (the switch tree pruned, no empty lines), and its tenant numbers."""
        keep = {h for h, o in self.owner_of.items() if o == owner}
        below: dict[str, bool] = {}
        by_name = {s.name: s for s in self.switches}

        def has_hosts(name: str) -> bool:
            if name not in below:
                switch = by_name[name]
                below[name] = any(h in keep for h in switch.nodes) or any(
                    has_hosts(c) for c in switch.switches
                )
            return below[name]

        switches = [
            Switch(
                s.name, tuple(c for c in s.switches if has_hosts(c)), tuple(h for h in s.nodes if h in keep)
            )
            for s in self.switches
            if has_hosts(s.name)
        ]
        return Cluster(
            spec=self.spec,
            source=self.source,
            inventory=self.inventory,
            node_type_of={h: t for h, t in self.node_type_of.items() if h in keep},
            hosts_by_type={
                t: kept
                for t, hosts in self.hosts_by_type.items()
                if (kept := [h for h in hosts if h in keep])
            },
            partitions={
                p: kept for p, hosts in self.partitions.items() if (kept := [h for h in hosts if h in keep])
            },
            switches=switches,
            switch_path={h: path for h, path in self.switch_path.items() if h in keep},
            blocks={b: kept for b, hosts in self.blocks.items() if (kept := [h for h in hosts if h in keep])},
            block_of={h: b for h, b in self.block_of.items() if h in keep},
            owner_of={h: o for h, o in self.owner_of.items() if h in keep},
            entry_of={h: e for h, e in self.entry_of.items() if h in keep},
            overridden_types=self.overridden_types,
            storage_hosts=self.storage_hosts,
            tenant_gpus={
                t: {owner: numbers[owner]} for t, numbers in self.tenant_gpus.items() if owner in numbers
            },
            domain=owner,
        )


GPU_DEVICE_RE = re.compile(r"/dev/nvidia(0|[1-9][0-9]*)")


def device_list_problem(devices: str, count: int) -> str | None:
    """What is wrong with a node type's GPU device list, if anything: it names the `count` GPU
    device files /dev/nvidia0 ... /dev/nvidia<count-1> (the driver numbers them from 0), written
    as a Slurm hostlist (`/dev/nvidia[0-7]`)."""
    if re.search(r"\[[^]]*:[^]]*\]", devices):
        return (
            f"{devices}: device lists use Slurm's range syntax, `[0-7]` (hosts.yml's `[0:7]` is "
            f"Ansible's): e.g. /dev/nvidia[0-{count - 1}]"
        )
    try:
        names = hostlist.expand_hostlist(devices)
    except hostlist.BadHostlist as exc:
        return f"not a valid device list: {exc} (write e.g. /dev/nvidia[0-{count - 1}])"
    others = [n for n in names if not GPU_DEVICE_RE.fullmatch(n)]
    if others:
        return (
            f"{', '.join(others[:3])}{' ...' if len(others) > 3 else ''}: not a GPU device file; list "
            f"only the GPUs, by their absolute path /dev/nvidia<N> (e.g. /dev/nvidia[0-{count - 1}])"
        )
    if len(names) != len(set(names)):
        return f"{devices} names a device more than once"
    if len(names) != count:
        return f"{devices} names {len(names)} device(s) but count is {count}"
    expected = {f"/dev/nvidia{n}" for n in range(count)}
    if set(names) != expected:
        return (
            f"{devices}: the {count} GPUs of a node are /dev/nvidia0 to /dev/nvidia{count - 1} "
            f"(the driver numbers them from 0): /dev/nvidia[0-{count - 1}]"
        )
    return None


def _range_hint(name: str) -> str:
    """A Slurm hostlist or an Ansible range where an inventory name belongs."""
    if "[" in name:
        return (
            " (name a group or a host of the inventory; ranges like `gpu[01:04]` belong in "
            "hosts.yml, under a group to name here)"
        )
    return ""


def _descendants(inv: Inventory, group: str) -> set[str]:
    found: set[str] = set()
    queue = list(inv.group_children.get(group, []))
    while queue:
        child = queue.pop()
        if child not in found:
            found.add(child)
            queue.extend(inv.group_children.get(child, []))
    return found


SPLIT_TREE_FIX = (
    "; put the roots under one switch (the one that joins them), or set `fabric.separate_trees: true` "
    "if they are apart on purpose"
)
# Slurm's schedulers that read the switch tree: a Kubernetes node is in neither.
SLURM_OWNERS = (Owner.SLURM, Owner.SLURM_ON_KUBERNETES)


def split_tree_messages(cluster: Cluster) -> list[str]:
    """Per Slurm cluster (bare metal, Slurm on Kubernetes) whose nodes hang under more than one
    root switch: which nodes the widest root leaves out. slurmctld then warns `TOPOLOGY: no switch
    can reach all nodes` and never places a job across the roots."""
    messages = []
    for owner in SLURM_OWNERS:
        under: dict[str, list[str]] = {}
        for host, path in cluster.switch_path.items():
            if cluster.owner_of.get(host, Owner.SLURM) == owner:
                under.setdefault(path[0], []).append(host)
        if len(under) < 2:
            continue
        widest = max(sorted(under), key=lambda root: len(under[root]))
        left_out = sort_hosts(h for root, hosts in under.items() if root != widest for h in hosts)
        others = ", ".join(f"`{root}`" for root in sorted(under) if root != widest)
        which = "Slurm's nodes" if owner == Owner.SLURM else f"the nodes of {owner}"
        messages.append(
            f"{which} hang under {len(under)} root switches, so no switch reaches them all (slurmctld: "
            f"`no switch can reach all nodes`; no job spans two roots): root `{widest}` leaves out "
            f"{compress(left_out)} (under {others})"
        )
    return messages


def core_warnings(cluster: Cluster) -> list[Problem]:
    """What the core finds valid but worth a word (printed as warnings, exit code 0)."""
    warnings = []
    if cluster.spec.fabric.separate_trees:
        file = cluster.inventory.cluster_file
        for message in split_tree_messages(cluster):
            warnings.append(
                file.problem("cluster.fabric.separate_trees", message + " (separate on purpose, as set here)")
            )
    return warnings


def sort_hosts(hosts: Iterable[str]) -> list[str]:
    """Natural order (gpu2 before gpu10), as Slurm lists hosts."""
    return list(hostlist.numerically_sorted(list(hosts)))


class _Checker:
    """Cross-reference checks over a parsed spec; collects problems instead of stopping."""

    def __init__(self, inv: Inventory, spec: ClusterSpec) -> None:
        self.inv = inv
        self.spec = spec
        self.file: LoadedYaml = inv.cluster_file
        self.problems: list[Problem] = []
        self.cluster = Cluster(spec=spec, source=inv.display_root, inventory=inv)
        self.group_names = set(inv.groups)
        # Hosts two groups of hosts.yml list (reported there once): their other clashes (two leaf
        # switches, two blocks) are the same mistake, not reported again.
        self.listed_twice: set[str] = set()

    def fail(self, parts: Iterable[str | int], message: str) -> None:
        self.problems.append(self.file.problem(format_path(["cluster", *parts]), message))

    def hosts_of(self, name: str, parts: list[str | int]) -> list[str] | None:
        """Hosts named by an inventory group or host name, or a problem."""
        if name in self.group_names:
            members = self.inv.members(name)
            if not members:
                self.fail(parts, f"group `{name}` has no hosts")
            return members
        if name in self.inv.hostvars:
            return [name]
        self.fail(parts, f"`{name}` is not a host or group of {self.inv.hosts_file.file}{_range_hint(name)}")
        return None

    def run(self) -> Cluster:
        """The resolved cluster; what is wrong is in self.problems."""
        self.resolve_nodes()
        self.check_hosts()
        self.resolve_partitions()
        self.resolve_tree()
        self.resolve_blocks()
        self.check_users()
        self.check_tenants()
        check_slurm(self)
        check_node_software(self)
        check_storage(self)
        check_state_save(self)
        self.check_roles()
        return self.cluster

    def check_roles(self) -> None:
        """Every host of hosts.yml has a part in cluster.yml: a host in none is a mistake (a group
        left out of cluster.nodes, a misspelt controller) that would otherwise pass unnoticed."""
        slurm = self.spec.slurm
        used = set(self.cluster.node_type_of) | set(slurm.controller) | set(slurm.login)
        used |= {slurm.accounting.host} if slurm.accounting else set()
        used |= {slurm.rest_api.host} if slurm.rest_api else set()
        for fs in self.spec.storage:
            used |= set(self.cluster.storage_hosts.get(fs.name, []))
            used |= {fs.nfs_server.host} if fs.nfs_server else set()
        idle: dict[str, list[str]] = {}
        for host in self.inv.hostvars:
            if host not in used:
                idle.setdefault(self.inv.declared_at.get(host, "all"), []).append(host)
        for path, hosts in idle.items():
            which = f"host `{hosts[0]}` has" if len(hosts) == 1 else f"hosts {compress(hosts)} have"
            self.problems.append(
                self.inv.hosts_file.problem(
                    path,
                    f"{which} no part in {self.file.file}: in no group of cluster.nodes, and no "
                    "controller, login, accounting, REST API or storage host (give them one, or "
                    "remove them)",
                )
            )

    def owner_of_entry(self, index: int) -> Owner | None:
        """The owner a `nodes` entry gives its hosts; None (and a problem) when it must be said.

        With no `kubernetes:` or `cloud:` section there is only bare-metal Slurm; with either, the
        inventory must say, since a wrong guess puts two schedulers on the same GPUs."""
        entry = self.spec.nodes[index]
        if entry.owner == Owner.SLURM_ON_KUBERNETES and self.spec.kubernetes is None:
            self.fail(
                ["nodes", index, "owner"],
                "`slurm-on-kubernetes` needs the `kubernetes:` section (with `kubernetes.slurm`)",
            )
        if entry.owner is not None:
            return entry.owner
        if self.spec.kubernetes is None and self.spec.cloud is None:
            return Owner.SLURM
        self.fail(
            ["nodes", index, "owner"],
            "required when the inventory has a `kubernetes:` or `cloud:` section: say which one scheduler "
            "owns these hosts (slurm, kubernetes or slurm-on-kubernetes)",
        )
        return None

    def resolve_nodes(self) -> None:
        cluster = self.cluster
        entry_of: dict[str, int] = {}
        # (entry, earlier entry) -> hosts both name: one problem per pair, however many hosts.
        twice: dict[tuple[int, int], list[str]] = {}
        for index, entry in enumerate(self.spec.nodes):
            owner = self.owner_of_entry(index)
            node_type = self.spec.node_types.get(entry.type)
            if node_type is None:
                known = ", ".join(sorted(self.spec.node_types))
                self.fail(["nodes", index, "type"], f"unknown node type `{entry.type}` (known: {known})")
                continue
            hosts = self.hosts_of(entry.group, ["nodes", index, "group"]) or []
            overrides = entry.overrides
            if (overrides or entry.state) and owner not in (Owner.SLURM, None):
                self.fail(
                    ["nodes", index, "owner"],
                    "node settings of a group (memory_mb, features, weight, gpus, state) are Slurm's "
                    f"NodeName settings: hosts owned by {owner} take their node type's",
                )
            if overrides:
                cluster.overridden_types[index] = node_type.model_copy(update=overrides)
                if entry.gpus is not None:
                    self.check_gpus(entry.type, cluster.overridden_types[index], ["nodes", index, "gpus"])
            for host in hosts:
                if host in cluster.node_type_of:
                    twice.setdefault((index, entry_of[host]), []).append(host)
                    continue
                cluster.node_type_of[host] = entry.type
                if owner is not None:
                    cluster.owner_of[host] = owner
                entry_of[host] = index
                if overrides or entry.state:
                    cluster.entry_of[host] = index
        for (index, first), hosts in twice.items():
            if not self.listed_in_two_groups(index, first, hosts):
                self.fail(["nodes", index, "group"], self.named_twice(index, first, hosts))
        for type_name, node_type in self.spec.node_types.items():
            self.check_gpus(type_name, node_type)
        for host in sort_hosts(cluster.node_type_of):
            cluster.hosts_by_type.setdefault(cluster.node_type_of[host], []).append(host)

    def listing(self, group: str, host: str) -> tuple[str, str] | None:
        """The group (this one or one inside it) whose `hosts` lists `host`, and the key path there."""
        for candidate in [group, *sorted(_descendants(self.inv, group))]:
            where = self.inv.listed_at.get((candidate, host))
            if where is not None:
                return candidate, where
        return None

    def listed_in_two_groups(self, index: int, first: int, hosts: list[str]) -> bool:
        """Hosts that two unrelated groups of hosts.yml both list, each group given its node type
        by cluster.nodes: the mistake is the second listing in hosts.yml, reported there (one
        problem per listing). False when the mistake is in cluster.yml (a group listed with its
        parent, a group or host named twice), which named_twice reports."""
        entry, earlier = self.spec.nodes[index], self.spec.nodes[first]
        groups = set(self.inv.groups)
        if entry.group not in groups or earlier.group not in groups or entry.group == earlier.group:
            return False
        if entry.group in _descendants(self.inv, earlier.group) or earlier.group in _descendants(
            self.inv, entry.group
        ):
            return False
        at: dict[str, list[str]] = {}
        details: dict[str, tuple[str, str, str]] = {}
        for host in hosts:
            here, there = self.listing(entry.group, host), self.listing(earlier.group, host)
            if here is None or there is None:
                return False
            at.setdefault(here[1], []).append(host)
            details[here[1]] = (here[0], there[0], there[1])
        self.listed_twice.update(hosts)
        hosts_file = self.inv.hosts_file
        for path, listed in at.items():
            group, other, other_path = details[path]
            which = f"host `{listed[0]}` is" if len(listed) == 1 else f"hosts {compress(listed)} are"
            other_line = hosts_file.line_of(other_path)
            where = f"line {other_line}" if other_line else other_path
            self.problems.append(
                hosts_file.problem(
                    path,
                    f"{which} listed in group `{group}` here and in group `{other}` ({where}); "
                    f"cluster.nodes gives both groups their hosts (cluster.nodes[{first}] `{earlier.group}`, "
                    f"cluster.nodes[{index}] `{entry.group}`): list each host in one of them",
                )
            )
        return True

    def named_twice(self, index: int, first: int, hosts: list[str]) -> str:
        """Hosts an entry of cluster.nodes names after an earlier one did (a group listed with
        its parent group, or in two entries): said once, with the group that already holds them."""
        entry, earlier = self.spec.nodes[index], self.spec.nodes[first]
        cluster = self.cluster
        which = f"host `{hosts[0]}`" if len(hosts) == 1 else f"hosts {compress(hosts)}"
        theirs = cluster.owner_of.get(hosts[0])
        owner = entry.owner
        if owner is not None and theirs is not None and theirs != owner:
            return f"{which} would have two owners: `{theirs}` from cluster.nodes[{first}] (`{earlier.group}`) and `{owner}`"
        inside = (
            f" (group `{entry.group}` is inside `{earlier.group}`)"
            if entry.group in self.inv.groups and entry.group in _descendants(self.inv, earlier.group)
            else ""
        )
        return (
            f"{which} already {'has' if len(hosts) == 1 else 'have'} node type `{cluster.node_type_of[hosts[0]]}` "
            f"from cluster.nodes[{first}] (`{earlier.group}`){inside}: give each host one entry"
        )

    def check_gpus(self, type_name: str, node_type: NodeType, where: list[str | int] | None = None) -> None:
        gpus = node_type.gpus
        if gpus is None:
            return
        parts: list[str | int] = where or ["node_types", type_name, "gpus"]
        if gpus.autodetect == "off" and not gpus.devices:
            self.fail([*parts, "devices"], "device files are required unless autodetect is nvml")
            return
        if gpus.devices:
            problem = device_list_problem(gpus.devices, gpus.count)
            if problem:
                self.fail([*parts, "devices"], problem)

    def check_hosts(self) -> None:
        slurm = self.spec.slurm
        for index, host in enumerate(slurm.controller):
            if host not in self.inv.hostvars:
                self.fail(
                    ["slurm", "controller", index],
                    f"controller `{host}` is not a host of {self.inv.hosts_file.file}",
                )
        if len(set(slurm.controller)) != len(slurm.controller):
            self.fail(["slurm", "controller"], "a controller is listed twice")
        elif len(slurm.controller) > 1 and slurm.state_save_location is None:
            # Each controller's own /var/lib/slurm would leave the backup without the jobs.
            self.fail(
                ["slurm", "state_save_location"],
                f"{len(slurm.controller)} controllers ({', '.join(slurm.controller)}) need a "
                "StateSaveLocation they all share: set it to a path on a shared filesystem every "
                "controller mounts read/write",
            )

    def resolve_partitions(self) -> None:
        cluster = self.cluster
        tenants = {t.name for t in self.spec.tenants}
        for index, part in enumerate(self.spec.partitions):
            if part.name in cluster.partitions:
                self.fail(["partitions", index, "name"], f"partition `{part.name}` is defined twice")
                continue
            members: dict[str, None] = {}
            slurm_kinds: dict[Owner, str] = {}
            for n, name in enumerate(part.nodes):
                for host in self.hosts_of(name, ["partitions", index, "nodes", n]) or []:
                    if host not in cluster.node_type_of:
                        self.fail(
                            ["partitions", index, "nodes", n],
                            f"host `{host}` has no node type (add its group to cluster.nodes)",
                        )
                        break
                    owner = cluster.owner_of.get(host)
                    if owner == Owner.KUBERNETES:
                        self.fail(
                            ["partitions", index, "nodes", n],
                            f"host `{host}` is owned by kubernetes; a Slurm partition may only name hosts "
                            "owned by slurm or slurm-on-kubernetes",
                        )
                        break
                    if owner is not None:
                        slurm_kinds.setdefault(owner, host)
                    members.setdefault(host, None)
            if len(slurm_kinds) > 1:
                pair = " and ".join(f"`{h}` ({o})" for o, h in slurm_kinds.items())
                self.fail(
                    ["partitions", index, "nodes"],
                    f"the partition mixes bare-metal Slurm and Slurm on Kubernetes ({pair}): they are two Slurm clusters",
                )
            for n, tenant in enumerate(part.tenants):
                if tenant not in tenants:
                    self.fail(["partitions", index, "tenants", n], f"unknown tenant `{tenant}`")
            cluster.partitions[part.name] = sort_hosts(members)
        self.check_default_partition()
        in_partition = {h for hosts in cluster.partitions.values() for h in hosts}
        # Kubernetes-owned hosts are in no Slurm partition; Kueue and KAI queues reach them.
        orphans = [
            h
            for h in cluster.node_type_of
            if h not in in_partition and cluster.owner_of.get(h) != Owner.KUBERNETES
        ]
        if orphans:
            self.fail(["partitions"], f"host(s) in no partition: {compress(orphans)}")

    def check_default_partition(self) -> None:
        """Exactly one default partition per Slurm cluster (bare metal, and Slurm on Kubernetes):
        without one slurmctld logs `default partition not set` and refuses every job that names
        no partition; with two it keeps the last."""
        by_owner: dict[Owner, list[int]] = {}
        for index, part in enumerate(self.spec.partitions):
            owners = {
                o for h in self.cluster.partitions.get(part.name, []) if (o := self.cluster.owner_of.get(h))
            }
            for owner in owners or {Owner.SLURM}:
                by_owner.setdefault(owner, []).append(index)
        for owner, indexes in by_owner.items():
            names = [self.spec.partitions[i].name for i in indexes]
            defaults = [i for i in indexes if self.spec.partitions[i].default]
            which = "" if len(by_owner) == 1 else f" of {owner}"
            if not defaults:
                self.fail(
                    ["partitions"],
                    f"no partition{which} is the default: jobs that name no partition would be refused "
                    f"(slurmctld: `default partition not set`); mark one `default: true` "
                    f"(candidates: {', '.join(names)})",
                )
            for index in defaults[1:]:
                marked = ", ".join(self.spec.partitions[i].name for i in defaults)
                self.fail(
                    ["partitions", index, "default"],
                    f"{len(defaults)} partitions{which} are the default ({marked}): Slurm keeps only one; "
                    "leave `default: true` on one of them",
                )

    def resolve_tree(self) -> None:
        tree = self.spec.fabric.tree
        if not tree:
            return
        cluster = self.cluster
        parents: dict[str, str] = {}
        leaf_of: dict[str, str] = {}
        switches: dict[str, Switch] = {}
        for switch, children in tree.items():
            parts: list[str | int] = ["fabric", "tree", switch]
            if switch in self.group_names or switch in self.inv.hostvars:
                self.fail(parts, f"switch `{switch}` has the name of an inventory host or group")
            child_switches: list[str] = []
            nodes: dict[str, None] = {}
            for n, child in enumerate(children):
                if child in tree:
                    if child in parents:
                        self.fail([*parts, n], f"switch `{child}` is already a child of `{parents[child]}`")
                    parents[child] = switch
                    child_switches.append(child)
                    continue
                for host in self.hosts_of(child, [*parts, n]) or []:
                    if host not in cluster.node_type_of:
                        self.fail(
                            [*parts, n], f"host `{host}` has no node type (add its group to cluster.nodes)"
                        )
                        break
                    if host in leaf_of and leaf_of[host] != switch:
                        if host not in self.listed_twice:
                            self.fail(
                                [*parts, n], f"host `{host}` is already under leaf switch `{leaf_of[host]}`"
                            )
                        continue
                    leaf_of[host] = switch
                    nodes.setdefault(host, None)
            if child_switches and nodes:
                self.fail(parts, "a switch has either child switches or hosts, not both")
            if not child_switches and not nodes and children:
                continue
            if not children:
                self.fail(parts, "switch has no children")
            switches[switch] = Switch(switch, tuple(sorted(child_switches)), tuple(sort_hosts(nodes)))
        # Walk up from every switch; a revisit means a cycle. A switch already walked up from
        # reaches the top: walking on from it finds nothing new (linear time on a long chain).
        rooted: set[str] = set()
        for start in tree:
            trail = [start]
            on_trail = {start}
            current = start
            while current in parents and current not in rooted:
                current = parents[current]
                if current in on_trail:
                    chain = " -> ".join([*trail[trail.index(current) :], current])
                    self.fail(
                        ["fabric", "tree", start],
                        f"switch tree has a cycle: {chain} (each switch is a child of the next)",
                    )
                    return
                trail.append(current)
                on_trail.add(current)
            rooted.update(trail)
        missing = [h for h in cluster.node_type_of if h not in leaf_of]
        if missing:
            self.fail(["fabric", "tree"], f"host(s) under no leaf switch: {compress(missing)}")
        cluster.switches = [switches[name] for name in sorted(switches)]
        path_of: dict[str, tuple[str, ...]] = {}  # per leaf switch, shared by its hosts
        for host, leaf in leaf_of.items():
            if leaf not in path_of:
                path = [leaf]
                while path[-1] in parents:
                    path.append(parents[path[-1]])
                path_of[leaf] = tuple(reversed(path))
            cluster.switch_path[host] = path_of[leaf]
        if not self.spec.fabric.separate_trees:
            for message in split_tree_messages(cluster):
                self.fail(["fabric", "tree"], message + SPLIT_TREE_FIX)

    def resolve_blocks(self) -> None:
        fabric = self.spec.fabric
        cluster = self.cluster
        if fabric.block_sizes and not fabric.blocks:
            self.fail(["fabric", "block_sizes"], "block_sizes given but no blocks are defined")
        if fabric.default == "block" and not fabric.blocks:
            self.fail(["fabric", "default"], "default topology is `block` but no blocks are defined")
        if fabric.default == "tree" and not fabric.tree:
            self.fail(["fabric", "default"], "default topology is `tree` but no switch tree is defined")
        for block, names in fabric.blocks.items():
            parts: list[str | int] = ["fabric", "blocks", block]
            members: dict[str, None] = {}
            for n, name in enumerate(names):
                for host in self.hosts_of(name, [*parts, n]) or []:
                    if host not in cluster.node_type_of:
                        self.fail(
                            [*parts, n], f"host `{host}` has no node type (add its group to cluster.nodes)"
                        )
                        break
                    if host in cluster.block_of and cluster.block_of[host] != block:
                        if host not in self.listed_twice:
                            self.fail(
                                [*parts, n], f"host `{host}` is already in block `{cluster.block_of[host]}`"
                            )
                        continue
                    cluster.block_of[host] = block
                    members.setdefault(host, None)
            cluster.blocks[block] = sort_hosts(members)
        if fabric.blocks:
            missing = [h for h in cluster.node_type_of if h not in cluster.block_of]
            if missing:
                self.fail(["fabric", "blocks"], f"host(s) in no block: {compress(missing)}")
        sizes = fabric.block_sizes
        if sizes and cluster.blocks:
            smallest = min(len(h) for h in cluster.blocks.values())
            if sizes[0] > smallest:
                self.fail(
                    ["fabric", "block_sizes", 0],
                    f"base block size {sizes[0]} exceeds the smallest block ({smallest} nodes)",
                )
            for i in range(1, len(sizes)):
                ratio, rest = divmod(sizes[i], sizes[i - 1])
                if rest or ratio < 2 or ratio & (ratio - 1):
                    self.fail(
                        ["fabric", "block_sizes", i],
                        f"{sizes[i]} is not a power-of-two multiple of {sizes[i - 1]}",
                    )

    def check_id_range(self, parts: list[str | int], kind: str, value: int) -> bool:
        if any(low <= value <= high for low, high in UNIX_ID_RANGES):
            return True
        self.fail(
            parts,
            f"{kind} {value} is outside the ranges for people's accounts, {UNIX_ID_RANGES_TEXT} (the "
            "others belong to the system, to nobody and to systemd's containers)",
        )
        return False

    def check_users(self) -> None:
        """One name and one id per user and group on every host, no id of the system's, and only
        groups that exist. A user without `group` brings a private group (its name, gid = uid)."""
        group_at: dict[str, str] = {}  # group name -> where it is defined
        gid_at: dict[int, str] = {}  # gid -> the group holding it, and where
        for index, group in enumerate(self.spec.groups):
            parts: list[str | int] = ["groups", index]
            if group.name in group_at:
                self.fail(
                    [*parts, "name"], f"group `{group.name}` is defined twice (also {group_at[group.name]})"
                )
                continue
            group_at[group.name] = f"cluster.groups[{index}]"
            if not self.check_id_range([*parts, "gid"], "gid", group.gid):
                continue
            if group.gid in gid_at:
                self.fail([*parts, "gid"], f"gid {group.gid} is already the gid of {gid_at[group.gid]}")
            else:
                gid_at[group.gid] = f"group `{group.name}` (cluster.groups[{index}])"
        user_at: dict[str, int] = {}
        uid_at: dict[int, int] = {}
        for index, user in enumerate(self.spec.users):
            parts = ["users", index]
            if user.name in user_at:
                self.fail(
                    [*parts, "name"],
                    f"user `{user.name}` is defined twice (also cluster.users[{user_at[user.name]}])",
                )
                continue
            user_at[user.name] = index
            private = user.group is None
            if private and user.name in group_at:
                self.fail(
                    [*parts, "name"],
                    f"group `{user.name}`, this user's private group (it has no `group`), is defined twice "
                    f"(also {group_at[user.name]}): set `group: {user.name}` to make that one its primary group",
                )
                private = False
            elif private:
                group_at[user.name] = f"the private group of cluster.users[{index}]"
            if not self.check_id_range([*parts, "uid"], "uid", user.uid):
                continue
            if user.uid in uid_at:
                first = uid_at[user.uid]
                self.fail(
                    [*parts, "uid"],
                    f"uid {user.uid} is already the uid of `{self.spec.users[first].name}` (cluster.users[{first}])",
                )
            else:
                uid_at[user.uid] = index
            if private and user.uid in gid_at:
                self.fail(
                    [*parts, "uid"],
                    f"gid {user.uid} of this user's private group (it has no `group`) is already the gid of "
                    f"{gid_at[user.uid]}",
                )
            elif private:
                gid_at[user.uid] = f"the private group `{user.name}` (cluster.users[{index}])"
        for index, user in enumerate(self.spec.users):
            if user.group is not None and user.group not in group_at:
                self.fail(["users", index, "group"], f"unknown group `{user.group}` (not in cluster.groups)")
            for n, name in enumerate(user.groups):
                if name not in group_at:
                    self.fail(
                        ["users", index, "groups", n], f"unknown group `{name}` (not in cluster.groups)"
                    )

    def check_tenants(self) -> None:
        tenants = self.spec.tenants
        by_name: dict[str, Tenant] = {}
        index_of: dict[str, int] = {}
        qos_names = {q.name for q in self.spec.qos}
        users = {user.name for user in self.spec.users}
        for index, tenant in enumerate(tenants):
            if tenant.name in by_name:
                self.fail(["tenants", index, "name"], f"tenant `{tenant.name}` is defined twice")
                continue
            by_name[tenant.name] = tenant
            index_of[tenant.name] = index
            for n, user in enumerate(tenant.users):
                if users and user not in users:
                    self.fail(["tenants", index, "users", n], f"unknown user `{user}` (not in cluster.users)")
            for n, qos in enumerate(tenant.qos):
                if qos not in qos_names:
                    self.fail(["tenants", index, "qos", n], f"unknown QOS `{qos}`")
            if tenant.default_qos is not None:
                if tenant.default_qos not in qos_names:
                    self.fail(["tenants", index, "default_qos"], f"unknown QOS `{tenant.default_qos}`")
                elif tenant.qos and tenant.default_qos not in tenant.qos:
                    self.fail(
                        ["tenants", index, "default_qos"],
                        f"`{tenant.default_qos}` is not in the tenant's qos list",
                    )
        children: dict[str, list[Tenant]] = {}
        for name, tenant in by_name.items():
            if tenant.parent is None:
                continue
            if tenant.parent not in by_name:
                self.fail(["tenants", index_of[name], "parent"], f"unknown parent tenant `{tenant.parent}`")
                continue
            children.setdefault(tenant.parent, []).append(tenant)
        self.check_tenant_cycles(by_name, index_of)
        self.resolve_tenant_gpus(by_name, index_of)
        self.check_quotas(by_name, index_of, children)

    def check_tenant_cycles(self, by_name: dict[str, Tenant], index_of: dict[str, int]) -> None:
        # Each tenant is walked up at most once overall: a chain already known to end is not walked again.
        settled: set[str] = set()
        for name in by_name:
            trail: list[str] = []
            on_trail: set[str] = set()  # the trail as a set: a long chain costs linear time
            current: str | None = name
            while current is not None and current in by_name and current not in settled:
                if current in on_trail:
                    self.fail(
                        ["tenants", index_of[name], "parent"],
                        "tenant parents form a cycle: " + " -> ".join([*trail, current]),
                    )
                    break
                trail.append(current)
                on_trail.add(current)
                current = by_name[current].parent
            settled.update(trail)

    def resolve_tenant_gpus(self, by_name: dict[str, Tenant], index_of: dict[str, int]) -> None:
        """Each tenant's numbers per scheduler; the gpu_quota/gpu_limit shorthand goes to the one
        scheduler that has GPUs."""
        cluster = self.cluster
        gpu_owners = [o for o in Owner if cluster.gpus_of(cluster.hosts_owned_by(o))]
        for name, tenant in by_name.items():
            parts: list[str | int] = ["tenants", index_of[name]]
            numbers = dict(tenant.gpus)
            shorthand = tenant.gpu_quota is not None or tenant.gpu_limit is not None
            if shorthand and tenant.gpus:
                self.fail(
                    [*parts, "gpus"], "give GPU numbers either as gpu_quota/gpu_limit or as gpus, not both"
                )
            elif tenant.gpu_quota is None and tenant.gpu_limit is not None:
                self.fail([*parts, "gpu_limit"], "gpu_limit without gpu_quota")
            elif shorthand and len(gpu_owners) > 1:
                owners = ", ".join(gpu_owners)
                self.fail(
                    [*parts, "gpu_quota"],
                    f"GPUs here have several owners ({owners}): give this tenant's numbers per scheduler in `gpus`",
                )
            elif shorthand:
                quota = GpuQuota(quota=tenant.gpu_quota or 0, limit=tenant.gpu_limit)
                if gpu_owners:
                    numbers = {gpu_owners[0]: quota}
                elif quota.effective_limit:
                    self.fail([*parts, "gpu_quota"], "the cluster has no GPUs for this quota")
            cluster.tenant_gpus[name] = numbers

    def check_quotas(
        self, by_name: dict[str, Tenant], index_of: dict[str, int], children: dict[str, list[Tenant]]
    ) -> None:
        """Per scheduler: limits not below quotas nor above its GPUs; guarantees fit its GPUs."""
        cluster = self.cluster
        capacity = {o: cluster.gpus_of(cluster.hosts_owned_by(o)) for o in Owner}

        def key(tenant: Tenant, owner: Owner, field: str) -> list[str | int]:
            parts: list[str | int] = ["tenants", index_of[tenant.name]]
            if tenant.gpus:
                return [*parts, "gpus", owner.value, field]
            return [*parts, f"gpu_{field}"]

        for owner in Owner:
            total = capacity[owner]
            top_quota = 0
            for name, tenant in by_name.items():
                numbers = cluster.tenant_gpus.get(name, {}).get(owner)
                if numbers is None:
                    continue
                if numbers.effective_limit and not total:
                    self.fail(
                        key(tenant, owner, "quota"),
                        f"no GPU node is owned by {owner}: a quota there can never be met",
                    )
                    continue
                if numbers.effective_limit < numbers.quota:
                    self.fail(
                        key(tenant, owner, "limit"), f"limit {numbers.limit} is below quota {numbers.quota}"
                    )
                if numbers.effective_limit > total:
                    self.fail(
                        key(tenant, owner, "limit"),
                        f"limit {numbers.effective_limit} exceeds the {total} GPUs owned by {owner}",
                    )
                if tenant.parent is None:
                    top_quota += numbers.quota
                elif tenant.parent in by_name and owner not in cluster.tenant_gpus.get(tenant.parent, {}):
                    self.fail(
                        key(tenant, owner, "quota"),
                        f"parent tenant `{tenant.parent}` has no GPUs in {owner}: give it numbers there that cover its children",
                    )
                kids = children.get(name, [])
                child_quota = sum(cluster.tenant_gpus.get(k.name, {}).get(owner, NO_GPUS).quota for k in kids)
                if kids and child_quota > numbers.quota:
                    self.fail(
                        key(tenant, owner, "quota"),
                        f"child tenants' quotas in {owner} add up to {child_quota}, more than this tenant's {numbers.quota}",
                    )
            if top_quota > total:
                self.fail(
                    ["tenants"],
                    f"top-level tenants' quotas in {owner} add up to {top_quota}, more than the {total} GPUs it owns",
                )


def pydantic_problems(
    file: LoadedYaml,
    exc: ValidationError,
    prefix: tuple[str, ...] = (),
    root: type[BaseModel] | None = None,
) -> list[Problem]:
    """Pydantic's errors as problems at their key path (`prefix` for a section validated alone,
    `root` the model validated: it lets a misspelt or misplaced key be named as such)."""
    return model_problems(file, exc, root, prefix)


def parse_spec(file: LoadedYaml) -> ClusterSpec:
    """Validate the cluster file's shape (keys, types, ranges) outside the layers' sections."""
    try:
        return ClusterFile.model_validate(file.data).cluster
    except ValidationError as exc:
        raise InventoryError(pydantic_problems(file, exc, root=ClusterFile)) from None


def resolve(inv: Inventory, spec: ClusterSpec) -> tuple[Cluster, list[Problem]]:
    """The spec resolved against the inventory's hosts, and every cross-reference problem."""
    checker = _Checker(inv, spec)
    cluster = checker.run()
    return cluster, checker.problems
