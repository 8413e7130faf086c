"""The return-to-service gate on the lab's real daemons (cluster.gate; health check every 10 s).

A node that lost a GPU device is drained by the health check; its device back, it does not return
at once: it enters the gate (a reservation of its own, a `[gate]` drain), runs the burn-in the lab
can run (GPU devices, XIDs; the driver rows skipped with their reason) and only then takes jobs: a
job submitted for it meanwhile starts after the burn-in ended. A node declared repaired while still
missing a GPU fails its burn-in twice and stays out with the check's name, and GateNodeOut fires;
an administrator's drain is never lifted; `scontrol reboot` brings a node back through the gate.

Evidence comes from Slurm itself where a state lasts only seconds: slurmctld's log (every reason
set, every reservation made and deleted), the job's start time, and the burn-in record the
controllers keep. Every test puts back what it changed, also when it fails."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from typing import Any

import pytest

from .conftest import Lab, run_scrubbed
from .test_health import interval, job, node
from .test_monitoring import firing

pytestmark = pytest.mark.lab

SICK, DEVICE = "gpu02", "/dev/nvidia3"
REPAIRED, REPAIRED_DEVICE = "gpu04", "/dev/nvidia5"
REBOOTED = "gpu03"
RECORDS = "/var/lib/gpucluster/gate/records.jsonl"
CTLD_LOG = "/var/log/slurm/slurmctld.log"
MARGIN = 15


def reservations(lab: Lab) -> set[str]:
    out = lab.ok("scontrol", "show", "reservation")
    return set(re.findall(r"ReservationName=(\S+)", out))


def records(lab: Lab, host: str) -> list[dict[str, Any]]:
    """The burn-in records the controller ctl01 keeps for `host`."""
    proc = lab.sh("cat", RECORDS, host="ctl01")
    if proc.returncode != 0:
        return []
    found = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    return [r for r in found if r["node"] == host]


def log_mark(lab: Lab) -> int:
    """The length of slurmctld's log now: what a test's own lines come after."""
    return int(lab.ok("stat", "--format=%s", CTLD_LOG).strip())


def log_since(lab: Lab, mark: int) -> str:
    return lab.ok("tail", f"--bytes=+{mark + 1}", CTLD_LOG)


def epoch(lab: Lab, when: str) -> float:
    """A Slurm or record time (2026-11-27T08:40:00, with or without its zone) in seconds."""
    return float(lab.ok("date", "--date", when, "+%s").strip())


def put_node_back(lab: Lab, host: str, device: str | None = None, mknod: list[str] | None = None) -> None:
    """The device back, the node out of the gate (the administrator's way out), undrained."""
    if device and mknod and lab.sh("test", "-e", device, host=host).returncode != 0:
        lab.ok("mknod", *mknod, host=host)
    lab.sh("gpucluster-healthcheck", "--leave-gate", host=host)
    if "DRAIN" in node(lab, host)[0].split("+"):
        lab.sh("scontrol", "update", f"NodeName={host}", "State=RESUME")
    lab.wait(lambda: node(lab, host) == ("IDLE", ""), 60, f"{host} idle and in service again")


def device_args(lab: Lab, host: str, device: str) -> list[str]:
    mode, major, minor = lab.ok("stat", "--format=%a %t %T", device, host=host).split()
    return ["-m", mode, device, "c", str(int(major, 16)), str(int(minor, 16))]


@pytest.fixture
def sick(lab_cluster: Lab) -> Iterator[tuple[Lab, list[str]]]:
    lab = lab_cluster
    mknod = device_args(lab, SICK, DEVICE)
    try:
        yield lab, mknod
    finally:
        lab.cancel_all()
        put_node_back(lab, SICK, DEVICE, mknod)


def test_a_node_that_lost_a_gpu_comes_back_only_through_a_passing_burn_in(
    sick: tuple[Lab, list[str]],
) -> None:
    lab, mknod = sick
    every = interval(lab)
    lab.ok("rm", DEVICE, host=SICK)
    lab.wait(lambda: node(lab, SICK)[1].startswith("[health]"), 2 * every + MARGIN, f"{SICK} drained")
    # A job for that node, submitted while it is out: it must not start before the gate lets it.
    waiting = lab.submit(f"--nodelist={SICK}", "--wrap=hostname")
    mark = log_mark(lab)
    before = len(records(lab, SICK))
    lab.ok("mknod", *mknod, host=SICK)
    lab.wait(lambda: node(lab, SICK) == ("IDLE", "") or job(lab, waiting)[0] in ("RUNNING", ""),
             2 * every + MARGIN, f"{SICK} back in service")  # fmt: skip
    log = log_since(lab, mark)
    # slurmctld's own account: the reservation made, the gate's reasons, the reservation deleted.
    assert re.search(r"Created reservation=gpucluster_gate_gpu02\b", log), log
    gate_reasons = re.findall(r"reason set to: (\[gate\] [^\n]*)", log)
    assert gate_reasons and gate_reasons[0].startswith("[gate] health/quick"), log
    assert any(" burn-in: quick running since " in r for r in gate_reasons), gate_reasons
    assert re.search(
        r"(Delete|delete).*reservation.*gpucluster_gate_gpu02|gpucluster_gate_gpu02.*delet", log, re.I
    ), log
    assert reservations(lab) == set()
    # The burn-in's record, kept on the controller: every check, the ones the lab cannot run
    # skipped with their reason.
    lab.wait(lambda: len(records(lab, SICK)) > before, 30, "the burn-in's record on ctl01")
    record = records(lab, SICK)[-1]
    checks = {c["check"]: (c["status"], c["detail"]) for c in record["checks"]}
    print("\nburn-in record:", json.dumps(record, indent=1))
    assert (record["trigger"], record["level"], record["result"]) == ("health", "quick", "pass")
    assert checks["gpu_count"] == ("pass", "8 of 8 (device files)")
    assert checks["driver"] == ("skip", "no nvidia-smi") and checks["ecc"] == ("skip", "no nvidia-smi")
    assert checks["dcgm_diag"] == ("skip", "no DCGM diagnostic at the quick level")
    # The job waited for the burn-in's end.
    lab.wait(lambda: job(lab, waiting)[0] in ("RUNNING", ""), 60, "the waiting job to start")
    started = lab.ok("sacct", "--noheader", "--allocations", f"--jobs={waiting}", "--format=Start").strip()
    ended = epoch(lab, record["started"]) + record["seconds"]
    assert epoch(lab, started) >= int(ended), (started, record)


@pytest.fixture
def repaired_node(lab_cluster: Lab) -> Iterator[tuple[Lab, list[str]]]:
    lab = lab_cluster
    mknod = device_args(lab, REPAIRED, REPAIRED_DEVICE)
    try:
        yield lab, mknod
    finally:
        put_node_back(lab, REPAIRED, REPAIRED_DEVICE, mknod)


def repaired(lab: Lab, *hosts: str) -> str:
    proc = run_scrubbed(f".venv/bin/gpucluster lab repaired {' '.join(hosts)}", timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_a_repaired_node_still_missing_a_gpu_fails_twice_stays_out_and_the_alert_fires(
    repaired_node: tuple[Lab, list[str]],
) -> None:
    lab, mknod = repaired_node
    every = interval(lab)
    lab.ok("rm", REPAIRED_DEVICE, host=REPAIRED)
    print("\n" + repaired(lab, REPAIRED))
    out = "[gate] repaired/deep out: gpu count: 7 of 8 (missing /dev/nvidia5) (failed 2 burn-in(s))"
    lab.wait(lambda: node(lab, REPAIRED)[1] == out, 4 * every + MARGIN, f"{REPAIRED} out after two burn-ins")
    assert node(lab, REPAIRED) == ("IDLE+DRAIN", out)
    # It stays out through later runs, held by its reservation too.
    time.sleep(every + 2)
    assert node(lab, REPAIRED) == ("IDLE+DRAIN", out)
    assert "gpucluster_gate_gpu04" in reservations(lab)
    lab.wait(lambda: bool(firing(lab, "GateNodeOut")), 120, "GateNodeOut in Alertmanager")
    (alert,) = firing(lab, "GateNodeOut")
    print("firing:", json.dumps({k: alert[k] for k in ("labels", "annotations")}, indent=1))
    assert alert["labels"]["slurm_node"] == REPAIRED and alert["labels"]["check"] == "gpu count"
    assert [r["result"] for r in records(lab, REPAIRED)][-2:] == ["fail", "fail"]
    # Repaired for real: the device back, declared repaired again, and it passes.
    lab.ok("mknod", *mknod, host=REPAIRED)
    repaired(lab, REPAIRED)
    lab.wait(lambda: node(lab, REPAIRED) == ("IDLE", ""), 2 * every + MARGIN, f"{REPAIRED} back in service")
    assert "gpucluster_gate_gpu04" not in reservations(lab)


def test_an_administrators_drain_is_never_lifted_by_the_gate(lab_cluster: Lab) -> None:
    lab = lab_cluster
    every = interval(lab)
    host = REBOOTED
    try:
        lab.ok("scontrol", "update", f"NodeName={host}", "State=DRAIN", "Reason=maintenance: new PSU")
        repaired(lab, host)
        time.sleep(2 * every + 2)
        # In the gate (its reservation), but no burn-in under someone else's drain, and the
        # reason is theirs.
        assert node(lab, host) == ("IDLE+DRAIN", "maintenance: new PSU")
        assert "gpucluster_gate_gpu03" in reservations(lab)
        # Their drain lifted: the gate holds it, burns it in, and lets it go.
        lab.ok("scontrol", "update", f"NodeName={host}", "State=RESUME")
        lab.wait(lambda: node(lab, host) == ("IDLE", "") and "gpucluster_gate_gpu03" not in reservations(lab),
                 2 * every + MARGIN, f"{host} through the gate")  # fmt: skip
        assert records(lab, host)[-1]["trigger"] == "repaired"
    finally:
        put_node_back(lab, host)


def test_scontrol_reboot_brings_the_node_back_through_the_gate(lab_cluster: Lab) -> None:
    lab = lab_cluster
    every = interval(lab)
    before = len(records(lab, REBOOTED))
    mark = log_mark(lab)
    try:
        lab.ok("scontrol", "reboot", "nextstate=resume", REBOOTED)
        waiting = lab.submit(f"--nodelist={REBOOTED}", "--wrap=hostname")
        lab.wait(lambda: len(records(lab, REBOOTED)) > before, 3 * every + 30, f"{REBOOTED}'s burn-in")
        lab.wait(lambda: node(lab, REBOOTED) == ("IDLE", "") or job(lab, waiting)[0] in ("RUNNING", ""),
                 every + MARGIN, f"{REBOOTED} back in service")  # fmt: skip
        record = records(lab, REBOOTED)[-1]
        assert (record["trigger"], record["result"]) == ("reboot", "pass"), record
        log = log_since(lab, mark)
        assert "Created reservation=gpucluster_gate_gpu03" in log, log
        assert re.search(r"node gpu03 returned to service", log), log
        lab.wait(lambda: job(lab, waiting)[0] in ("RUNNING", ""), 60, "the waiting job to start")
        started = lab.ok(
            "sacct", "--noheader", "--allocations", f"--jobs={waiting}", "--format=Start"
        ).strip()
        assert epoch(lab, started) >= int(epoch(lab, record["started"]) + record["seconds"]), (
            started,
            record,
        )
    finally:
        put_node_back(lab, REBOOTED)
