"""cluster.monitoring.dcgm_exporter: on by default only where every GPU node type of Slurm's takes
NVIDIA's repository (the one source of dcgm-exporter) and the release takes a Prolog and an Epilog
of its own; `true` refused elsewhere, naming the file, the key and the node types; where it runs,
slurm.conf names the job mapping's scripts, hosts.yaml says which hosts get what, Prometheus
scrapes the GPU nodes, and the role installs the scripts where slurm.conf points."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from gpucluster.errors import InventoryError
from gpucluster.layers import layer_warnings, load_cluster
from gpucluster.model.base import Owner
from gpucluster.model.cluster import Cluster
from gpucluster.monitoring import dcgm
from gpucluster.monitoring.model import monitoring_of
from gpucluster.rendering import render_files
from tests.conftest import INVENTORIES, REPO, InventoryFactory

CLUSTER_FILE = "group_vars/all/cluster.yml"
# The lab's GPU nodes with NVIDIA's driver, and dcgm_exporter left to its default.
NVIDIA_DRIVER = {
    '      gpus: {model: h100, count: 8, devices: "/dev/nvidia[0-7]", memory_gb: 80}\n': (
        '      gpus: {model: h100, count: 8, devices: "/dev/nvidia[0-7]", memory_gb: 80}\n'
        "      software:\n"
        "        driver:\n"
        "          source: nvidia\n"
        '          version: "580.95.05"\n'
        "          repository:\n"
        '            url: "https://developer.download.nvidia.com/compute/cuda/repos/debian13/x86_64/"\n'
        "            key: files/nvidia-cuda.asc\n"
    ),
}
AUTO = {"    # The lab's GPUs are device files: no DCGM to scrape.\n    dcgm_exporter: false\n": ""}
ON = {"    dcgm_exporter: false\n": "    dcgm_exporter: true\n"}


def lab(tmp_path: Path, *edits: dict[str, str], version: str = "26.05") -> Path:
    directory = tmp_path / "lab"
    shutil.copytree(INVENTORIES / "lab", directory)
    path = directory / CLUSTER_FILE
    text = path.read_text().replace('version: "26.05"', f'version: "{version}"')
    for edit in edits:
        for old, new in edit.items():
            assert old in text, old
            text = text.replace(old, new)
    path.write_text(text)
    return directory


def problems(directory: Path) -> list[str]:
    with pytest.raises(InventoryError) as caught:
        load_cluster(directory)
    return [str(p).removeprefix(f"{directory}/") for p in caught.value.problems]


def decision(cluster: Cluster) -> dcgm.DcgmExporter:
    monitoring = monitoring_of(cluster)
    assert monitoring is not None
    return dcgm.dcgm_exporter(cluster, monitoring)


def job_script_lines(conf: str) -> list[str]:
    return [line for line in conf.splitlines() if line.startswith(("Prolog=", "Epilog="))]


def scrape_jobs(files: dict[str, str]) -> dict[str, list[str]]:
    config = yaml.safe_load(files["monitoring/prometheus.yml"])
    return {
        job["job_name"]: [t for group in job["static_configs"] for t in group["targets"]]
        for job in config["scrape_configs"]
    }


def test_auto_runs_it_where_every_slurm_gpu_node_type_has_nvidias_repository(tmp_path: Path) -> None:
    cluster = load_cluster(lab(tmp_path, NVIDIA_DRIVER, AUTO))
    exporter = decision(cluster)
    assert exporter.hosts == ("gpu01", "gpu02", "gpu03", "gpu04") and exporter.off_because is None
    files = render_files(cluster)
    # After the health check's Prolog, in the monitoring layer's own section.
    assert job_script_lines(files["slurm/slurm.conf"]) == [
        "Prolog=/usr/local/sbin/gpucluster-healthcheck",
        f"Prolog={dcgm.PROLOG}",
        f"Epilog={dcgm.EPILOG}",
    ]
    assert scrape_jobs(files)["dcgm"] == [f"gpu0{i}:9400" for i in range(1, 5)]
    settings = yaml.safe_load(files["monitoring/hosts.yaml"])["dcgm_exporter"]
    assert settings == {
        "hosts": ["gpu01", "gpu02", "gpu03", "gpu04"],
        "job_mapping_hosts": ["gpu01", "gpu02", "gpu03", "gpu04"],
        "packages": ["datacenter-gpu-manager-exporter"],
        "service": "nvidia-dcgm-exporter.service",
        "settings_path": "/etc/default/dcgm-exporter",
        "job_mapping_dir": "/var/lib/dcgm-exporter/job-mapping",
        "prolog": dcgm.PROLOG,
        "epilog": dcgm.EPILOG,
    }
    assert {"monitoring/dcgm/dcgm-exporter.env", "monitoring/dcgm/job-mapping-prolog.sh"} <= set(files)
    assert not layer_warnings(cluster)


def test_auto_leaves_it_off_without_nvidias_repository_and_says_nothing(tmp_path: Path) -> None:
    cluster = load_cluster(lab(tmp_path, AUTO))
    assert not decision(cluster).on
    assert "driver source none" in (decision(cluster).off_because or "")
    files = render_files(cluster)
    assert job_script_lines(files["slurm/slurm.conf"]) == ["Prolog=/usr/local/sbin/gpucluster-healthcheck"]
    assert "dcgm" not in scrape_jobs(files) and not any(rel.startswith("monitoring/dcgm/") for rel in files)
    assert yaml.safe_load(files["monitoring/hosts.yaml"])["dcgm_exporter"] is None
    assert not layer_warnings(cluster)


def test_the_lab_turns_it_off_and_renders_no_dcgm_job() -> None:
    cluster = load_cluster(INVENTORIES / "lab")
    files = render_files(cluster)
    assert "dcgm" not in scrape_jobs(files) and "dcgm-job" not in files["slurm/slurm.conf"]


def test_true_without_nvidias_repository_is_refused_naming_file_key_and_node_types(tmp_path: Path) -> None:
    assert problems(lab(tmp_path, ON)) == [
        f"{CLUSTER_FILE}:114: cluster.monitoring.dcgm_exporter: dcgm-exporter comes from NVIDIA's CUDA "
        "repository only (datacenter-gpu-manager-exporter), which the gpu_driver role configures where a "
        "node type's software.driver.source is `nvidia`; Slurm's GPU nodes of node types sim-h100 (driver "
        "source none) have none: set their driver source to `nvidia`, or leave dcgm_exporter out (auto: on "
        "only where every GPU node type of Slurm's has NVIDIA's repository), or set it false"
    ]


MIXED_HOSTS = """\
    all:
      children:
        ctl:
          hosts:
            head:
        hopper:
          hosts:
            h[01:02]:
        ada:
          hosts:
            l[01:02]:
        cpu:
          hosts:
            c01:
    """
MIXED_CLUSTER = """\
    cluster:
      name: mixed
      slurm: {version: "26.05", controller: head}
      node_types:
        h100:
          sockets: 2
          cores_per_socket: 8
          memory_mb: 64000
          gpus: {model: h100, count: 8, devices: "/dev/nvidia[0-7]"}
          software:
            driver:
              source: nvidia
              version: "580.95.05"
              repository: {url: "https://mirror.example/cuda/", key: files/nvidia-cuda.asc}
        l40s:
          sockets: 1
          cores_per_socket: 8
          memory_mb: 64000
          gpus: {model: l40s, count: 4, devices: "/dev/nvidia[0-3]"}
          software: {driver: {source: debian}}
        bare: {sockets: 1, cores_per_socket: 4, memory_mb: 8000, gpus: {model: a100, count: 2, devices: "/dev/nvidia[0-1]"}}
        cpu: {sockets: 1, cores_per_socket: 4, memory_mb: 8000}
      nodes:
        - {group: hopper, type: h100}
        - {group: ada, type: l40s}
        - {group: cpu, type: cpu}
      partitions:
        - {name: gpu, nodes: [hopper, ada], default: true}
        - {name: cpu, nodes: [cpu]}
      monitoring:
        host: head
        dcgm_exporter: true
    """


def test_true_names_every_slurm_gpu_node_type_without_the_repository(inventories: InventoryFactory) -> None:
    # `bare` has no host: it puts no dcgm-exporter anywhere, so it is not named.
    assert problems(inventories.make(MIXED_HOSTS, MIXED_CLUSTER)) == [
        f"{CLUSTER_FILE}:32: cluster.monitoring.dcgm_exporter: dcgm-exporter comes from NVIDIA's CUDA "
        "repository only (datacenter-gpu-manager-exporter), which the gpu_driver role configures where a "
        "node type's software.driver.source is `nvidia`; Slurm's GPU nodes of node types l40s (driver "
        "source debian) have none: set their driver source to `nvidia`, or leave dcgm_exporter out (auto: "
        "on only where every GPU node type of Slurm's has NVIDIA's repository), or set it false"
    ]
    # Left to its default it is off there, and the CPU node gets no scrape target either way.
    cluster = load_cluster(
        inventories.make(MIXED_HOSTS, MIXED_CLUSTER.replace("        dcgm_exporter: true\n", ""), name="auto")
    )
    assert not decision(cluster).on


def test_kubernetes_nodes_get_neither_the_exporter_nor_the_job_mapping() -> None:
    cluster = load_cluster(INVENTORIES / "superpod")
    exporter = decision(cluster)
    slurm_nodes = cluster.hosts_owned_by(Owner.SLURM)
    assert exporter.hosts == tuple(slurm_nodes) == exporter.job_mapping_hosts
    assert len(exporter.hosts) == 96 and "dgx128" not in exporter.hosts  # SU4 is Kubernetes'


def test_job_mapping_goes_on_every_slurm_node_the_exporter_on_its_gpu_nodes(
    inventories: InventoryFactory,
) -> None:
    """slurm.conf names the scripts on every node, CPU nodes included: a missing Prolog drains."""
    text = MIXED_CLUSTER.replace("software: {driver: {source: debian}}", "software:\n" + " " * 12 + "driver:\n"
                                 + " " * 14 + "source: nvidia\n" + " " * 14 + 'version: "580.95.05"\n'
                                 + " " * 14 + "repository: {url: \"https://mirror.example/cuda/\", key: k.asc}")  # fmt: skip
    exporter = decision(load_cluster(inventories.make(MIXED_HOSTS, text)))
    assert exporter.hosts == ("h01", "h02", "l01", "l02")
    assert exporter.job_mapping_hosts == ("c01", "h01", "h02", "l01", "l02")


# --- releases that take one Prolog and one Epilog ---------------------------------------------


def test_before_24_05_auto_is_off_and_says_why(tmp_path: Path) -> None:
    cluster = load_cluster(lab(tmp_path, NVIDIA_DRIVER, AUTO, version="24.11"))
    assert decision(cluster).on  # 24.11 takes several
    cluster = load_cluster(lab(tmp_path / "old", NVIDIA_DRIVER, AUTO, version="22.05"))
    assert not decision(cluster).on
    assert job_script_lines(render_files(cluster)["slurm/slurm.conf"]) == [
        "Prolog=/usr/local/sbin/gpucluster-healthcheck"
    ]
    assert [str(w).removeprefix(f"{tmp_path}/old/lab/") for w in layer_warnings(cluster)][-1] == (
        f"{CLUSTER_FILE}:115: cluster.monitoring: dcgm-exporter is off: Slurm 22.05 takes one Prolog and "
        "one Epilog line (several from 24.05); the job mapping needs its own. Set dcgm_exporter: true where "
        "slurm.conf has no other Prolog and Epilog, or upgrade Slurm"
    )


def test_before_24_05_true_is_refused_while_the_health_check_holds_the_prolog(tmp_path: Path) -> None:
    assert problems(lab(tmp_path, NVIDIA_DRIVER, ON, version="22.05")) == [
        f"{CLUSTER_FILE}:121: cluster.monitoring.dcgm_exporter: Slurm 22.05 takes one Prolog and one Epilog "
        "line (several from 24.05) and slurm.conf gives them to the health check's Prolog "
        "(cluster.slurm.health.prolog); dcgm-exporter's job mapping needs a Prolog and an Epilog of its "
        "own: free them, or set dcgm_exporter false"
    ]
    free = {"    health: {interval: 10}\n": "    health: {interval: 10, prolog: false}\n"}
    cluster = load_cluster(lab(tmp_path / "free", NVIDIA_DRIVER, ON, free, version="22.05"))
    assert job_script_lines(render_files(cluster)["slurm/slurm.conf"]) == [
        f"Prolog={dcgm.PROLOG}",
        f"Epilog={dcgm.EPILOG}",
    ]


# --- the role installs what slurm.conf names --------------------------------------------------


def test_the_role_installs_the_scripts_where_slurm_conf_points() -> None:
    role = REPO / "roles" / "monitoring_dcgm_exporter"
    defaults = yaml.safe_load((role / "defaults" / "main.yml").read_text())
    assert defaults["monitoring_dcgm_exporter_prolog_path"] == dcgm.PROLOG
    assert defaults["monitoring_dcgm_exporter_epilog_path"] == dcgm.EPILOG
    assert defaults["monitoring_dcgm_exporter_job_mapping_dir"] == dcgm.JOB_MAPPING_DIR
    assert defaults["monitoring_dcgm_exporter_settings_path"] == dcgm.SETTINGS_PATH
    assert defaults["monitoring_dcgm_exporter_service"] == dcgm.SERVICE
    assert defaults["monitoring_dcgm_exporter_packages"] == [dcgm.PACKAGE]


def test_the_job_mapping_scripts_kept_as_the_sites_own_are_refused_where_the_exporter_writes_them(
    tmp_path: Path,
) -> None:
    """An inventory imported from a slurm.conf gpucluster rendered holds them in slurm.prolog/epilog."""
    imported = {
        "    health: {interval: 10}\n": (
            f"    health: {{interval: 10}}\n    prolog: [{dcgm.PROLOG}, /etc/slurm/prolog.d/site]\n"
            f"    epilog: [{dcgm.EPILOG}]\n"
        )
    }
    found = problems(lab(tmp_path, NVIDIA_DRIVER, AUTO, imported))
    assert [line.split(": ", 2)[1:] for line in found] == [
        [
            "cluster.slurm.prolog[0]",
            f"Prolog={dcgm.PROLOG} is written by cluster.monitoring; remove it here (slurmd would run it twice)",
        ],
        [
            "cluster.slurm.epilog[0]",
            f"Epilog={dcgm.EPILOG} is written by cluster.monitoring; remove it here (slurmd would run it twice)",
        ],
    ]
    assert all(line.startswith(f"{CLUSTER_FILE}:") for line in found)
    # Where the exporter is off, they are the site's own scripts and stay.
    cluster = load_cluster(lab(tmp_path / "off", imported))
    assert f"Prolog={dcgm.PROLOG}" in job_script_lines(render_files(cluster)["slurm/slurm.conf"])
