"""A node moves from Slurm to Kubernetes and back, against the real daemons of the lab.

The bare-metal side runs for real (playbooks/slurm.yml drains, waits, removes, restarts); the
Kubernetes side is rendered (no API server here) and checked in the rendered objects.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpucluster.lab import lab
from gpucluster.lab.inventory import inventory_dir
from gpucluster.lab.paths import DEFAULT_INVENTORY
from gpucluster.lab.playbook import PlaybookRun, run_playbook
from gpucluster.layers import load_cluster
from gpucluster.rendering import render_files
from tests.fleet import gpu04_to_kubernetes

from .conftest import Lab, plain_gres, ran

pytestmark = pytest.mark.lab
MOVING = "gpu04"
# The job on the moving node runs until the test has seen the drain, then ends normally.
RELEASE = "/tmp/gpucluster-move-release"


def _state(lab_cluster: Lab, job: str) -> str:
    return lab_cluster.ok(
        "sacct", "--noheader", "--allocations", f"--jobs={job}", "--format=State%30"
    ).strip()


def _slurmctld_pid(lab_cluster: Lab) -> str:
    return lab_cluster.ok("systemctl", "show", "slurmctld", "--property=ExecMainPID", "--value").strip()


def _running(lab_cluster: Lab, job: str) -> bool:
    return lab_cluster.ok("squeue", "--noheader", f"--jobs={job}", "--format=%T").strip() == "RUNNING"


def _never_requeued(lab_cluster: Lab, job: str) -> bool:
    """Running as first started: a node set DOWN (a slurmd that did not register in time after a
    restart) requeues its jobs, which then run again from the start."""
    return " Restarts=0 " in lab_cluster.ok("scontrol", "show", "job", job).replace("\n", " ")


def test_node_moves_to_kubernetes_and_back(lab_cluster: Lab) -> None:
    move_out_and_back(lab_cluster, DEFAULT_INVENTORY)


def move_out_and_back(lab_cluster: Lab, inventory: Path) -> None:
    """gpu04 to Kubernetes while a job runs on it and another elsewhere, then back (the lab of
    `inventory`, whatever its release)."""
    lab_cluster.sh("rm", "-f", RELEASE, host=MOVING)
    moving_job = lab_cluster.submit(
        f"--nodelist={MOVING}", f"--wrap=while [ ! -e {RELEASE} ]; do sleep 1; done", user="alice"
    )
    other_job = lab_cluster.submit("--nodelist=gpu01", "--wrap=sleep 900", user="bob")
    lab_cluster.wait(
        lambda: _running(lab_cluster, moving_job) and _running(lab_cluster, other_job), 30, "both jobs"
    )

    target = inventory_dir(inventory)
    cluster_file = target / "group_vars" / "all" / "cluster.yml"
    cluster_file.write_text(gpu04_to_kubernetes((inventory / "group_vars/all/cluster.yml").read_text()))
    result: dict[str, Any] = {"slurmctld_pid": _slurmctld_pid(lab_cluster)}

    def move() -> None:
        try:
            result["run"] = run_playbook(target, lambda message: None)
        except Exception as exc:  # the main thread reports it
            result["error"] = exc

    mover = threading.Thread(target=move)
    mover.start()
    try:
        _check_move(lab_cluster, target, moving_job, other_job, mover, result)
    finally:
        # Whatever happened, the job may end and the lab goes back to its own inventory.
        lab_cluster.sh("touch", RELEASE, host=MOVING)
        mover.join(timeout=600)
        if lab_cluster.node_states().get(MOVING) != "idle":
            lab.converge(progress=lambda message: None)
        lab_cluster.sh("scancel", other_job)


def _check_move(
    lab_cluster: Lab,
    target: Path,
    moving_job: str,
    other_job: str,
    mover: threading.Thread,
    result: dict[str, Any],
) -> None:
    # From the moment the move begins, nothing new starts on the node; its job keeps running.
    lab_cluster.wait(lambda: "drain" in lab_cluster.node_states().get(MOVING, ""), 300, f"{MOVING} drained")
    reason = lab_cluster.ok("sinfo", "--noheader", "--Node", f"--nodes={MOVING}", "--format=%E").strip()
    assert reason == "gpucluster: moving to kubernetes"
    probe = lab_cluster.sh("srun", f"--nodelist={MOVING}", "--immediate=5", "hostname", user="alice")
    assert probe.returncode != 0, probe.stdout
    assert _running(lab_cluster, moving_job)
    # The playbook waits for that job: the node stays in Slurm while it runs.
    time.sleep(5)
    assert mover.is_alive() and MOVING in lab_cluster.node_states()
    lab_cluster.ok("touch", RELEASE, host=MOVING)
    mover.join(timeout=600)
    assert "error" not in result, result.get("error")
    run: PlaybookRun = result["run"]
    log = run.log.read_text()
    assert ran(log, "TASK [slurm_common : Drain the nodes leaving Slurm")
    # A change of the node definitions (here: one node fewer): from 24.11 on `scontrol
    # reconfigure` applies it; before, only restarting the daemons does.
    if lab_cluster.cluster.release.reconfigure_node_changes:
        assert ran(log, "RUNNING HANDLER [slurm_common : Reconfigure Slurm")
        assert not ran(log, "RUNNING HANDLER [slurm_common : Restart slurmctld")
    else:
        assert ran(log, "RUNNING HANDLER [slurm_common : Restart slurmctld")
        assert ran(log, "RUNNING HANDLER [slurm_common : Restart slurmd")
        assert not ran(log, "RUNNING HANDLER [slurm_common : Reconfigure Slurm")
        assert _slurmctld_pid(lab_cluster) != result["slurmctld_pid"]

    # The job on the moving node finished normally; the job elsewhere survived the restart.
    assert _state(lab_cluster, moving_job) == "COMPLETED"
    assert _running(lab_cluster, other_job) and _never_requeued(lab_cluster, other_job)
    lab_cluster.wait(lambda: MOVING not in lab_cluster.node_states(), 60, f"{MOVING} to leave sinfo")
    assert lab_cluster.sh("systemctl", "is-active", "slurmd", host=MOVING).stdout.strip() == "inactive"

    # Kubernetes now has the node, labelled as its owner, and its 8 GPUs in the quotas.
    moved = render_files(load_cluster(target))
    nodes = {n["metadata"]["name"]: n for n in yaml.safe_load_all(moved["kubernetes/nodes.yaml"]) if n}
    assert set(nodes) == {MOVING}
    assert nodes[MOVING]["metadata"]["labels"]["gpucluster.io/owner"] == "kubernetes"
    queues = [q for q in yaml.safe_load_all(moved["kubernetes/kueue/cluster-queues.yaml"]) if q]
    nominal = sum(
        r["nominalQuota"]
        for q in queues
        for g in q["spec"]["resourceGroups"]
        for f in g["flavors"]
        for r in f["resources"]
        if r["name"] == "nvidia.com/gpu"
    )
    assert nominal == 8
    assert f"NodeName={MOVING}" not in moved["slurm/slurm.conf"] and "gpu[01-03]" in moved["slurm/slurm.conf"]

    # And back: the lab inventory again (converge rewrites it from inventories/lab).
    lab.converge(progress=lambda message: None)
    lab_cluster.wait(lambda: lab_cluster.node_states().get(MOVING) == "idle", 90, f"{MOVING} idle again")
    gres = lab_cluster.ok("sinfo", "--noheader", "--Node", f"--nodes={MOVING}", "--format=%G").strip()
    assert plain_gres(gres) == "gpu:h100:8"
    assert lab_cluster.sh("systemctl", "is-active", "slurmd", host=MOVING).stdout.strip() == "active"
    back = render_files(load_cluster(target))
    assert not [path for path in back if path.startswith("kubernetes/")]
    assert _running(lab_cluster, other_job) and _never_requeued(lab_cluster, other_job)
