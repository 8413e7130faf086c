"""hosts/node_ssh.yaml: who may ssh to the compute nodes without a job (cluster.slurm.node_ssh),
applied by the slurm_node_ssh role. root is always written first: losing root's ssh to every
node would lock out the very automation that fixes them."""

from __future__ import annotations

from gpucluster import yamlout
from gpucluster.model.cluster import Cluster
from gpucluster.render.templating import header

NODE_SSH_FILE = "hosts/node_ssh.yaml"


def render_node_ssh(cluster: Cluster) -> dict[str, str]:
    """Nothing when the inventory leaves the nodes' sshd alone."""
    node_ssh = cluster.spec.slurm.node_ssh
    if node_ssh is None:
        return {}
    admins = ["root", *(name for name in node_ssh.admins if name != "root")]
    text = header(cluster.name) + "\n" + yamlout.dump({"admins": admins}, width=4096)
    return {NODE_SSH_FILE: text}
