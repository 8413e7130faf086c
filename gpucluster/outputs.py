"""The folders of a rendered tree, one per renderer (gpucluster.rendering composes them): what
`gpucluster render --only` takes. Kept apart so that the command line lists them without
loading the model."""

from __future__ import annotations

OUTPUT_PARTS: dict[str, str] = {
    "slurm": "bare-metal Slurm: slurm.conf, topology.conf/.yaml, gres.conf, cgroup.conf, healthcheck.conf, accounts.yaml",
    "hosts": "what the roles apply to the hosts: Unix accounts, shared storage and NFS exports, node ssh",
    "containers": "containers in jobs: Pyxis' plugstack entry, enroot.conf and mounts, the container roles' settings",
    "nodes": "GPU node software per node type (role gpu_driver): packages, apt sources and pins, fabric manager, IMEX domains",
    "mig": "MIG layouts of bare-metal Slurm's MIG nodes (role gpu_mig): each node's layout and Gres",
    "kubernetes": "Kubernetes objects: node labels, queues, DRA device classes, Slurm on Kubernetes",
    "helm": "Helm values of the Kubernetes add-ons",
    "monitoring": "Prometheus, Alertmanager, alert rules and their tests, Grafana dashboards, DCGM job mapping",
    "power": "power saving (cluster.nodes[].power): gpucluster-power.json, the cloud groups' first-boot configuration",
}
