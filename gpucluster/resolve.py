"""The resolver: an inventory and its parsed cluster.yml -> the resolved Cluster (gpucluster.model.cluster).

`Resolution` is what every check works with (gpucluster.model.checking describes it): the
inventory, the spec, the cluster being resolved, and a way to report a problem at a key path. The
steps here turn names into hosts (node groups, partitions' members, the switch tree, blocks, each
tenant's GPU numbers per scheduler) and report what cannot be resolved; gpucluster.layers runs them
with every check, in the order of its one table, and raises one InventoryError listing every problem.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from pydantic import BaseModel, ValidationError

from gpucluster.errors import InventoryError, Problem, format_path
from gpucluster.hostlists import compress
from gpucluster.inventory import Inventory
from gpucluster.keyhints import model_problems
from gpucluster.model.base import Owner
from gpucluster.model.cluster import Cluster, Switch, sort_hosts
from gpucluster.model.spec import ClusterFile, ClusterSpec, GpuQuota, Tenant
from gpucluster.yamlfile import LoadedYaml


def _range_hint(name: str) -> str:
    """A Slurm hostlist or an Ansible range where an inventory name belongs."""
    if "[" in name:
        return (
            " (name a group or a host of the inventory; ranges like `gpu[01:04]` belong in "
            "hosts.yml, under a group to name here)"
        )
    return ""


def descendants(inv: Inventory, group: str) -> set[str]:
    found: set[str] = set()
    queue = list(inv.group_children.get(group, []))
    while queue:
        child = queue.pop()
        if child not in found:
            found.add(child)
            queue.extend(inv.group_children.get(child, []))
    return found


class Resolution:
    """The cluster being resolved and the problems found so far (gpucluster.model.checking.CheckContext)."""

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
                self.fail(
                    parts,
                    f"group `{name}` has no hosts: remove it here (hosts decommissioned), or give it "
                    f"hosts in {self.inv.hosts_file.file}",
                )
            return members
        if name in self.inv.hostvars:
            return [name]
        self.fail(parts, f"`{name}` is not a host or group of {self.inv.hosts_file.file}{_range_hint(name)}")
        return None


def owner_of_entry(r: Resolution, index: int) -> Owner | None:
    """The owner a `nodes` entry gives its hosts; None (and a problem) when it must be said.

    With no `kubernetes:` or `cloud:` section there is only bare-metal Slurm; with either, the
    inventory must say, since a wrong guess puts two schedulers on the same GPUs."""
    entry = r.spec.nodes[index]
    if entry.owner == Owner.SLURM_ON_KUBERNETES and r.spec.kubernetes is None:
        r.fail(
            ["nodes", index, "owner"],
            "`slurm-on-kubernetes` needs the `kubernetes:` section (with `kubernetes.slurm`)",
        )
    if entry.owner is not None:
        return entry.owner
    if r.spec.kubernetes is None and r.spec.cloud is None:
        return Owner.SLURM
    r.fail(
        ["nodes", index, "owner"],
        "required when the inventory has a `kubernetes:` or `cloud:` section: say which one scheduler "
        "owns these hosts (slurm, kubernetes or slurm-on-kubernetes)",
    )
    return None


def resolve_nodes(r: Resolution) -> None:
    cluster = r.cluster
    entry_of: dict[str, int] = {}
    # (entry, earlier entry) -> hosts both name: one problem per pair, however many hosts.
    twice: dict[tuple[int, int], list[str]] = {}
    for index, entry in enumerate(r.spec.nodes):
        owner = owner_of_entry(r, index)
        node_type = r.spec.node_types.get(entry.type)
        if node_type is None:
            known = ", ".join(sorted(r.spec.node_types))
            r.fail(["nodes", index, "type"], f"unknown node type `{entry.type}` (known: {known})")
            continue
        hosts = r.hosts_of(entry.group, ["nodes", index, "group"]) or []
        overrides = entry.overrides
        if (overrides or entry.state) and owner not in (Owner.SLURM, None):
            r.fail(
                ["nodes", index, "owner"],
                "node settings of a group (memory_mb, features, weight, gpus, state) are Slurm's "
                f"NodeName settings: hosts owned by {owner} take their node type's",
            )
        if overrides:
            cluster.overridden_types[index] = node_type.model_copy(update=overrides)
        for host in hosts:
            if host in cluster.node_type_of:
                twice.setdefault((index, entry_of[host]), []).append(host)
                continue
            cluster.node_type_of[host] = entry.type
            if owner is not None:
                cluster.owner_of[host] = owner
            entry_of[host] = index
            if overrides or entry.state or (entry.power and entry.power.saved):
                cluster.entry_of[host] = index
    for (index, first), hosts in twice.items():
        if not listed_in_two_groups(r, index, first, hosts):
            r.fail(["nodes", index, "group"], named_twice(r, index, first, hosts))
    for host in sort_hosts(cluster.node_type_of):
        cluster.hosts_by_type.setdefault(cluster.node_type_of[host], []).append(host)


def listing(r: Resolution, group: str, host: str) -> tuple[str, str] | None:
    """The group (this one or one inside it) whose `hosts` lists `host`, and the key path there."""
    for candidate in [group, *sorted(descendants(r.inv, group))]:
        where = r.inv.listed_at.get((candidate, host))
        if where is not None:
            return candidate, where
    return None


def listed_in_two_groups(r: Resolution, index: int, first: int, hosts: list[str]) -> bool:
    """Hosts that two unrelated groups of hosts.yml both list, each group given its node type
    by cluster.nodes: the mistake is the second listing in hosts.yml, reported there (one
    problem per listing). False when the mistake is in cluster.yml (a group listed with its
    parent, a group or host named twice), which named_twice reports."""
    entry, earlier = r.spec.nodes[index], r.spec.nodes[first]
    groups = set(r.inv.groups)
    if entry.group not in groups or earlier.group not in groups or entry.group == earlier.group:
        return False
    if entry.group in descendants(r.inv, earlier.group) or earlier.group in descendants(r.inv, entry.group):
        return False
    at: dict[str, list[str]] = {}
    details: dict[str, tuple[str, str, str]] = {}
    for host in hosts:
        here, there = listing(r, entry.group, host), listing(r, earlier.group, host)
        if here is None or there is None:
            return False
        at.setdefault(here[1], []).append(host)
        details[here[1]] = (here[0], there[0], there[1])
    r.listed_twice.update(hosts)
    hosts_file = r.inv.hosts_file
    for path, listed in at.items():
        group, other, other_path = details[path]
        which = f"host `{listed[0]}` is" if len(listed) == 1 else f"hosts {compress(listed)} are"
        other_line = hosts_file.line_of(other_path)
        where = f"line {other_line}" if other_line else other_path
        r.problems.append(
            hosts_file.problem(
                path,
                f"{which} listed in group `{group}` here and in group `{other}` ({where}); "
                f"cluster.nodes gives both groups their hosts (cluster.nodes[{first}] `{earlier.group}`, "
                f"cluster.nodes[{index}] `{entry.group}`): list each host in one of them",
            )
        )
    return True


def named_twice(r: Resolution, index: int, first: int, hosts: list[str]) -> str:
    """Hosts an entry of cluster.nodes names after an earlier one did (a group listed with
    its parent group, or in two entries): said once, with the group that already holds them."""
    entry, earlier = r.spec.nodes[index], r.spec.nodes[first]
    cluster = r.cluster
    which = f"host `{hosts[0]}`" if len(hosts) == 1 else f"hosts {compress(hosts)}"
    theirs = cluster.owner_of.get(hosts[0])
    owner = entry.owner
    if owner is not None and theirs is not None and theirs != owner:
        return f"{which} would have two owners: `{theirs}` from cluster.nodes[{first}] (`{earlier.group}`) and `{owner}`"
    inside = (
        f" (group `{entry.group}` is inside `{earlier.group}`)"
        if entry.group in r.inv.groups and entry.group in descendants(r.inv, earlier.group)
        else ""
    )
    return (
        f"{which} already {'has' if len(hosts) == 1 else 'have'} node type `{cluster.node_type_of[hosts[0]]}` "
        f"from cluster.nodes[{first}] (`{earlier.group}`){inside}: give each host one entry"
    )


def resolve_partitions(r: Resolution) -> None:
    cluster = r.cluster
    tenants = {t.name for t in r.spec.tenants}
    for index, part in enumerate(r.spec.partitions):
        if part.name in cluster.partitions:
            r.fail(["partitions", index, "name"], f"partition `{part.name}` is defined twice")
            continue
        members: dict[str, None] = {}
        slurm_kinds: dict[Owner, str] = {}
        kubernetes_named: set[int] = set()
        for n, name in enumerate(part.nodes):
            for host in r.hosts_of(name, ["partitions", index, "nodes", n]) or []:
                if host not in cluster.node_type_of:
                    r.fail(
                        ["partitions", index, "nodes", n],
                        f"host `{host}` has no node type (add its group to cluster.nodes)",
                    )
                    break
                owner = cluster.owner_of.get(host)
                if owner == Owner.KUBERNETES:
                    # Said once per name (a host hosts.yml lists in a second group: there); the
                    # name's other hosts stay in the partition, not reported in none.
                    if n not in kubernetes_named and host not in r.listed_twice:
                        kubernetes_named.add(n)
                        r.fail(
                            ["partitions", index, "nodes", n],
                            f"host `{host}` is owned by kubernetes; a Slurm partition may only name hosts "
                            "owned by slurm or slurm-on-kubernetes",
                        )
                    continue
                if owner is not None:
                    slurm_kinds.setdefault(owner, host)
                members.setdefault(host, None)
        if len(slurm_kinds) > 1:
            pair = " and ".join(f"`{h}` ({o})" for o, h in slurm_kinds.items())
            r.fail(
                ["partitions", index, "nodes"],
                f"the partition mixes bare-metal Slurm and Slurm on Kubernetes ({pair}): they are two Slurm clusters",
            )
        for n, tenant in enumerate(part.tenants):
            if tenant not in tenants:
                r.fail(["partitions", index, "tenants", n], f"unknown tenant `{tenant}`")
        cluster.partitions[part.name] = sort_hosts(members)


def resolve_tree(r: Resolution) -> None:
    tree = r.spec.fabric.tree
    if not tree:
        return
    cluster = r.cluster
    parents: dict[str, str] = {}
    leaf_of: dict[str, str] = {}
    switches: dict[str, Switch] = {}
    placeholders = set(r.spec.fabric.placeholder_nodes)
    used: set[str] = set()
    for switch, children in tree.items():
        parts: list[str | int] = ["fabric", "tree", switch]
        if switch in r.group_names or switch in r.inv.hostvars:
            r.fail(parts, f"switch `{switch}` has the name of an inventory host or group")
        child_switches: list[str] = []
        nodes: dict[str, None] = {}
        unknown: list[str] = []
        for n, child in enumerate(children):
            if child in placeholders and child not in tree:
                unknown.append(child)
                used.add(child)
                continue
            if child in tree:
                if child in parents:
                    r.fail([*parts, n], f"switch `{child}` is already a child of `{parents[child]}`")
                parents[child] = switch
                child_switches.append(child)
                continue
            for host in r.hosts_of(child, [*parts, n]) or []:
                if host not in cluster.node_type_of:
                    r.fail([*parts, n], f"host `{host}` has no node type (add its group to cluster.nodes)")
                    break
                if host in leaf_of and leaf_of[host] != switch:
                    if host not in r.listed_twice:
                        r.fail([*parts, n], f"host `{host}` is already under leaf switch `{leaf_of[host]}`")
                    continue
                leaf_of[host] = switch
                nodes.setdefault(host, None)
        if child_switches and (nodes or unknown):
            r.fail(parts, "a switch has either child switches or hosts, not both")
        if not child_switches and not nodes and not unknown and children:
            continue
        if not children:
            r.fail(parts, "switch has no children")
        switches[switch] = Switch(
            switch, tuple(sorted(child_switches)), tuple(sort_hosts(nodes)), tuple(sort_hosts(unknown))
        )
    for index, name in enumerate(r.spec.fabric.placeholder_nodes):
        if name in r.group_names or name in r.inv.hostvars:
            r.fail(
                ["fabric", "placeholder_nodes", index],
                f"`{name}` is an inventory host or group: name it in the tree",
            )
        elif name not in used:
            r.fail(["fabric", "placeholder_nodes", index], f"no leaf switch of the tree lists `{name}`")
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
                r.fail(
                    ["fabric", "tree", start],
                    f"switch tree has a cycle: {chain} (each switch is a child of the next)",
                )
                return
            trail.append(current)
            on_trail.add(current)
        rooted.update(trail)
    outside: set[str] = set()
    for index, name in enumerate(r.spec.fabric.outside_tree):
        hosts = r.hosts_of(name, ["fabric", "outside_tree", index]) or []
        under = [h for h in hosts if h in leaf_of]
        if under:
            r.fail(
                ["fabric", "outside_tree", index],
                f"{compress(under)} are under a leaf switch: remove `{name}` here",
            )
        outside.update(hosts)
    missing = [h for h in cluster.node_type_of if h not in leaf_of and h not in outside]
    if missing:
        r.fail(
            ["fabric", "tree"],
            f"host(s) under no leaf switch: {compress(missing)} (put them under one, or name them in "
            "fabric.outside_tree if they are outside the switch tree on purpose)",
        )
    # A leaf whose groups all came out empty (reported above) is left out: so is it from its parent.
    cluster.switches = [
        Switch(name, tuple(c for c in switches[name].switches if c in switches), switches[name].nodes)
        for name in sorted(switches)
    ]
    path_of: dict[str, tuple[str, ...]] = {}  # per leaf switch, shared by its hosts
    for host, leaf in leaf_of.items():
        if leaf not in path_of:
            path = [leaf]
            while path[-1] in parents:
                path.append(parents[path[-1]])
            path_of[leaf] = tuple(reversed(path))
        cluster.switch_path[host] = path_of[leaf]


def resolve_blocks(r: Resolution) -> None:
    fabric = r.spec.fabric
    cluster = r.cluster
    for block, names in fabric.blocks.items():
        parts: list[str | int] = ["fabric", "blocks", block]
        members: dict[str, None] = {}
        for n, name in enumerate(names):
            for host in r.hosts_of(name, [*parts, n]) or []:
                if host not in cluster.node_type_of:
                    r.fail([*parts, n], f"host `{host}` has no node type (add its group to cluster.nodes)")
                    break
                if host in cluster.block_of and cluster.block_of[host] != block:
                    if host not in r.listed_twice:
                        r.fail([*parts, n], f"host `{host}` is already in block `{cluster.block_of[host]}`")
                    continue
                cluster.block_of[host] = block
                members.setdefault(host, None)
        cluster.blocks[block] = sort_hosts(members)
    # Only the hosts that are in an NVLink domain are in a block: the partitions' topologies say
    # where the others' jobs go (gpucluster.checks.fabric).


def tenants_by_name(spec: ClusterSpec) -> tuple[dict[str, Tenant], dict[str, int]]:
    """Each tenant by name, and its index in cluster.tenants (the first, where a name is given twice)."""
    by_name: dict[str, Tenant] = {}
    index_of: dict[str, int] = {}
    for index, tenant in enumerate(spec.tenants):
        if tenant.name not in by_name:
            by_name[tenant.name] = tenant
            index_of[tenant.name] = index
    return by_name, index_of


def resolve_tenant_gpus(r: Resolution) -> None:
    """Each tenant's numbers per scheduler; the gpu_quota/gpu_limit shorthand goes to the one
    scheduler that has GPUs."""
    cluster = r.cluster
    by_name, index_of = tenants_by_name(r.spec)
    gpu_owners = [o for o in Owner if cluster.gpus_of(cluster.hosts_owned_by(o))]
    for name, tenant in by_name.items():
        parts: list[str | int] = ["tenants", index_of[name]]
        numbers = dict(tenant.gpus)
        shorthand = tenant.gpu_quota is not None or tenant.gpu_limit is not None
        if shorthand and tenant.gpus:
            r.fail([*parts, "gpus"], "give GPU numbers either as gpu_quota/gpu_limit or as gpus, not both")
        elif tenant.gpu_quota is None and tenant.gpu_limit is not None:
            r.fail([*parts, "gpu_limit"], "gpu_limit without gpu_quota")
        elif shorthand and len(gpu_owners) > 1:
            owners = ", ".join(gpu_owners)
            r.fail(
                [*parts, "gpu_quota"],
                f"GPUs here have several owners ({owners}): give this tenant's numbers per scheduler in `gpus`",
            )
        elif shorthand:
            quota = GpuQuota(quota=tenant.gpu_quota or 0, limit=tenant.gpu_limit)
            if gpu_owners:
                numbers = {gpu_owners[0]: quota}
            elif quota.effective_limit:
                r.fail([*parts, "gpu_quota"], "the cluster has no GPUs for this quota")
        cluster.tenant_gpus[name] = numbers


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


def resolve(
    inv: Inventory, spec: ClusterSpec, steps: Iterable[Callable[[Resolution], None]]
) -> tuple[Cluster, list[Problem]]:
    """The spec resolved against the inventory's hosts by `steps` (gpucluster.layers.CHECKS: the
    resolution steps here and every check, in order), and every problem they found."""
    resolution = Resolution(inv, spec)
    for step in steps:
        step(resolution)
    return resolution.cluster, resolution.problems
