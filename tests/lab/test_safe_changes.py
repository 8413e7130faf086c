"""Changes that would fail jobs or split the controllers, carried out by playbooks/slurm.yml on the
lab's real daemons while jobs run (issue 31): a partition renamed while one of its jobs runs and
another waits; the backup controller removed while jobs run, then added back with a takeover.
Not one job is lost or requeued; the lab ends on its own inventory."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpucluster.changes.plan import make_plan
from gpucluster.lab import lab
from gpucluster.lab.inventory import inventory_dir
from gpucluster.lab.paths import DEFAULT_INVENTORY
from gpucluster.lab.playbook import run_playbook
from gpucluster.layers import load_cluster

from .conftest import Applied, Lab, apply_back, apply_change, ran

pytestmark = pytest.mark.lab

# On the shared /scratch of every lab host: a job ends when the test creates its file.
RELEASE_DIR = "/scratch/gpucluster-safe-changes"
RENAMED = {"    - {name: gpu, nodes: [gpu_nodes]": "    - {name: batch, nodes: [gpu_nodes]"}
# ctl02 stops being a controller (it stays the accounting host); the state's filesystem is no
# longer the business of ctl02.
NO_BACKUP = {
    "    controller: [ctl01, ctl02]\n": "    controller: [ctl01]\n",
    "site_managed: true, hosts: [controllers]}": "site_managed: true, hosts: [ctl01]}",
}


def edited_inventory(changes: dict[str, str]) -> Path:
    """The lab's own inventory with cluster.yml edited (lab.converge() writes it back)."""
    target = inventory_dir(DEFAULT_INVENTORY)
    text = (DEFAULT_INVENTORY / "group_vars" / "all" / "cluster.yml").read_text()
    for old, new in changes.items():
        assert old in text, old
        text = text.replace(old, new)
    (target / "group_vars" / "all" / "cluster.yml").write_text(text)
    return target


def waiting_job(lab_cluster: Lab, name: str, *args: str, user: str = "alice") -> str:
    """A job that runs until the test creates its release file."""
    release = f"{RELEASE_DIR}/{name}"
    return lab_cluster.submit(
        f"--job-name={name}", *args, f"--wrap=while [ ! -e {release} ]; do sleep 1; done", user=user
    )


def release(lab_cluster: Lab, name: str) -> None:
    lab_cluster.ok("touch", f"{RELEASE_DIR}/{name}")


def job_field(lab_cluster: Lab, job: str, field: str) -> str:
    out = lab_cluster.sh("scontrol", "show", "job", job).stdout
    found = re.search(rf"\b{field}=(\S+)", out)
    return found.group(1) if found else ""


def finished_cleanly(lab_cluster: Lab, job: str) -> bool:
    """Completed with exit 0, as first started: a requeued job restarts from the beginning."""
    return (job_field(lab_cluster, job, "JobState"), job_field(lab_cluster, job, "ExitCode")) == (
        "COMPLETED",
        "0:0",
    ) and job_field(lab_cluster, job, "Restarts") == "0"


def accounted(lab_cluster: Lab, job: str) -> str:
    return lab_cluster.ok(
        "sacct", "--noheader", "--allocations", f"--jobs={job}", "--format=State%20,ExitCode%8"
    ).strip()


def ping(lab_cluster: Lab, host: str = "ctl01") -> dict[str, str]:
    out = lab_cluster.sh("scontrol", "ping", host=host).stdout
    return dict(re.findall(r"Slurmctld\(\w+\) at (\S+) is (\w+)", out))


def partitions(lab_cluster: Lab) -> list[str]:
    return lab_cluster.ok("sinfo", "--noheader", "--format=%P").split()


@pytest.fixture
def safe_lab(lab_cluster: Lab) -> Iterator[Lab]:
    """The shared lab with a clean release directory; afterwards the lab runs its own inventory
    again with both controllers (their slurmctld enabled and running) and an empty queue."""
    lab_cluster.ok("rm", "-rf", RELEASE_DIR)
    lab_cluster.ok("install", "-d", "-m", "1777", RELEASE_DIR)
    yield lab_cluster
    lab_cluster.ok("install", "-d", "-m", "1777", RELEASE_DIR)
    for name in ("running", "waiting", "first", "second"):
        lab_cluster.sh("touch", f"{RELEASE_DIR}/{name}")
    for host in lab_cluster.cluster.spec.slurm.controller:
        lab_cluster.sh("systemctl", "enable", "--now", "slurmctld", host=host)
    if (
        partitions(lab_cluster) != ["gpu*"]
        or set(ping(lab_cluster).values()) != {"UP"}
        or len(ping(lab_cluster)) != 2
    ):
        lab.converge(progress=lambda message: None)
    lab_cluster.ok("rm", "-rf", RELEASE_DIR)


def test_a_partition_renamed_while_one_job_runs_and_one_waits(safe_lab: Lab) -> None:
    lab_cluster = safe_lab
    plan = make_plan(load_cluster(DEFAULT_INVENTORY), load_cluster(edited_inventory(RENAMED)))
    assert sorted(c.procedure for c in plan.changes) == [
        "partition renamed from gpu",
        "partition renamed to batch",
    ]
    # Every node for the running job, so the other waits in the partition.
    # As root: 4 exclusive nodes are 32 GPUs, past any lab tenant's GrpTRES.
    running = waiting_job(lab_cluster, "running", "--partition=gpu", "--nodes=4", "--exclusive", user="root")
    lab_cluster.wait(lambda: job_field(lab_cluster, running, "JobState") == "RUNNING", 60, "the job to run")
    waiting = lab_cluster.submit("--partition=gpu", "--nodes=1", "--wrap=hostname", user="bob")
    lab_cluster.wait(
        lambda: job_field(lab_cluster, waiting, "Reason") in ("Resources", "Priority"), 30, "the job to wait"
    )

    result: dict[str, Any] = {}

    def rename() -> None:
        try:
            result["runs"] = apply_change(DEFAULT_INVENTORY, edited_inventory(RENAMED))
        except Exception as exc:  # the main thread reports it
            result["error"] = exc

    mover = threading.Thread(target=rename)
    mover.start()
    try:
        # The new partition exists before the old one goes; the old one takes no job; the
        # waiting job waits in the new one; the running one goes on in the old.
        lab_cluster.wait(
            lambda: job_field(lab_cluster, waiting, "Partition") == "batch", 300, "the job to move"
        )
        state = lab_cluster.ok("scontrol", "show", "partition", "gpu", "--oneliner")
        assert "State=INACTIVE" in state, state
        refused = lab_cluster.sh("sbatch", "--partition=gpu", "--wrap=true", user="alice")
        assert refused.returncode != 0, refused.stdout
        assert job_field(lab_cluster, running, "JobState") == "RUNNING"
        assert job_field(lab_cluster, running, "Partition") == "gpu"
        assert job_field(lab_cluster, waiting, "JobState") == "PENDING"
        # The playbook waits for the running job before it changes any file.
        time.sleep(5)
        assert mover.is_alive()
        assert "gpu" in partitions(lab_cluster)
        release(lab_cluster, "running")
        mover.join(timeout=600)
    finally:
        release(lab_cluster, "running")
        mover.join(timeout=600)
    assert "error" not in result, result.get("error")
    runs: list[Applied] = result["runs"]
    # What `gpucluster apply` runs: playbooks/slurm.yml on the controllers only (the compute nodes
    # fetch slurm.conf from slurmctld), then the monitoring play for the targets' labels.
    assert (runs[0].playbook, runs[0].hosts) == ("playbooks/slurm.yml", ("localhost", "ctl01", "ctl02"))
    log = runs[0].log
    assert re.search(
        r"TASK \[(\S+\.)?slurm_common : Close the partitions the new configuration drops[^\n]*\n(?:[^\n]+\n)*?changed: \[",
        log,
    )
    assert ran(log, "RUNNING HANDLER [slurm_common : Reconfigure Slurm]")
    assert not ran(log, "RUNNING HANDLER [slurm_common : Restart slurmctld]")

    lab_cluster.wait(lambda: finished_cleanly(lab_cluster, waiting), 120, "the moved job to finish")
    assert finished_cleanly(lab_cluster, running)
    assert partitions(lab_cluster) == ["batch*"]
    for job in (running, waiting):
        assert accounted(lab_cluster, job).split() == ["COMPLETED", "0:0"], job

    # And back: the lab's own inventory renames batch to gpu (no job in it: nothing to wait for).
    apply_back(inventory_dir(DEFAULT_INVENTORY))
    assert partitions(lab_cluster) == ["gpu*"]


def slurm_conf_partitions(lab_cluster: Lab, host: str) -> dict[str, str]:
    """Partition name -> its line, in the slurm.conf a controller would start from."""
    text = lab_cluster.ok("cat", "/etc/slurm/slurm.conf", host=host)
    return {
        line.split()[0].split("=", 1)[1]: line
        for line in text.splitlines()
        if line.startswith("PartitionName=")
    }


def answering(lab_cluster: Lab, host: str) -> bool:
    return lab_cluster.sh("scontrol", "ping", host=host).stdout.count("is UP") == 2


def test_a_rename_whose_wait_stops_survives_a_restart_and_a_takeover(safe_lab: Lab) -> None:
    """Issue 37: the wait of a rename stopped (its bound past, a job still running in the old
    partition), then slurmctld restarted and the backup took over. Before, the new partition lived
    only in the running slurmctld: after the restart it was gone with the jobs moved into it. Now
    every controller's slurm.conf holds it first; no job is lost, and a second run finishes."""
    lab_cluster = safe_lab
    running = waiting_job(lab_cluster, "running", "--partition=gpu", "--nodes=4", "--exclusive", user="root")
    lab_cluster.wait(lambda: job_field(lab_cluster, running, "JobState") == "RUNNING", 60, "the job to run")
    waiting = lab_cluster.submit("--partition=gpu", "--nodes=1", "--wrap=hostname", user="bob")
    lab_cluster.wait(
        lambda: job_field(lab_cluster, waiting, "Reason") in ("Resources", "Priority"), 30, "the job to wait"
    )
    try:
        # A bound shorter than the running job: the wait stops, the run fails, no file is installed.
        with pytest.raises(lab.LabError) as stopped:
            apply_change(
                DEFAULT_INVENTORY, edited_inventory(RENAMED), extra=["-e", "slurm_common_leave_timeout=10"]
            )
        assert "still in the partitions the new configuration drops after 10 s" in str(stopped.value)
        assert job_field(lab_cluster, waiting, "Partition") == "batch"
        for host in ("ctl01", "ctl02"):
            kept = slurm_conf_partitions(lab_cluster, host)
            assert set(kept) == {"gpu", "batch"}, (host, kept)
            assert "State=INACTIVE" in kept["gpu"] and "Default=NO" in kept["gpu"], kept

        # slurmctld restarted in the middle: both partitions and every job are still there.
        lab_cluster.ok("systemctl", "restart", "slurmctld", host="ctl01")
        lab_cluster.wait(lambda: answering(lab_cluster, "ctl01"), 60, "slurmctld to answer again")
        assert sorted(partitions(lab_cluster)) == ["batch*", "gpu"]
        assert "State=INACTIVE" in lab_cluster.ok("scontrol", "show", "partition", "gpu", "--oneliner")
        assert (
            job_field(lab_cluster, running, "JobState"),
            job_field(lab_cluster, running, "Partition"),
        ) == (
            "RUNNING",
            "gpu",
        )
        assert (
            job_field(lab_cluster, waiting, "JobState"),
            job_field(lab_cluster, waiting, "Partition"),
        ) == (
            "PENDING",
            "batch",
        )
        # And the backup takes over from its own slurm.conf: the same.
        lab_cluster.ok("scontrol", "takeover", "1")
        lab_cluster.wait(lambda: ping(lab_cluster, "ctl02").get("ctl02") == "UP", 60, "ctl02 to take control")
        lab_cluster.wait(
            lambda: "batch" in lab_cluster.sh("sinfo", "--noheader", "--format=%P", host="ctl02").stdout,
            60,
            "sinfo from ctl02",
        )
        assert job_field(lab_cluster, waiting, "Partition") == "batch"
        assert job_field(lab_cluster, running, "JobState") == "RUNNING"
        lab_cluster.ok("systemctl", "start", "slurmctld", host="ctl01")
        lab_cluster.wait(
            lambda: ping(lab_cluster) == {"ctl01": "UP", "ctl02": "UP"}, 90, "ctl01 to take control back"
        )
    finally:
        release(lab_cluster, "running")
    lab_cluster.wait(lambda: finished_cleanly(lab_cluster, running), 120, "the running job to finish")
    # The second run finishes the rename; the moved job runs in the new partition.
    apply_change(DEFAULT_INVENTORY, edited_inventory(RENAMED))
    lab_cluster.wait(lambda: finished_cleanly(lab_cluster, waiting), 120, "the moved job to finish")
    assert partitions(lab_cluster) == ["batch*"]
    assert set(slurm_conf_partitions(lab_cluster, "ctl01")) == {"batch"}
    for job in (running, waiting):
        assert accounted(lab_cluster, job).split() == ["COMPLETED", "0:0"], job
    apply_back(inventory_dir(DEFAULT_INVENTORY))
    assert partitions(lab_cluster) == ["gpu*"]


def test_the_backup_controller_removed_while_jobs_run_then_added_back(safe_lab: Lab) -> None:
    lab_cluster = safe_lab
    assert ping(lab_cluster) == {"ctl01": "UP", "ctl02": "UP"}
    plan = make_plan(load_cluster(DEFAULT_INVENTORY), load_cluster(edited_inventory(NO_BACKUP)))
    assert "controller ctl02 removed" in [c.procedure for c in plan.changes]
    first = waiting_job(lab_cluster, "first", "--nodelist=gpu01")
    second = waiting_job(lab_cluster, "second", "--nodelist=gpu03", user="bob")
    lab_cluster.wait(
        lambda: all(job_field(lab_cluster, j, "JobState") == "RUNNING" for j in (first, second)),
        60,
        "both jobs to run",
    )
    backup_log = len(lab_cluster.ok("cat", "/var/log/slurm/slurmctld.log", host="ctl02").splitlines())

    removed = run_playbook(edited_inventory(NO_BACKUP), lambda message: None)
    log = removed.log.read_text()
    assert re.search(
        r"TASK \[(\S+\.)?slurm_controller : Put the controller that stays in charge[^\n]*\n(changed|ok):", log
    )
    active = lab_cluster.sh("systemctl", "is-active", "slurmctld", host="ctl02").stdout.strip()
    enabled = lab_cluster.sh("systemctl", "is-enabled", "slurmctld", host="ctl02").stdout.strip()
    assert (active, enabled) == ("inactive", "disabled")
    assert ping(lab_cluster) == {"ctl01": "UP"}
    for job in (first, second):
        assert job_field(lab_cluster, job, "JobState") == "RUNNING", job
        assert job_field(lab_cluster, job, "Restarts") == "0", job
    # ctl02 never took control while ctl01 restarted on the new list.
    since = lab_cluster.ok("cat", "/var/log/slurm/slurmctld.log", host="ctl02").splitlines()[backup_log:]
    assert not [line for line in since if "Running as primary controller" in line], since

    # Added back (the lab's own inventory): started, listed, and the takeover proved.
    added = lab.converge(progress=lambda message: None)
    log = added.log.read_text()
    assert re.search(
        r"TASK \[(\S+\.)?slurm_controller : Make the first backup take control\][^\n]*\nchanged:", log
    )
    assert re.search(r"TASK \[(\S+\.)?slurm_controller : Start the primary again[^\n]*\n(changed|ok):", log)
    since = lab_cluster.ok("cat", "/var/log/slurm/slurmctld.log", host="ctl02").splitlines()[backup_log:]
    assert [line for line in since if "Running as primary controller" in line], "ctl02 never took control"
    assert ping(lab_cluster) == {"ctl01": "UP", "ctl02": "UP"}
    assert lab_cluster.ok("systemctl", "is-enabled", "slurmctld", host="ctl02").strip() == "enabled"
    # Every node's slurmd fetched the configuration that lists ctl02 again (a slurmd restarted
    # before slurmctld would hold the old one until the next reconfigure).
    for node in lab_cluster.nodes_up:
        fetched = lab_cluster.ok("cat", "/run/slurm/conf/slurm.conf", host=node)
        assert "SlurmctldHost=ctl02" in fetched.splitlines(), node
    for job in (first, second):
        assert job_field(lab_cluster, job, "JobState") == "RUNNING", job
        assert job_field(lab_cluster, job, "Restarts") == "0", job
        release(lab_cluster, "first" if job == first else "second")
    for job in (first, second):
        lab_cluster.wait(lambda job=job: finished_cleanly(lab_cluster, job), 120, f"job {job} to finish")
        assert accounted(lab_cluster, job).split() == ["COMPLETED", "0:0"], job


# A partition's limit (slurm.conf, reconfigured) and a tenant's GPU quota (sacctmgr).
CONFIG_ONLY = {
    'default: true, max_time: "1-00:00:00"}': 'default: true, max_time: "2-00:00:00"}',
    "      gpu_quota: 16\n": "      gpu_quota: 12\n",
}


def test_config_only_changes_apply_on_the_controllers_and_leave_a_converge_nothing(safe_lab: Lab) -> None:
    """Issue 41: a change of Slurm's files and accounts alone goes through the plays tagged
    slurm_files, on the controllers; a full converge of the same inventory afterwards changes
    nothing anywhere (the plays the tag left out had nothing to do)."""
    lab_cluster = safe_lab
    edited = edited_inventory(CONFIG_ONLY)
    runs = apply_change(DEFAULT_INVENTORY, edited)
    assert [(r.playbook, r.hosts, r.tags) for r in runs] == [
        ("playbooks/slurm.yml", ("localhost", "ctl01", "ctl02"), ("slurm_files",))
    ]
    log = runs[0].log
    assert ran(log, "RUNNING HANDLER [slurm_common : Reconfigure Slurm]")
    assert ran(log, "TASK [slurm_accounts : Make the Slurm associations match the tenants of the inventory]")
    assert not ran(log, "TASK [munge : Install munge]")  # a play the tag leaves out
    assert "MaxTime=2-00:00:00" in lab_cluster.ok("scontrol", "show", "partition", "gpu", "--oneliner")
    shares = lab_cluster.ok(
        "sacctmgr", "-nP", "show", "assoc", "account=research", "user=", "format=fairshare"
    )
    assert shares.split() == ["12"], shares

    converge = run_playbook(edited, lambda message: None)
    assert not any(converge.changed.values()), converge.changed

    apply_back(edited)
    assert "MaxTime=1-00:00:00" in lab_cluster.ok("scontrol", "show", "partition", "gpu", "--oneliner")
