"""The return-to-service gate on Kubernetes' GPU nodes (cluster.gate): a DaemonSet whose pod on
each node runs gpucluster-healthcheck --kubernetes-gate. A node in the gate carries the taint
gpucluster.io/gate=<way back>:NoSchedule (put there by `gpucluster node repaired`, a move's claim,
a new node's registration, or the pod itself after a reboot); its pod burns it in (the checks of
Slurm's nodes, one node of a node type at a time per burn-in slot, a Lease of this namespace) and
removes the taint on a pass, or sets its value to `out` after cluster.gate.attempts failures. The
pod tolerates the gate's taint and no other scheduler's work does.

The program reaches the pod as a ConfigMap (with its healthcheck.conf: one section per Kubernetes
GPU node type, naming its nodes), like the Slinky NodeSets' health check.
"""

from __future__ import annotations

from typing import Any

from gpucluster.k8s.mirror import mirror_image
from gpucluster.k8s.model import KubernetesSpec
from gpucluster.k8s.names import MANAGED_BY, NODE_TYPE_LABEL, OWNER_LABEL
from gpucluster.k8s.objects import gpu_toleration
from gpucluster.model.base import Owner
from gpucluster.model.cluster import Cluster
from gpucluster.model.gate import KUBERNETES_TAINT
from gpucluster.model.spec import HealthSettings

Obj = dict[str, Any]

NAMESPACE = "gpucluster-gate"
NAME = "gpucluster-gate"
CONFIG_DIR = "/etc/gpucluster-gate"
HOST_ROOT = "/host"
# The pod's own state (boot id seen last, burn-in counts), on the host: it outlives the pod.
STATE_DIR = "/var/lib/gpucluster/gate-pod"
# Seconds between two looks of each pod at its node.
INTERVAL = 30


def gate_node_types(cluster: Cluster) -> list[str]:
    """Node types with GPUs among the nodes Kubernetes schedules itself."""
    types = {cluster.node_type_of[h] for h in cluster.hosts_owned_by(Owner.KUBERNETES)}
    return sorted(t for t in types if cluster.spec.node_types[t].gpus is not None)


def gate_conf(cluster: Cluster) -> str:
    """healthcheck.conf of the gate's pods: a section per node type (its Kubernetes nodes), and
    the gate's section with one burn-in slot pool per node type."""
    from gpucluster.render.health import render_health_conf, section

    gate = cluster.spec.gate
    assert gate is not None
    health = cluster.spec.slurm.health or HealthSettings()
    owned = set(cluster.hosts_owned_by(Owner.KUBERNETES))
    sections = []
    slots = {}
    for name in gate_node_types(cluster):
        hosts = [h for h in cluster.hosts_by_type.get(name, []) if h in owned]
        sections.append(section(name, hosts, cluster.spec.node_types[name]))
        slots[name] = max(1, min(gate.max_in_burn_in, len(hosts) - 1))
    return render_health_conf(cluster, health, sections, gated=True, slots=slots)


def gate_objects(cluster: Cluster, k8s: KubernetesSpec) -> list[Obj]:
    """Namespace, ConfigMap, RBAC and DaemonSet; none without a gate or without GPU nodes."""
    from gpucluster.render.health import program_text

    gate = cluster.spec.gate
    types = gate_node_types(cluster)
    if gate is None or not types:
        return []
    meta = {"namespace": NAMESPACE, "labels": dict(MANAGED_BY)}
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": NAME, **meta},
        "data": {"gpucluster_healthcheck.py": program_text(), "healthcheck.conf": gate_conf(cluster)},
    }
    return [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            # The pods read the host's devices and kernel log: a privileged namespace of their own.
            "metadata": {
                "name": NAMESPACE,
                "labels": {**MANAGED_BY, "pod-security.kubernetes.io/enforce": "privileged"},
            },
        },
        config_map,
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": NAME, **meta}},
        *rbac(),
        daemon_set(cluster, k8s, types),
    ]


def rbac() -> list[Obj]:
    """Nodes: read and patch (its taint and annotations); Leases of its namespace: the slots."""
    subject = [{"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE}]
    labels = dict(MANAGED_BY)
    rbac_api = "rbac.authorization.k8s.io/v1"
    return [
        {
            "apiVersion": rbac_api,
            "kind": "ClusterRole",
            "metadata": {"name": NAME, "labels": labels},
            "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]}],
        },
        {
            "apiVersion": rbac_api,
            "kind": "ClusterRoleBinding",
            "metadata": {"name": NAME, "labels": labels},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": NAME},
            "subjects": subject,
        },
        {
            "apiVersion": rbac_api,
            "kind": "Role",
            "metadata": {"name": NAME, "namespace": NAMESPACE, "labels": labels},
            "rules": [
                {
                    "apiGroups": ["coordination.k8s.io"],
                    "resources": ["leases"],
                    "verbs": ["get", "create", "delete"],
                }
            ],
        },
        {
            "apiVersion": rbac_api,
            "kind": "RoleBinding",
            "metadata": {"name": NAME, "namespace": NAMESPACE, "labels": labels},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": NAME},
            "subjects": subject,
        },
    ]


def daemon_set(cluster: Cluster, k8s: KubernetesSpec, types: list[str]) -> Obj:
    gate = cluster.spec.gate
    assert gate is not None
    labels = {"app.kubernetes.io/name": NAME, **MANAGED_BY}
    command = [
        "python3", f"{CONFIG_DIR}/gpucluster_healthcheck.py", "--kubernetes-gate",
        "--config", f"{CONFIG_DIR}/healthcheck.conf", "--node", "$(NODE_NAME)",
        "--root", HOST_ROOT, "--state-dir", STATE_DIR, "--interval", str(INTERVAL),
    ]  # fmt: skip
    tolerations = [{"key": KUBERNETES_TAINT, "operator": "Exists", "effect": "NoSchedule"}]
    if k8s.gpu_taint:
        tolerations.append(gpu_toleration())
    pod: Obj = {
        "serviceAccountName": NAME,
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": OWNER_LABEL, "operator": "In", "values": [Owner.KUBERNETES.value]},
                                {"key": NODE_TYPE_LABEL, "operator": "In", "values": types},
                            ]
                        }
                    ]
                }
            }
        },
        "tolerations": tolerations,
        "containers": [
            {
                "name": "gate",
                "image": mirror_image(k8s.registry_mirror, gate.kubernetes_image),
                "command": command,
                "env": [
                    {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                    # The NVIDIA container runtime hands the container every GPU and nvidia-smi;
                    # the pod asks the scheduler for none (it runs beside the node's work).
                    {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
                    {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "utility,compute"},
                ],
                "securityContext": {"privileged": True},
                "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "512Mi"}},
                "volumeMounts": [
                    {"name": "program", "mountPath": CONFIG_DIR, "readOnly": True},
                    {"name": "host", "mountPath": HOST_ROOT, "readOnly": True},
                    {"name": "state", "mountPath": STATE_DIR},
                ],
            }
        ],
        "volumes": [
            {"name": "program", "configMap": {"name": NAME}},
            {"name": "host", "hostPath": {"path": "/", "type": "Directory"}},
            {"name": "state", "hostPath": {"path": STATE_DIR, "type": "DirectoryOrCreate"}},
        ],
    }
    if k8s.gpu_operator.enabled and k8s.gpu_operator.toolkit:
        pod["runtimeClassName"] = "nvidia"  # the GPU Operator's toolkit makes it
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": NAME, "namespace": NAMESPACE, "labels": labels},
        "spec": {
            "selector": {"matchLabels": {"app.kubernetes.io/name": NAME}},
            "template": {"metadata": {"labels": labels}, "spec": pod},
        },
    }


def taint_command(hosts: list[str], way_back: str) -> str:
    """What puts Kubernetes nodes in the gate (and clears the failures counted so far)."""
    return "; ".join(
        f"kubectl annotate node {h} gpucluster.io/gate-attempts- ; "
        f"kubectl taint node {h} {KUBERNETES_TAINT}={way_back}:NoSchedule --overwrite"
        for h in hosts
    )
