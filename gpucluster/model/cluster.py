"""The resolved cluster: the inventory's hosts with their node type, owner, partitions, switches,
blocks and tenants' GPU numbers per scheduler, computed once (by gpucluster.resolve) and read by
every check and renderer."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TypeVar, cast

import hostlist

from gpucluster.inventory import Inventory
from gpucluster.model.base import Owner
from gpucluster.model.releases import Release, SlurmVersion
from gpucluster.model.spec import (
    BLOCK_TOPOLOGY,
    FLAT_TOPOLOGY,
    TREE_TOPOLOGY,
    ClusterSpec,
    GpuQuota,
    NodeType,
    Tenant,
)

T = TypeVar("T")

# Built without validating: validating it would build GpuQuota's validator at import time, which
# every command pays for (the models' validators are built on first use).
NO_GPUS = GpuQuota.model_construct()


@dataclass(frozen=True)
class Switch:
    name: str
    switches: tuple[str, ...]
    nodes: tuple[str, ...]
    # Names the site's topology lists under this leaf that are no Slurm node (fabric.placeholder_nodes).
    placeholders: tuple[str, ...] = ()


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
        """Compute hosts, naturally sorted (a copy: callers may change it)."""
        return list(self.derived("hosts", lambda: sort_hosts(self.node_type_of)))

    def derived(self, name: str, compute: Callable[[], T]) -> T:
        """`compute()`, kept under `name` while the maps of hosts to node types, entries and
        owners stay the ones it was computed from: values asked for per host or per tenant (the
        sorted hosts, the Slurm view's GPU kinds) are computed once per render instead of hundreds
        of times. The value is shared: callers do not change it."""
        # The maps are filled once, by resolve (a view is a new Cluster with maps of its own): their
        # identity and size say whether they are the ones the value was computed from.
        key = tuple((id(m), len(m)) for m in (self.node_type_of, self.entry_of, self.owner_of))
        kept: dict[str, tuple[object, object]] = self.__dict__.setdefault("_derived", {})
        found = kept.get(name)
        if found is None or found[0] != key:
            found = (key, compute())
            kept[name] = found
        return cast(T, found[1])

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
            """Whether the switch has some of the hosts below it (without recursion: a switch tree
            may be a chain thousands of switches long)."""
            stack = [name]
            while stack:
                current = stack[-1]
                if current in below:
                    stack.pop()
                    continue
                children = [c for c in by_name[current].switches if c not in below]
                if children:
                    stack.extend(children)
                    continue
                switch = by_name[current]
                below[current] = any(h in keep for h in switch.nodes) or any(
                    below[c] for c in switch.switches
                )
                stack.pop()
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


# --- Slurm's topologies (topology.yaml from 25.05; one of them in topology.conf before) -------------


def block_topologies(cluster: Cluster) -> dict[str, list[str]]:
    """Topology name -> its blocks (those of `cluster`, a view keeps its own): each set of
    fabric.block_sets, or every block as BLOCK_TOPOLOGY."""
    sets = cluster.spec.fabric.block_sets
    if not sets:
        return {BLOCK_TOPOLOGY: sorted(cluster.blocks)} if cluster.blocks else {}
    found = {name: [b for b in s.blocks if b in cluster.blocks] for name, s in sets.items()}
    return {name: blocks for name, blocks in found.items() if blocks}


def topology_of_block(cluster: Cluster) -> dict[str, str]:
    """Block -> the name of the block topology holding it."""
    return {block: name for name, blocks in block_topologies(cluster).items() for block in blocks}


def topology_names(cluster: Cluster) -> list[str]:
    """The topologies a partition may name (FLAT_TOPOLOGY always: it needs nothing)."""
    tree = [TREE_TOPOLOGY] if cluster.switches else []
    return [*block_topologies(cluster), *tree, FLAT_TOPOLOGY]


def default_topology(cluster: Cluster) -> str | None:
    """The topology a job is placed by when its partition names none: fabric.default where `cluster`
    has it, else the blocks if any, else the tree; None when there is no topology."""
    blocks = list(block_topologies(cluster))
    chosen = cluster.spec.fabric.default
    wanted = {"tree": [TREE_TOPOLOGY], "block": blocks[:1], FLAT_TOPOLOGY: [FLAT_TOPOLOGY]}.get(
        chosen, [chosen]
    )
    present = [*blocks, *([TREE_TOPOLOGY] if cluster.switches else []), FLAT_TOPOLOGY]
    for name in wanted:
        if name in present:
            return name
    return next(iter([*blocks, *([TREE_TOPOLOGY] if cluster.switches else [])]), None)


def topology_hosts(cluster: Cluster, name: str) -> set[str] | None:
    """The hosts a topology places jobs on (None: any host, the flat topology)."""
    if name == FLAT_TOPOLOGY:
        return None
    if name == TREE_TOPOLOGY:
        return set(cluster.switch_path)
    blocks = block_topologies(cluster).get(name, [])
    return {host for block in blocks for host in cluster.blocks[block]}


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


def sort_hosts(hosts: Iterable[str]) -> list[str]:
    """Natural order (gpu2 before gpu10), as Slurm lists hosts."""
    return list(hostlist.numerically_sorted(list(hosts)))
