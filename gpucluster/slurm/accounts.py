"""Tenants -> the Slurm associations that should exist (cluster, QOS, accounts, users).

This desired state is rendered to slurm/accounts.yaml; the slurm_accounts role reconciles
sacctmgr against it, and the Kubernetes queues are checked against the same numbers.
"""

from __future__ import annotations

from typing import Any

from gpucluster.model.cluster import Cluster
from gpucluster.model.spec import Qos, Tenant
from gpucluster.slurm.settings import slurm_cluster_name
from gpucluster.slurm.sharing import grp_tres


def _qos_entry(qos: Qos) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": qos.name, "priority": qos.priority}
    if qos.max_gpus_per_user is not None:
        entry["max_tres_per_user"] = f"gres/gpu={qos.max_gpus_per_user}"
    if qos.max_gpus_per_job is not None:
        entry["max_tres_per_job"] = f"gres/gpu={qos.max_gpus_per_job}"
    if qos.grp_gpus is not None:
        entry["grp_tres"] = f"gres/gpu={qos.grp_gpus}"
    if qos.max_wall is not None:
        entry["max_wall"] = qos.max_wall
    if qos.preempt:
        entry["preempt"] = sorted(qos.preempt)
    return entry


def fair_shares(cluster: Cluster, tenant: Tenant) -> int:
    """The account's Fairshare= (its shares of the cluster) in the scheduler `cluster` is a view of.

    Where this Slurm has GPUs, a tenant's shares are its GPU quota, so that the quota is what
    Slurm's fair-share holds it to: an account that used less than its guaranteed GPUs over the
    decay half-life is placed first. A tenant without a quota there gets one share, the least. A
    Slurm without GPUs keeps the tenants' `fairshare`. (The limit is GrpTRES; `fairshare` weighs
    the share of borrowed GPUs on Kubernetes, where quotas are guaranteed by Kueue and KAI.)"""
    if not cluster.total_gpus:
        return tenant.fairshare
    return cluster.quota(tenant.name).quota or 1


def desired_associations(cluster: Cluster) -> dict[str, Any]:
    """Plain data (sorted, deterministic) describing every association gpucluster manages, with
    the tenants' numbers in the scheduler `cluster` is a view of (Cluster.owned_by)."""
    spec = cluster.spec
    accounts = []
    for tenant in sorted(spec.tenants, key=lambda t: t.name):
        gpus = cluster.quota(tenant.name)
        accounts.append(
            {
                "name": tenant.name,
                "parent": tenant.parent or "root",
                "fairshare": fair_shares(cluster, tenant),
                "gpu_quota": gpus.quota,
                "gpu_limit": gpus.effective_limit,
                "grp_tres": grp_tres(cluster, tenant),
                "qos": sorted(tenant.qos),
                "default_qos": tenant.default_qos,
            }
        )
    users: dict[str, dict[str, Any]] = {}
    for tenant in spec.tenants:
        for user in tenant.users:
            entry = users.setdefault(user, {"name": user, "default_account": tenant.name, "accounts": []})
            entry["accounts"].append(tenant.name)
    for entry in users.values():
        entry["accounts"] = sorted(entry["accounts"])
    return {
        "cluster": slurm_cluster_name(spec),
        "qos": [_qos_entry(q) for q in sorted(spec.qos, key=lambda q: q.name)],
        "accounts": accounts,
        "users": [users[name] for name in sorted(users)],
    }
