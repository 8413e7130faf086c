"""Configless slurmd on gccfgnode, switched from classic with a job running: the files live on the
controller gccfgctl, the node runs what slurmctld served it, and reconfigure brings it new files."""

import hashlib
import subprocess
import sys
import time
from pathlib import Path

import pytest
import testinfra

REPO = Path(__file__).resolve().parents[5]
INVENTORY = REPO / "molecule" / "inventory" / "molconfigless"
NODE = testinfra.get_host("podman://gccfgnode")
# What slurmctld 26.05 serves of the rendered files (topology.yaml too, from 25.05.2 on).
SERVED = ["slurm.conf", "cgroup.conf", "plugstack.conf", "gres.conf", "topology.yaml"]


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    out = tmp_path_factory.mktemp("render")
    subprocess.run(
        [sys.executable, "-m", "gpucluster.cli", "render", str(INVENTORY), "--out", str(out)],
        check=True,
        cwd=REPO,
        capture_output=True,
    )
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in (out / "slurm").iterdir()}


def test_controller_holds_the_files_and_serves_them(host, rendered):
    for name in [*SERVED, "healthcheck.conf"]:
        assert host.file(f"/etc/slurm/{name}").sha256sum == rendered[name], name
    assert "enable_configless" in host.check_output("scontrol show config | grep SlurmctldParameters")


def test_node_keeps_only_what_slurmctld_does_not_serve(rendered):
    for name in SERVED:
        assert not NODE.file(f"/etc/slurm/{name}").exists, name
    # Our health check's file and program: slurmctld serves neither.
    assert NODE.file("/etc/slurm/healthcheck.conf").sha256sum == rendered["healthcheck.conf"]
    assert NODE.file("/usr/local/sbin/gpucluster-healthcheck").is_executable


def test_node_runs_the_files_slurmctld_served(rendered):
    assert NODE.file("/run/slurm/conf").is_symlink
    assert NODE.file("/run/slurm/conf").linked_to == "/var/lib/slurm/slurmd/conf-cache"
    for name in SERVED:
        assert NODE.file(f"/run/slurm/conf/{name}").sha256sum == rendered[name], name


def test_slurmd_runs_with_the_controller_as_conf_server():
    # The packages' unit gives slurmd its own options first (22.05: -D -s; 24.11 on: --systemd);
    # the role's come last.
    assert NODE.check_output("pgrep --exact --list-full slurmd").split()[-2:] == ["--conf-server", "gccfgctl"]
    service = NODE.service("slurmd")
    assert service.is_running and service.is_enabled


def test_commands_on_the_node_find_the_served_configuration():
    # No /etc/slurm/slurm.conf: scontrol reads /run/slurm/conf/slurm.conf.
    assert "is UP" in NODE.check_output("scontrol ping")


def test_the_job_started_before_the_switch_still_runs(host):
    assert host.check_output("squeue --noheader --name=across-the-switch --format=%T") == "RUNNING"


def test_node_serves_a_gpu_job(host):
    # Beside the job of prepare, which holds one of the node's two CPUs: a job that names no memory
    # would be given all of the node's. One GPU: on 26.05 a two-GPU job waits there for both CPUs.
    out = host.check_output("srun --immediate=30 --mem=64 --gres=gpu:h100:1 printenv CUDA_VISIBLE_DEVICES")
    assert out.strip() == "0"


def test_reconfigure_sends_the_node_the_new_files(host):
    """A change on the controller reaches the node's cache with `scontrol reconfigure` alone."""
    marker = f"# reconfigure test {time.time_ns()}"
    host.check_output("cp -p /etc/slurm/slurm.conf /root/slurm.conf.before-test")
    try:
        host.check_output(f"echo '{marker}' >> /etc/slurm/slurm.conf && scontrol reconfigure")
        for _ in range(30):
            if marker in NODE.file("/run/slurm/conf/slurm.conf").content_string:
                break
            time.sleep(1)
        assert marker in NODE.file("/run/slurm/conf/slurm.conf").content_string
    finally:
        host.check_output("mv /root/slurm.conf.before-test /etc/slurm/slurm.conf && scontrol reconfigure")
