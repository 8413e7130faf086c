"""What the verify playbook runs on the hosts with GPU node software (read back by
gpucluster.verify.nodesoftware): one line per fact, `driver <version>` (the loaded module's; empty
when none is loaded), `package <version>` (the installed libnvidia-ml1's), `service <unit> <state>`
and, where dcgmi is installed, `dcgm <exit code of dcgmi discovery -l>`."""

from __future__ import annotations

from gpucluster.model.cluster import Cluster
from gpucluster.nodesoftware.stack import Stack, resolve_stacks

SERVICES = ("nvidia-persistenced", "nvidia-fabricmanager", "nvidia-imex", "nvidia-dcgm")
GPU_STACK_PROBE = (
    'echo "driver $(cat /sys/module/nvidia/version 2>/dev/null)"\n'
    "echo \"package $(dpkg-query -W -f='${Version}' libnvidia-ml1 2>/dev/null)\"\n"
    f'for unit in {" ".join(SERVICES)}; do echo "service $unit $(systemctl is-active $unit 2>/dev/null)"; done\n'
    'if command -v dcgmi >/dev/null 2>&1; then dcgmi discovery -l >/dev/null 2>&1; echo "dcgm $?"; fi\n'
)


def stack_hosts(cluster: Cluster) -> dict[str, Stack]:
    """Host -> the stack its node type gets from the gpu_driver role."""
    stacks = resolve_stacks(cluster).stacks
    return {h: stacks[t] for h in cluster.hosts if (t := cluster.node_type_of.get(h)) in stacks}
