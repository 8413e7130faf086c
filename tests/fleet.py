"""The lab inventory with gpu04 handed to Kubernetes: the move that tests/unit/test_moves.py plans
and tests/lab/test_fleet_move.py carries out against the real daemons."""

from __future__ import annotations

LAB_EDITS_GPU04_TO_KUBERNETES = {
    "  nodes:\n    - {group: gpu_nodes, type: sim-h100}\n": (
        "  nodes:\n"
        "    - {group: leaf1_nodes, type: sim-h100, owner: slurm}\n"
        "    - {group: gpu03, type: sim-h100, owner: slurm}\n"
        "    - {group: gpu04, type: sim-h100, owner: kubernetes}\n"
    ),
    "    - {name: gpu, nodes: [gpu_nodes], default: true": "    - {name: gpu, nodes: [leaf1_nodes, gpu03], default: true",
    # 24 GPUs stay in Slurm, 8 go to Kubernetes: each scheduler receives only its own numbers.
    "      gpu_quota: 16\n      gpu_limit: 24\n      users: [alice, carol]": (
        "      gpus: {slurm: {quota: 12, limit: 24}, kubernetes: {quota: 8, limit: 8}}\n      users: [alice, carol]"
    ),
    "      gpu_quota: 16\n      gpu_limit: 32\n      users: [bob]": (
        "      gpus: {slurm: {quota: 12, limit: 24}}\n      users: [bob]"
    ),
}
# Appended to cluster.yml: Kubernetes on gpu04 (Kueue admits its pods).
LAB_KUBERNETES_SECTION = """\
  kubernetes:
    version: "1.34"
    gpu_operator: {driver: host, toolkit: false}
    kueue: {enabled: true}
"""


def gpu04_to_kubernetes(cluster_yml: str) -> str:
    for old, new in LAB_EDITS_GPU04_TO_KUBERNETES.items():
        assert old in cluster_yml, old
        cluster_yml = cluster_yml.replace(old, new)
    return cluster_yml.rstrip("\n") + "\n" + LAB_KUBERNETES_SECTION
