"""The releases before the lab's own: the lab inventory targeting 24.11 (Debian trixie) and 22.05
(bookworm), each brought up as a user would (`gpucluster lab up <inventory>`), then: the smoke
jobs, `gpucluster lab verify` with every row passing, a REST API call with a token, a job submitted
from the login node, and a node moved to Kubernetes and back with jobs running.

They run beside the session's 26.05 lab, as a lab of their own (GPUCLUSTER_LAB_PREFIX,
GPUCLUSTER_LAB_SUBNET and GPUCLUSTER_LAB_DIR): tests/lab_releases/test_older_releases.py runs this
file in a pytest process of its own with those set, so that the two labs' tests share the
machine's time instead of following each other. Run here without a prefix of its own, it would
replace the lab in .lab: it refuses.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gpucluster.lab.paths import DEFAULT_INVENTORY
from gpucluster.layers import load_cluster

from .conftest import LAB_UP_TIMEOUT, Lab, plain_gres, run_scrubbed
from .test_fleet_move import move_out_and_back
from .test_rest_api import call, token

pytestmark = pytest.mark.lab

OWN_LAB = ("GPUCLUSTER_LAB_PREFIX", "GPUCLUSTER_LAB_SUBNET", "GPUCLUSTER_LAB_DIR")

OLDER_RELEASES = ("24.11", "22.05")


@dataclass
class OlderLab:
    lab: Lab
    inventory: Path
    up_output: str


def _inventory_for(release: str, root: Path) -> Path:
    """The lab inventory, targeting `release`."""
    inventory = root / "lab"
    shutil.copytree(DEFAULT_INVENTORY, inventory)
    cluster_file = inventory / "group_vars" / "all" / "cluster.yml"
    text = cluster_file.read_text()
    assert '    version: "26.05"\n' in text
    cluster_file.write_text(text.replace('    version: "26.05"\n', f'    version: "{release}"\n'))
    return inventory


def _down() -> None:
    proc = run_scrubbed(".venv/bin/gpucluster lab down", timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.fixture(scope="module", params=OLDER_RELEASES)
def older_lab(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OlderLab]:
    missing = [name for name in OWN_LAB if not os.environ.get(name)]
    if missing:
        pytest.fail(f"the older releases' labs need a lab of their own: set {', '.join(missing)}")
    release: str = request.param
    _down()
    inventory = _inventory_for(release, tmp_path_factory.mktemp(f"release-{release}"))
    proc = run_scrubbed(f".venv/bin/gpucluster lab up {inventory}", timeout=LAB_UP_TIMEOUT)
    if proc.returncode != 0:
        _down()
        pytest.fail(f"lab up of Slurm {release} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    changed = re.search(r"changed=(\d+)", proc.stdout)
    lab = Lab(load_cluster(inventory), int(changed.group(1)) if changed else None, proc.stdout)
    try:
        yield OlderLab(lab, inventory, proc.stdout + proc.stderr)
    finally:
        _down()


def _idle(lab: Lab) -> None:
    lab.cancel_all()
    lab.wait(
        lambda: all(not re.search(r"down|unknown|\*", s) for s in lab.node_states().values()),
        90,
        "every node to respond",
    )


def test_the_lab_runs_the_release_and_its_smoke_jobs_pass(older_lab: OlderLab) -> None:
    release = older_lab.lab.cluster.release.name
    assert "$ srun" in older_lab.up_output and "CUDA_VISIBLE_DEVICES=0,1" in older_lab.up_output
    for host, program in (
        ("ctl01", "slurmctld"),
        ("ctl02", "slurmdbd"),
        ("gpu01", "slurmd"),
        ("login01", "sinfo"),
    ):
        version = older_lab.lab.ok(program, "-V", host=host).split()[-1]
        assert version.startswith(f"{release}."), (host, program, version)


def test_verify_passes_every_row(older_lab: OlderLab) -> None:
    _idle(older_lab.lab)
    proc = run_scrubbed(".venv/bin/gpucluster lab verify --json", timeout=900)
    report = json.loads(proc.stdout)
    failed = [c for c in report["checks"] if c["status"] == "fail"]
    assert proc.returncode == 0 and report["ok"] and not failed, json.dumps(failed, indent=1) + proc.stderr
    skipped = {c["name"] for c in report["checks"] if c["status"] == "skipped"}
    assert skipped <= {"nccl"}, skipped


def test_the_rest_api_answers_a_token(older_lab: OlderLab) -> None:
    lab = older_lab.lab
    status, data = call(lab, "GET", "/nodes", "alice", token(lab, "alice"))
    assert status == 200, data
    assert {node["name"]: plain_gres(node["gres"]) for node in data["nodes"]} == {
        f"gpu0{i}": "gpu:h100:8" for i in range(1, 5)
    }
    status, _ = call(lab, "GET", "/nodes", "alice")
    assert status == 401


def test_a_job_submitted_on_the_login_node_runs(older_lab: OlderLab) -> None:
    lab = older_lab.lab
    _idle(lab)
    out = lab.ok("sbatch", "--parsable", "--wait", "--output=/dev/null", "--gres=gpu:h100:1", "--wrap=hostname",
                 user="alice", host="login01")  # fmt: skip
    job = out.strip().split(";")[0]
    state = lab.ok("sacct", "--noheader", "--allocations", f"--jobs={job}", "--format=State%20,User%10")
    assert state.split() == ["COMPLETED", "alice"], state


def test_a_node_moves_to_kubernetes_and_back(older_lab: OlderLab) -> None:
    _idle(older_lab.lab)
    move_out_and_back(older_lab.lab, older_lab.inventory)
