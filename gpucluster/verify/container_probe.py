"""What the verify playbook probes for cluster.slurm.containers: the hosts, and the probe it runs there."""

from __future__ import annotations

from typing import Any

from gpucluster.model.cluster import Cluster
from gpucluster.slurm.containers import container_nodes, container_settings, pyxis_hosts

# What the playbook runs on a host (sh): the crun version, enroot's version, and whether srun
# offers Pyxis' options (srun loads plugstack.conf's plugins before printing its help).
CONTAINER_PROBE = """\
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
echo "crun=$(crun --version 2>/dev/null | sed -n 's/^crun version //p')"
echo "enroot=$(enroot version 2>/dev/null)"
if srun --help 2>/dev/null | grep -q -e '--container-image'; then echo pyxis=yes; else echo pyxis=no; fi
"""


def container_plan(cluster: Cluster, observed: tuple[str, ...]) -> dict[str, Any]:
    """The playbook's part: which of the observed hosts to probe, and the probe."""
    settings = container_settings(cluster)
    oci = container_nodes(cluster) if settings is not None and settings.oci else []
    pyxis = pyxis_hosts(cluster) if settings is not None and settings.pyxis is not None else []
    return {"hosts": sorted(h for h in set(oci) | set(pyxis) if h in observed), "probe": CONTAINER_PROBE}
