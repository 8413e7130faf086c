"""NVIDIA's dcgm-exporter on the GPU nodes Slurm owns, with each GPU's Slurm job: where it runs (and
why not), and where its settings and the Slurm prolog and epilog of its HPC job mapping go (the
renderer writes them: gpucluster.monitoring.render).

dcgm-exporter is NVIDIA's package alone (datacenter-gpu-manager-exporter, in the CUDA repository),
which the gpu_driver role configures on the node types whose driver source is `nvidia`: only their
hosts can install it. The job mapping is one file per GPU index naming the job on it; slurm.conf
runs the scripts that write it as a Prolog and an Epilog of their own."""

from __future__ import annotations

from dataclasses import dataclass

from gpucluster.model.base import Owner
from gpucluster.model.cluster import Cluster
from gpucluster.model.powered import cloud_hosts
from gpucluster.monitoring.model import MonitoringSpec

PACKAGE = "datacenter-gpu-manager-exporter"
# The package's unit; the role adds a drop-in reading SETTINGS_PATH.
SERVICE = "nvidia-dcgm-exporter.service"
SETTINGS_PATH = "/etc/default/dcgm-exporter"
# dcgm-exporter's HPC job mapping directory (--hpc-job-mapping-dir / DCGM_HPC_JOB_MAPPING_DIR).
JOB_MAPPING_DIR = "/var/lib/dcgm-exporter/job-mapping"
# Where the role installs the scripts slurm.conf names, beside gpucluster's other programs (the
# health check is /usr/local/sbin/gpucluster-healthcheck); the role's defaults say the same.
PROLOG = "/usr/local/sbin/gpucluster-dcgm-job-prolog"
EPILOG = "/usr/local/sbin/gpucluster-dcgm-job-epilog"


def slurm_gpu_nodes(cluster: Cluster) -> list[str]:
    """Slurm's GPU nodes the roles install software on: not the instances of cloud groups, whose
    image carries what they run (their driver source does not decide for the others)."""
    instances = set(cloud_hosts(cluster))
    return [
        h for h in cluster.hosts_owned_by(Owner.SLURM) if cluster.node_type(h).gpus and h not in instances
    ]


def sources_without_nvidia_repository(cluster: Cluster) -> dict[str, str]:
    """Node type -> its driver source, for each node type of Slurm's GPU nodes whose driver is not
    NVIDIA's (no CUDA repository there: no dcgm-exporter package)."""
    found: dict[str, str] = {}
    for host in slurm_gpu_nodes(cluster):
        name = cluster.node_type_of[host]
        software = cluster.spec.node_types[name].software
        source = software.driver.source if software is not None else "none"
        if source != "nvidia":
            found[name] = source
    return dict(sorted(found.items()))


def occupied_job_script_lines(cluster: Cluster) -> list[str]:
    """On a release that takes one Prolog and one Epilog line: the settings already holding them
    (the job mapping needs its own). Empty where the release takes several."""
    if cluster.release.several_prologs:
        return []
    slurm = cluster.spec.slurm
    taken = []
    if slurm.health is not None and slurm.health.prolog:
        taken.append("the health check's Prolog (cluster.slurm.health.prolog)")
    if slurm.prolog:
        taken.append("cluster.slurm.prolog")
    if slurm.epilog:
        taken.append("cluster.slurm.epilog")
    return taken


@dataclass(frozen=True)
class DcgmExporter:
    """Whether dcgm-exporter runs, where, and why not where it does not (None: it runs, or the
    inventory turned it off, or Slurm owns no GPU node)."""

    hosts: tuple[str, ...]  # GPU nodes Slurm owns: the package, its settings, the service
    job_mapping_hosts: tuple[str, ...]  # every Slurm node: slurm.conf names the scripts on all
    off_because: str | None = None

    @property
    def on(self) -> bool:
        return bool(self.hosts)


def dcgm_exporter(cluster: Cluster, monitoring: MonitoringSpec) -> DcgmExporter:
    """The decision for `cluster.monitoring.dcgm_exporter`: `true` is taken as given (the checks
    refuse it where it cannot run), `false` as given, auto (None) on only where it can run."""
    gpu_nodes = slurm_gpu_nodes(cluster)
    if monitoring.dcgm_exporter is False or not gpu_nodes:
        return DcgmExporter((), ())
    if monitoring.dcgm_exporter is None:
        missing = sources_without_nvidia_repository(cluster)
        if missing:
            return DcgmExporter((), (), f"no NVIDIA repository on node types {_sources(missing)}")
        if not cluster.release.several_prologs:
            return DcgmExporter(
                (),
                (),
                f"Slurm {cluster.release.name} takes one Prolog and one Epilog line (several from 24.05); "
                "the job mapping needs its own",
            )
    return DcgmExporter(tuple(gpu_nodes), tuple(cluster.hosts_owned_by(Owner.SLURM)))


def _sources(missing: dict[str, str]) -> str:
    return ", ".join(f"{name} (driver source {source})" for name, source in missing.items())


def refusals(cluster: Cluster, monitoring: MonitoringSpec) -> list[str]:
    """Why an explicit `dcgm_exporter: true` cannot be carried out (empty: it can)."""
    if monitoring.dcgm_exporter is not True or not slurm_gpu_nodes(cluster):
        return []
    found = []
    missing = sources_without_nvidia_repository(cluster)
    if missing:
        found.append(
            f"dcgm-exporter comes from NVIDIA's CUDA repository only ({PACKAGE}), which the gpu_driver "
            "role configures where a node type's software.driver.source is `nvidia`; Slurm's GPU nodes "
            f"of node types {_sources(missing)} have none: set their driver source to `nvidia`, or "
            "leave dcgm_exporter out (auto: on only where every GPU node type of Slurm's has NVIDIA's "
            "repository), or set it false"
        )
    taken = occupied_job_script_lines(cluster)
    if taken:
        found.append(
            f"Slurm {cluster.release.name} takes one Prolog and one Epilog line (several from 24.05) and "
            f"slurm.conf gives them to {' and '.join(taken)}; dcgm-exporter's job mapping needs a "
            "Prolog and an Epilog of its own: free them, or set dcgm_exporter false"
        )
    return found


def warning(cluster: Cluster, monitoring: MonitoringSpec) -> str | None:
    """What auto left off although every GPU node type of Slurm's could install it."""
    decision = dcgm_exporter(cluster, monitoring)
    if monitoring.dcgm_exporter is not None or decision.on or decision.off_because is None:
        return None
    if sources_without_nvidia_repository(cluster):
        return None  # the documented default where NVIDIA's repository is not configured
    return (
        f"dcgm-exporter is off: {decision.off_because}. Set dcgm_exporter: true where slurm.conf "
        "has no other Prolog and Epilog, or upgrade Slurm"
    )
