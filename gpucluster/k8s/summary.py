"""What `gpucluster show` says about the Kubernetes layer: who schedules the Kubernetes-owned GPU
nodes (the gang scheduler, Kueue admitting in front of it or alone), how pods get GPUs, and the charts
installed, at their pinned versions."""

from __future__ import annotations

from typing import Any

from gpucluster.console import table
from gpucluster.k8s.model import KubernetesSpec, kubernetes_of
from gpucluster.model.cluster import Cluster

GANG_SCHEDULERS = {"kai": "KAI Scheduler", "volcano": "Volcano"}


def scheduling(k8s: KubernetesSpec) -> str:
    """One sentence: who binds the pods of the Kubernetes-owned GPU nodes, who admits them."""
    versions = k8s.versions
    gang = k8s.gang_scheduler
    kueue = f"Kueue {versions.kueue.version}"
    if gang is None:
        return f"{kueue} admits; kube-scheduler places" if k8s.kueue.enabled else "kube-scheduler alone"
    pin = versions.kai_scheduler if gang == "kai" else versions.volcano
    text = f"{GANG_SCHEDULERS[gang]} {pin.version} gang-schedules"
    return f"{text}; {kueue} admits in front of it" if k8s.kueue.enabled else text


def summary(cluster: Cluster) -> dict[str, Any]:
    """The `kubernetes` entry of `show --json`."""
    from gpucluster.k8s.render import releases

    k8s = kubernetes_of(cluster)
    assert k8s is not None
    return {
        "version": k8s.version,
        "platform": k8s.platform,
        "gang_scheduler": k8s.gang_scheduler,
        "kueue": k8s.kueue.enabled,
        "scheduling": scheduling(k8s),
        "device_allocation": k8s.device_allocation,
        "gpu_taint": k8s.gpu_taint,
        "slurm": k8s.slurm.operator if k8s.slurm else None,
        "releases": [
            {"name": r.name, "version": r.pin.version, "namespace": r.namespace}
            for r in releases(cluster, k8s)
        ],
    }


def summary_table(cluster: Cluster) -> str:
    data = summary(cluster)
    rows = [
        ["Kubernetes", f"{data['version']} ({data['platform']})"],
        ["GPU nodes owned by kubernetes", data["scheduling"]],
        [
            "GPUs to pods",
            f"{data['device_allocation']}" + (", nvidia.com/gpu taint" if data["gpu_taint"] else ""),
        ],
        ["Slurm on Kubernetes", data["slurm"] or "-"],
        ["charts", "\n".join(f"{r['name']} {r['version']} ({r['namespace']})" for r in data["releases"])],
    ]
    return table("Kubernetes", ("setting", "value"), rows)
