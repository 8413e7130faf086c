"""The return-to-service gate on the lab's real daemons (issue 40): the lab's inventory with
`cluster.gate` applied to the running lab. A node the health check drained for a lost GPU device,
its device back, waits in a reservation of its own with a `[gate]` drain, passes a quick burn-in
(the checks the lab cannot run, nvidia-smi's and DCGM's, skipped with their reason) and only then
takes work: a job pinned to it meanwhile never starts before the gate lets the node go. A node an
administrator declares repaired (`gpucluster node repaired`) goes through a deep burn-in the same
way, while another administrator's drain stays.

The gate is applied with `gpucluster apply`'s runs and taken off the same way afterwards; the
device file, the reservations and the nodes are put back whatever happens."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from gpucluster.lab.inventory import inventory_dir, vault_password_file
from gpucluster.lab.paths import DEFAULT_INVENTORY, REPO_ROOT
from gpucluster.lab.playbook import ansible_env
from gpucluster.tools import venv_tool

from .conftest import Lab, apply_back, apply_change
from .test_health import BUSY, DEVICE, MARGIN, SICK, device_args, interval, node

pytestmark = pytest.mark.lab

# One node of the partition in burn-in at a time.
GATE = "  gate: {max_in_burn_in: 1}\n"
REPAIRED = "gpu03"
RECORD_MARK = "gate-record "

CONTROLLER_LOG = "/var/log/slurm/slurmctld.log"


@dataclass(frozen=True)
class Gated:
    """A lab running its inventory with the gate: the lab, that inventory (the lab's generated
    one), and mknod's arguments to make the health tests' GPU device again."""

    lab: Lab
    inventory: Path
    mknod: list[str]


STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.\d+)?\] (.*)$")


def last_record(lab: Lab, host: str) -> dict[str, object]:
    """The last burn-in's record the gate left in the node's Comment ({} without one)."""
    out = lab.ok("scontrol", "show", "node", host, "--oneliner")
    comment = out.split(" Comment=", 1)[1] if " Comment=" in out else ""
    if not comment.startswith(RECORD_MARK):
        return {}
    record, _ = json.JSONDecoder().raw_decode(comment[len(RECORD_MARK) :])
    assert isinstance(record, dict), record
    return record


def passed(lab: Lab, host: str, trigger: str, level: str) -> dict[str, tuple[str, str]]:
    """The checks of the node's last burn-in, which passed at `level` for `trigger`:
    check -> (status, detail)."""
    record = last_record(lab, host)
    assert (record.get("result"), record.get("trigger"), record.get("level")) == ("pass", trigger, level), (
        record
    )
    rows = record.get("checks")
    assert isinstance(rows, list), record
    return {row[0]: (row[1], row[2]) for row in rows}


def log_length(lab: Lab) -> int:
    return len(lab.ok("cat", CONTROLLER_LOG, host="ctl01").splitlines())


def gate_events(lab: Lab, since: int, host: str) -> list[tuple[str, str]]:
    """(second, what) of what slurmctld logged of the gate on `host` since line `since`: its
    reservation made and deleted, its drain reasons, its return to service."""
    events = []
    for line in lab.ok("cat", CONTROLLER_LOG, host="ctl01").splitlines()[since:]:
        found = STAMP.match(line)
        if not found:
            continue
        when, what = found.groups()
        if f"reservation=gpucluster_gate_{host} " in what:
            events.append((when, "held"))
        elif what.startswith(f"_slurm_rpc_resv_delete complete for gpucluster_gate_{host} "):
            events.append((when, "let go"))
        elif what.startswith(f"update_node: node {host} reason set to: "):
            events.append((when, what.split("reason set to: ", 1)[1]))
    return events


def job_state(lab: Lab, job_id: str) -> str:
    return lab.ok("squeue", "--noheader", f"--jobs={job_id}", "--format=%T").strip()


def through_the_gate(lab: Lab, since: int, host: str, way: str, pinned: str) -> list[tuple[str, str]]:
    """The node held (a reservation of its own and a [gate] drain for `way`), let go, and the job
    pinned to it started only after that, on it."""
    lab.wait(lambda: job_state(lab, pinned) == "", 300, f"{host} through the gate and job {pinned} run")
    events = gate_events(lab, since, host)
    steps = [what for _, what in events]
    assert "held" in steps and "let go" in steps, events
    held, let_go = steps.index("held"), len(steps) - 1 - steps[::-1].index("let go")
    assert held < let_go, events
    assert any(what.startswith(f"[gate] {way}") for what in steps[held:let_go]), events
    start, nodes, state = lab.ok("sacct", "-nX", f"--jobs={pinned}", "--format=Start,NodeList,State").split()
    assert (nodes, state) == (host, "COMPLETED"), (nodes, state)
    # Second-resolution times: the job started in or after the second the gate let the node go.
    assert start >= events[let_go][0], (start, events)
    return events


@contextmanager
def gate_on(lab: Lab, source: Path) -> Iterator[Gated]:
    """The lab (brought up with `source`) running that inventory with cluster.gate, applied as
    `gpucluster apply` runs it; afterwards the device file, the reservations, the nodes and
    `source` itself again, whatever happened."""
    mknod = device_args(lab)
    target = inventory_dir(source)
    text = (source / "group_vars" / "all" / "cluster.yml").read_text(encoding="utf-8")
    assert "\n  partitions:\n" in text
    gated = text.replace("\n  partitions:\n", "\n" + GATE + "  partitions:\n", 1)
    (target / "group_vars" / "all" / "cluster.yml").write_text(gated, encoding="utf-8")
    try:
        apply_change(source, target)
        yield Gated(lab, target, mknod)
    finally:
        if lab.sh("test", "-e", DEVICE, host=SICK).returncode != 0:
            lab.ok("mknod", *mknod, host=SICK)
        lab.sh("scancel", "--name=gated")
        for host in (SICK, REPAIRED, BUSY):
            lab.sh("scontrol", "delete", f"ReservationName=gpucluster_gate_{host}")
            if "DRAIN" in node(lab, host)[0].split("+"):
                lab.sh("scontrol", "update", f"NodeName={host}", "State=RESUME")
        apply_back(target, source)


def drained_node_proof(gated: Gated) -> list[str]:
    """A node the health check drained goes back only through a passing quick burn-in; the job
    pinned to it meanwhile starts after. Returns slurmctld's log of it."""
    lab = gated.lab
    every = interval(lab)
    lab.ok("rm", DEVICE, host=SICK)
    lab.wait(lambda: node(lab, SICK)[1].startswith("[health]"), 2 * every + MARGIN, f"{SICK} drained")
    since = log_length(lab)
    # A job only SICK can run: it must not start before the gate lets the node go.
    pinned = lab.submit("--job-name=gated", f"--nodelist={SICK}", "--wrap=hostname", user="alice")
    assert job_state(lab, pinned) == "PENDING"

    lab.ok("mknod", *gated.mknod, host=SICK)
    events = through_the_gate(lab, since, SICK, "health/quick", pinned)
    checks = passed(lab, SICK, "health", "quick")
    assert checks["gpu_count"][0] == "pass", checks
    # What the lab cannot run is skipped with its reason, never passed.
    assert checks["gpu_model"] == ("skip", "no nvidia-smi"), checks
    assert node(lab, SICK) == ("IDLE", "")
    return [f"{when} {what}" for when, what in events]


def repaired_node_proof(gated: Gated) -> list[str]:
    """`gpucluster node repaired` takes a node with a running job through a deep burn-in (the job
    runs to its end, the next one pinned there waits); an administrator's drain elsewhere stays."""
    lab = gated.lab
    lab.ok("scontrol", "update", f"NodeName={BUSY}", "State=DRAIN", "Reason=maintenance")
    running = lab.submit("--job-name=gated", f"--nodelist={REPAIRED}", "--wrap=sleep 20", user="alice")
    lab.wait(lambda: job_state(lab, running) == "RUNNING", 60, f"the job on {REPAIRED} to run")
    since = log_length(lab)

    env = {**ansible_env(), "ANSIBLE_VAULT_PASSWORD_FILE": str(vault_password_file())}
    proc = subprocess.run(
        [venv_tool("gpucluster"), "node", "repaired", str(gated.inventory), REPAIRED],
        env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert f"{REPAIRED}: in the gate (repaired)" in proc.stdout, proc.stdout
    pinned = lab.submit("--job-name=gated", f"--nodelist={REPAIRED}", "--wrap=hostname", user="alice")
    events = through_the_gate(lab, since, REPAIRED, "repaired/deep", pinned)
    assert lab.ok("sacct", "-nX", f"--jobs={running}", "--format=State").split() == ["COMPLETED"]
    checks = passed(lab, REPAIRED, "repaired", "deep")
    for check in ("dcgm_diag", "nccl", "nccl_pair"):
        assert checks[check][0] == "skip", checks
    # The administrator's drain elsewhere: untouched through every run of the gate.
    assert node(lab, BUSY) == ("IDLE+DRAIN", "maintenance")
    lab.ok("scontrol", "update", f"NodeName={BUSY}", "State=RESUME")
    return [f"{when} {what}" for when, what in events]


@pytest.fixture(scope="module")
def gated_lab(lab_env: Lab) -> Iterator[Gated]:
    with gate_on(lab_env, DEFAULT_INVENTORY) as gated:
        yield gated


def test_a_drained_node_returns_only_through_a_passing_burn_in(gated_lab: Gated, lab_cluster: Lab) -> None:
    print("\n".join(drained_node_proof(gated_lab)))


def test_a_node_declared_repaired_passes_a_deep_burn_in_and_an_admins_drain_stays(
    gated_lab: Gated, lab_cluster: Lab
) -> None:
    print("\n".join(repaired_node_proof(gated_lab)))
