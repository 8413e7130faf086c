"""One owner per GPU component per node: where the gpu_driver role installs a component on a
Kubernetes node (its node type's `software`), the GPU Operator must not deploy its own there.

The operator deploys each operand on the nodes labelled `nvidia.com/gpu.deploy.<operand>=true`
and adds that label only where it is missing: a node labelled `false` keeps the host's component."""

from __future__ import annotations

from gpucluster.k8s.owners import kubernetes_hosts
from gpucluster.model.cluster import Cluster
from gpucluster.nodesoftware.stack import Stack, resolve_stacks

DEPLOY_LABEL = "nvidia.com/gpu.deploy.{}"
# gpu_driver component -> the GPU Operator operands it replaces.
OPERANDS = {"driver": ("driver",), "toolkit": ("container-toolkit",), "dcgm": ("dcgm",)}


def host_stacks(cluster: Cluster) -> dict[str, Stack]:
    """Kubernetes GPU host -> the stack the gpu_driver role installs on it (hosts with one only)."""
    stacks = resolve_stacks(cluster).stacks
    return {
        host: stacks[cluster.node_type_of[host]]
        for host in kubernetes_hosts(cluster)
        if cluster.node_type_of.get(host) in stacks
    }


def operator_labels(stack: Stack) -> dict[str, str]:
    """The deploy labels that keep the GPU Operator's operands off what the role installed."""
    return {
        DEPLOY_LABEL.format(operand): "false"
        for component, installed in stack.installs.items()
        if installed
        for operand in OPERANDS[component]
    }


def host_owns_everywhere(cluster: Cluster, component: str) -> bool:
    """Every Kubernetes GPU node has this component from the role: the operator needs none of its own."""
    gpu_hosts = [h for h in kubernetes_hosts(cluster) if cluster.node_type(h).gpus is not None]
    stacks = host_stacks(cluster)
    return bool(gpu_hosts) and all(h in stacks and stacks[h].installs[component] for h in gpu_hosts)
