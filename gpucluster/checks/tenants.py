"""Checks of the tenants: names, users and QOS that exist, parents without cycles, quotas and limits each scheduler can meet."""

from __future__ import annotations

from gpucluster.model.base import Owner
from gpucluster.model.cluster import NO_GPUS
from gpucluster.model.spec import Tenant
from gpucluster.resolve import Resolution, tenants_by_name


def check_tenants(r: Resolution) -> None:
    """Each tenant once, with users, QOS and a parent that exist."""
    tenants = r.spec.tenants
    by_name: dict[str, Tenant] = {}
    index_of: dict[str, int] = {}
    qos_names = {q.name for q in r.spec.qos}
    users = {user.name for user in r.spec.users}
    for index, tenant in enumerate(tenants):
        if tenant.name in by_name:
            r.fail(["tenants", index, "name"], f"tenant `{tenant.name}` is defined twice")
            continue
        by_name[tenant.name] = tenant
        index_of[tenant.name] = index
        for n, user in enumerate(tenant.users):
            if users and user not in users:
                r.fail(["tenants", index, "users", n], f"unknown user `{user}` (not in cluster.users)")
        for n, qos in enumerate(tenant.qos):
            if qos not in qos_names:
                r.fail(["tenants", index, "qos", n], f"unknown QOS `{qos}`")
        if tenant.default_qos is not None:
            if tenant.default_qos not in qos_names:
                r.fail(["tenants", index, "default_qos"], f"unknown QOS `{tenant.default_qos}`")
            elif tenant.qos and tenant.default_qos not in tenant.qos:
                r.fail(
                    ["tenants", index, "default_qos"],
                    f"`{tenant.default_qos}` is not in the tenant's qos list",
                )
    for name, tenant in by_name.items():
        if tenant.parent is not None and tenant.parent not in by_name:
            r.fail(["tenants", index_of[name], "parent"], f"unknown parent tenant `{tenant.parent}`")


def check_tenant_cycles(r: Resolution) -> None:
    """Parents that form no cycle."""
    by_name, index_of = tenants_by_name(r.spec)
    # Each tenant is walked up at most once overall: a chain already known to end is not walked again.
    settled: set[str] = set()
    for name in by_name:
        trail: list[str] = []
        on_trail: set[str] = set()  # the trail as a set: a long chain costs linear time
        current: str | None = name
        while current is not None and current in by_name and current not in settled:
            if current in on_trail:
                r.fail(
                    ["tenants", index_of[name], "parent"],
                    "tenant parents form a cycle: " + " -> ".join([*trail, current]),
                )
                break
            trail.append(current)
            on_trail.add(current)
            current = by_name[current].parent
        settled.update(trail)


def check_quotas(r: Resolution) -> None:
    """Per scheduler: limits not below quotas nor above its GPUs; guarantees fit its GPUs."""
    cluster = r.cluster
    by_name, index_of = tenants_by_name(r.spec)
    children: dict[str, list[Tenant]] = {}
    for tenant in by_name.values():
        if tenant.parent in by_name:
            children.setdefault(tenant.parent, []).append(tenant)
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
                r.fail(
                    key(tenant, owner, "quota"),
                    f"no GPU node is owned by {owner}: a quota there can never be met",
                )
                continue
            if numbers.effective_limit < numbers.quota:
                r.fail(key(tenant, owner, "limit"), f"limit {numbers.limit} is below quota {numbers.quota}")
            if numbers.effective_limit > total:
                r.fail(
                    key(tenant, owner, "limit"),
                    f"limit {numbers.effective_limit} exceeds the {total} GPUs owned by {owner}",
                )
            if tenant.parent is None:
                top_quota += numbers.quota
            elif tenant.parent in by_name and owner not in cluster.tenant_gpus.get(tenant.parent, {}):
                r.fail(
                    key(tenant, owner, "quota"),
                    f"parent tenant `{tenant.parent}` has no GPUs in {owner}: give it numbers there that cover its children",
                )
            kids = children.get(name, [])
            child_quota = sum(cluster.tenant_gpus.get(k.name, {}).get(owner, NO_GPUS).quota for k in kids)
            if kids and child_quota > numbers.quota:
                r.fail(
                    key(tenant, owner, "quota"),
                    f"child tenants' quotas in {owner} add up to {child_quota}, more than this tenant's {numbers.quota}",
                )
        if top_quota > total:
            r.fail(
                ["tenants"],
                f"top-level tenants' quotas in {owner} add up to {top_quota}, more than the {total} GPUs it owns",
            )
