"""slurm_common on the Molecule container: the files are gpucluster's, byte for byte, and parse."""

import hashlib
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[5]
INVENTORY = REPO / "molecule" / "inventory" / "mol"


def test_files_are_byte_identical_to_gpucluster_render(host, tmp_path):
    subprocess.run(
        [sys.executable, "-m", "gpucluster.cli", "render", str(INVENTORY), "--out", str(tmp_path)],
        check=True,
        cwd=REPO,
        capture_output=True,
    )
    rendered = sorted(p.name for p in (tmp_path / "slurm").iterdir() if p.name != "accounts.yaml")
    assert "slurm.conf" in rendered and "gres.conf" in rendered
    for name in rendered:
        # Checksums, not text: testinfra strips trailing newlines from command output.
        expected = hashlib.sha256((tmp_path / "slurm" / name).read_bytes()).hexdigest()
        assert host.file(f"/etc/slurm/{name}").sha256sum == expected, name


def test_slurm_conf_parses_and_lists_the_node(host):
    result = host.run("scontrol show hostnames gcmol01")
    assert result.rc == 0, result.stderr
    assert result.stdout.split() == ["gcmol01"]


def test_no_topology_file_for_a_cluster_without_a_fabric(host):
    assert not host.file("/etc/slurm/topology.conf").exists
    assert not host.file("/etc/slurm/topology.yaml").exists
