"""The return-to-service gate inside gpucluster-healthcheck, run against a temporary node: the
health check's FakeNode (device files, /proc, /sys in a temporary root) with a fake scontrol that
also keeps reservations, node comments and partitions the way slurmctld answers them (its messages
are Slurm's own: "Reservation X not found", "Duplicate reservation name"). Each way back into
service has its test here; the real daemons' proof is tests/lab/test_gate.py."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from gpucluster.layers import load_cluster
from gpucluster.model.gate import LEVELS, TRIGGERS
from gpucluster.rendering import render_files
from tests.conftest import INVENTORIES, run_cli
from tests.unit.test_healthcheck import CONFIG, SHOW_NODE, FakeNode, hc

GATE = """
[gpucluster gate]
levels = health:quick reboot:quick new:deep upgrade:quick move:standard repaired:deep
time_limit = quick:120 standard:300 deep:600
slots = gpu:1
attempts = 2
reboot_command = {reboot}
metrics_dir = {metrics}
records_dir = {records}
leaves = gpu01,gpu02 gpu03,gpu04
"""

# slurmctld as scontrol shows and changes it: the node (state, reason, comment, partition gpu),
# other nodes for `show node` of all, and reservations (created once per name, like slurmctld).
FAKE_SCONTROL = f"""#!{sys.executable}
import json, pathlib, sys
here = pathlib.Path(__file__).parent
node = json.loads((here / "node.json").read_text())
resv_file = here / "reservations.json"
resv = json.loads(resv_file.read_text()) if resv_file.exists() else {{}}
args = sys.argv[1:]
with open(here / "calls.log", "a") as log:
    log.write(json.dumps(args) + "\\n")
if node.get("down"):
    print("slurm_load_node error: Unable to contact slurm controller (connect failure)", file=sys.stderr)
    sys.exit(1)
def show(n):
    sys.stdout.write({SHOW_NODE!r}.format(**n))
    if n.get("reason"):
        print(f"   Reason={{n['reason']}} [root@2024-05-01T10:00:00]")
    if n.get("comment"):
        print(f"   Comment={{n['comment']}}")
if args[:2] == ["show", "node"]:
    if len(args) == 2:
        for other in [node, *json.loads((here / "others.json").read_text() if (here / "others.json").exists() else "[]")]:
            show(other)
            print()
        sys.exit(0)
    if args[2] != node["name"] or node.get("unknown"):
        print(f"Node {{args[2]}} not found", file=sys.stderr)
        sys.exit(1)
    show(node)
    sys.exit(0)
if args[:2] == ["show", "reservation"]:
    names = args[2:] or sorted(resv)
    if not names:
        print("No reservations in the system")
    for name in names:
        if name not in resv:
            print(f"Reservation {{name}} not found")
            sys.exit(1)
        r = resv[name]
        print(f"ReservationName={{name}} StartTime=2024-05-01T10:00:00 EndTime=2024-05-02T10:00:00 Duration={{r['Duration']}}")
        print(f"   Nodes={{r['Nodes']}} NodeCnt=1 CoreCnt=2 Features=(null) PartitionName=(null) Flags={{r['Flags']}}")
        print()
    sys.exit(0)
if args[:2] == ["create", "reservation"]:
    fields = dict(a.split("=", 1) for a in args[2:])
    name = fields.pop("ReservationName")
    if name in resv:
        print("Error creating the reservation: Duplicate reservation name", file=sys.stderr)
        sys.exit(1)
    resv[name] = fields
    resv_file.write_text(json.dumps(resv))
    print(f"Reservation created: {{name}}")
    sys.exit(0)
if args[0] == "delete":
    name = args[1].split("=", 1)[1]
    if name not in resv:
        print("Error deleting the reservation: Requested reservation is invalid", file=sys.stderr)
        sys.exit(1)
    del resv[name]
    resv_file.write_text(json.dumps(resv))
    sys.exit(0)
if args[0] == "update":
    fields = dict(a.split("=", 1) for a in args[1:])
    base = node["state"].split("+")[0]
    flags = [f for f in node["state"].split("+")[1:] if f != "DRAIN"]
    if fields.get("State") == "DRAIN":
        node["state"], node["reason"] = "+".join([base, "DRAIN", *flags]), fields["Reason"]
    elif fields.get("State") == "RESUME":
        node["state"], node["reason"] = "+".join([base, *flags]), None
    if "Comment" in fields:
        node["comment"] = fields["Comment"]
    (here / "node.json").write_text(json.dumps(node))
    sys.exit(0)
sys.exit(2)
"""

H100 = "NVIDIA H100 80GB HBM3"


class GateNode(FakeNode):
    """The health check's fake node, in a cluster with a gate."""

    def __init__(self, base: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        super().__init__(base, monkeypatch)
        self.tool("scontrol", FAKE_SCONTROL)
        self.records = base / "records"
        self.metrics = base / "metrics"
        self.metrics.mkdir()
        self.rebooted = base / "rebooted"
        self.shell_tool("reboot-stand-in", f"echo rebooted > {self.rebooted}")
        self.write_config()
        self.set_node(comment=None)

    def write_config(self, extra: str = "", gate_extra: str = "") -> None:
        gate = GATE.format(reboot=self.bin / "reboot-stand-in", metrics=self.metrics, records=self.records)
        self.config.write_text(
            CONFIG.replace("mounts = /home\n", "mounts = /home\n" + extra) + gate + gate_extra
        )

    @property
    def reservations(self) -> dict[str, dict[str, str]]:
        path = self.bin / "reservations.json"
        found: dict[str, dict[str, str]] = json.loads(path.read_text()) if path.exists() else {}
        return found

    def enter(self, trigger: str) -> int:
        return self.run("--enter-gate", trigger)

    def gate(self) -> dict[str, Any] | None:
        gate: dict[str, Any] | None = self.state().get("gate")
        return gate

    def wait_burn_in(self, timeout: float = 180) -> None:
        """Until the detached burn-in has given its verdict."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            gate = self.gate()
            if gate is None or gate.get("phase") != "burn-in":
                return
            time.sleep(0.2)
        log = (
            (self.state_dir / "burn-in.log").read_text() if (self.state_dir / "burn-in.log").exists() else ""
        )
        raise AssertionError(f"the burn-in did not end: {self.gate()}\n{log}")

    def nvidia_smi(self, name: str = H100, width: str = "16", count: int = 8) -> None:
        """nvidia-smi as a healthy 8-GPU node answers the queries the program makes."""
        listing = "\n".join(f"GPU {i}: {name} (UUID: GPU-{i:08d})" for i in range(count))
        rows = "\n".join(f"{i}, {name}, 00000000:{i:02X}:00.0, 550.163.01, {width}, 16" for i in range(count))
        ecc = "\n".join(f"{i}, 00000000:{i:02X}:00.0, 0, No" for i in range(count))
        self.shell_tool(
            "nvidia-smi",
            f'echo "$*" >> {self.base}/nvidia-smi.log\n'
            f'case "$*" in\n'
            f"  -L) cat <<'EOF'\n{listing}\nEOF\n;;\n"
            f"  --query-gpu=index,name,*) cat <<'EOF'\n{rows}\nEOF\n;;\n"
            f"  --query-gpu=index,pci.bus_id,ecc*) cat <<'EOF'\n{ecc}\nEOF\n;;\n"
            f"  'nvlink --status') echo 'GPU 0: {name}'; echo '\t Link 0: 26.562 GB/s';;\n"
            f"  *) exit 0;;\n"
            f"esac",
        )


@pytest.fixture
def node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> GateNode:
    return GateNode(tmp_path, monkeypatch)


QUICK_IN_THE_LAB = {"gpu_count": "pass", "gpu_model": "skip", "driver": "skip", "ecc": "skip", "pcie": "skip",
                    "nvlink": "skip", "imex": "skip", "infiniband": "pass", "mounts": "pass", "xid": "pass",
                    "dcgm_diag": "skip"}  # fmt: skip


# --- Way back: the health check's drain ------------------------------------------------------------


def test_a_node_the_health_check_drained_comes_back_only_through_a_passing_burn_in(node: GateNode) -> None:
    node.device(3).unlink()
    assert node.run() == 1
    assert node.node["reason"] == "[health] gpu count: 7 of 8 (missing /dev/nvidia3)"
    node.device(3).write_text("")
    assert node.run() == 0
    # Not resumed: into the gate, its reservation made, a burn-in slot taken, the burn-in started.
    assert node.reservations.keys() == {"gpucluster_gate_gpu02", "gpucluster_burnin_gpu_1"}
    gate_resv = node.reservations["gpucluster_gate_gpu02"]
    assert gate_resv["Users"] == "root" and gate_resv["Flags"] == "MAINT,IGNORE_JOBS"
    assert gate_resv["Duration"] == "UNLIMITED" and gate_resv["Nodes"] == "gpu02"
    assert node.node["reason"].startswith("[gate] health/quick burn-in: quick running since")
    node.wait_burn_in()
    # Passed: the reservations are gone, the node resumed, the record left for the controllers.
    assert node.reservations == {} and node.node["state"] == "IDLE" and node.node["reason"] is None
    assert node.gate() is None and node.state()["counts"] == {"pass": 1}
    record = json.loads(node.node["comment"].removeprefix(hc.RECORD_MARK))
    assert record["result"] == "pass" and record["trigger"] == "health" and record["level"] == "quick"
    assert {c: s for c, s, _ in record["checks"]} == QUICK_IN_THE_LAB
    assert [c for c in record["checks"] if c[0] == "gpu_count"] == [
        ["gpu_count", "pass", "8 of 8 (device files)"]
    ]
    (kept,) = (node.state_dir / "records").iterdir()
    assert json.loads(kept.read_text())["checks"][0]["check"] == "gpu_count"


def test_the_burn_in_reads_the_gate_once_the_run_that_started_it_has_saved_it(
    node: GateNode, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a loaded machine the detached burn-in read the state before the health check that
    started it had saved the gate, printed "not in burn-in: nothing to do" and ended: the gate
    waited out its bound. Here the health check takes 3 s between the start and its save."""
    real_spawn = hc.spawn_burn_in

    def slow_spawn(*args: Any, **kwargs: Any) -> int:
        pid: int = real_spawn(*args, **kwargs)
        time.sleep(3)
        return pid

    monkeypatch.setattr(hc, "spawn_burn_in", slow_spawn)
    node.nvidia_smi()
    node.enter("repaired")
    node.run()
    node.wait_burn_in(timeout=60)
    log = (node.state_dir / "burn-in.log").read_text()
    assert "nothing to do" not in log, log
    assert node.gate() is None and node.state()["counts"] == {"pass": 1}, log


def test_without_a_gate_the_health_check_resumes_as_before(node: GateNode) -> None:
    node.config.write_text(CONFIG)
    node.device(3).unlink()
    node.run()
    node.device(3).write_text("")
    node.run()
    assert node.node["state"] == "IDLE" and node.reservations == {}


def test_a_way_back_whose_level_is_none_skips_the_gate(node: GateNode) -> None:
    node.write_config(gate_extra="")
    node.config.write_text(node.config.read_text().replace("health:quick", "health:none"))
    node.device(3).unlink()
    node.run()
    node.device(3).write_text("")
    node.run()
    assert node.node["state"] == "IDLE" and node.reservations == {} and node.gate() is None


def test_a_repaired_node_still_missing_a_gpu_fails_its_burn_ins_and_stays_out(node: GateNode) -> None:
    """In the gate, a failing health check does not hold the burn-in back: the burn-in finds the
    fault too, and its failures count."""
    node.enter("repaired")
    node.device(5).unlink()
    for _ in range(2):
        node.run()
        node.wait_burn_in()
    assert node.node["reason"] == (
        "[gate] repaired/deep out: gpu count: 7 of 8 (missing /dev/nvidia5) (failed 2 burn-in(s))"
    )
    assert node.gate()["attempts"] == 2  # type: ignore[index]


def test_no_burn_in_while_the_node_still_runs_jobs(node: GateNode) -> None:
    node.set_node(state="MIXED+DRAIN", reason="[health] gpu count: 7 of 8 (missing /dev/nvidia3)")
    node.run()
    assert node.reservations.keys() == {"gpucluster_gate_gpu02"}
    assert node.node["reason"] == "[gate] health/quick waiting: the node is MIXED+DRAIN: its jobs end first"
    node.set_node(state="IDLE+DRAIN")
    node.run()
    node.wait_burn_in()
    assert node.node["state"] == "IDLE"


# --- Failing burn-ins, owners, limits ----------------------------------------------------------------


def test_a_node_failing_twice_stays_out_with_the_check_in_its_reason(node: GateNode) -> None:
    node.nvidia_smi(width="8")  # every GPU's link trained at x8 of x16: only the burn-in looks
    node.enter("repaired")
    node.run()
    node.wait_burn_in()
    gate = node.gate()
    assert gate is not None and gate["phase"] == "waiting" and gate["attempts"] == 1
    assert node.node["reason"].startswith("[gate] repaired/deep waiting: pcie: GPU 0 x8 of x16")
    assert node.node["reason"].endswith("(try 1 of 2 failed)")
    node.run()
    node.wait_burn_in()
    assert node.node["state"] == "IDLE+DRAIN"
    assert node.node["reason"].startswith("[gate] repaired/deep out: pcie: GPU 0 x8 of x16")
    assert node.reservations.keys() == {"gpucluster_gate_gpu02"}
    # Later runs leave it out; the health check itself passes (it does not look at PCIe).
    assert node.run() == 0
    assert node.node["reason"].startswith("[gate] repaired/deep out: pcie")
    assert node.state()["counts"] == {"fail": 2}


def test_repaired_brings_a_node_that_stayed_out_back_through_the_gate(node: GateNode) -> None:
    node.nvidia_smi(width="8")
    node.enter("repaired")
    for _ in range(2):
        node.run()
        node.wait_burn_in()
    assert "out:" in node.node["reason"]
    node.enter("reboot")  # any other way back: still out
    assert "out:" in node.node["reason"]
    node.nvidia_smi()
    node.enter("repaired")
    assert node.node["reason"] == "[gate] repaired/deep waiting: for a burn-in"
    node.run()
    node.wait_burn_in()
    assert node.node["state"] == "IDLE" and node.reservations == {}


def test_an_administrators_drain_is_never_lifted(node: GateNode) -> None:
    node.enter("repaired")
    node.set_node(state="IDLE+DRAIN", reason="maintenance: new PSU")
    node.run()
    # No burn-in under someone else's drain, and the reason is theirs.
    assert node.gate()["phase"] == "waiting"  # type: ignore[index]
    assert (
        node.node["reason"] == "maintenance: new PSU" and "gpucluster_burnin_gpu_1" not in node.reservations
    )
    # A pass with their drain on: the gate's reservation goes, their drain stays.
    gate = hc.State.load(node.state_dir / "state.json").gate
    assert gate is not None
    status = hc.parse_show_node(
        SHOW_NODE.format(name="gpu02", state="IDLE+DRAIN") + "   Reason=maintenance: new PSU\n"
    )
    ctx = hc.Context(node.root, node.kmsg, node.state_dir, time.monotonic() + 30, {"PATH": str(node.bin)})
    assert "left drained" in hc.release(ctx, "gpu02", gate, status)
    assert node.node["reason"] == "maintenance: new PSU" and node.reservations == {}


def test_at_most_the_partitions_slots_burn_in_at_once(node: GateNode) -> None:
    # Another node of partition gpu holds its one slot.
    (node.bin / "reservations.json").write_text(
        json.dumps({"gpucluster_burnin_gpu_1": {"Nodes": "gpu01", "Duration": "17", "Flags": "MAINT"}})
    )
    node.enter("repaired")
    node.run()
    assert node.node["reason"] == "[gate] repaired/deep waiting: for a burn-in slot of gpu"
    assert node.gate()["phase"] == "waiting"  # type: ignore[index]
    node.run()  # still full
    assert node.reservations.keys() == {"gpucluster_burnin_gpu_1", "gpucluster_gate_gpu02"}
    (node.bin / "reservations.json").write_text(
        json.dumps({k: v for k, v in node.reservations.items() if "gate" in k})
    )
    node.run()
    assert node.reservations["gpucluster_burnin_gpu_1"]["Nodes"] == "gpu02"
    node.wait_burn_in()


def exec_done(proc: subprocess.Popen[bytes]) -> None:
    """Until the child has exec'd: before, its command line is its parent's."""
    deadline = time.monotonic() + 10
    while b"--burn-in-run" not in Path(f"/proc/{proc.pid}/cmdline").read_bytes():
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_a_burn_in_past_its_bound_is_stopped_and_the_node_stays_out(
    node: GateNode, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hc, "GRACE", 0.0)
    node.enter("repaired")
    # A burn-in that hangs (its command line as the health check spawns it).
    hung = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "--burn-in-run",
                             "--state-dir", str(node.state_dir)], start_new_session=True)  # fmt: skip
    exec_done(hung)
    state = json.loads((node.state_dir / "state.json").read_text())
    state["gate"].update(phase="burn-in", pid=hung.pid, started=time.time() - 700, deadline=time.time() - 1,
                         slots=[], detail="deep running")  # fmt: skip
    (node.state_dir / "state.json").write_text(json.dumps(state))
    node.run()
    assert hung.wait(10) == -9
    assert node.node["reason"] == "[gate] repaired/deep out: burn-in timed out"
    assert node.state()["counts"] == {"timeout": 1}


def test_a_pid_reused_by_another_nodes_burn_in_is_not_this_nodes_burn_in(
    node: GateNode, tmp_path: Path
) -> None:
    """The gate's pid now runs another state directory's burn-in (pids are reused): this node's
    health check neither waits for it nor kills it; its own burn-in counts as ended."""
    node.enter("repaired")
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "--burn-in-run",
                              "--state-dir", str(tmp_path / "another-node")], start_new_session=True)  # fmt: skip
    try:
        exec_done(other)
        state = json.loads((node.state_dir / "state.json").read_text())
        state["gate"].update(phase="burn-in", pid=other.pid, started=time.time() - 700,
                             deadline=time.time() - 1, slots=[], detail="deep running")  # fmt: skip
        (node.state_dir / "state.json").write_text(json.dumps(state))
        assert not hc.burn_in_alive(state["gate"], node.state_dir)
        assert hc.burn_in_alive(state["gate"], tmp_path / "another-node")
        node.run()
        assert other.poll() is None
        assert node.state()["counts"] == {"fail": 1}
    finally:
        other.kill()
        other.wait()


def test_a_burn_in_that_runs_out_of_time_counts_as_timed_out(node: GateNode) -> None:
    # 3 s for the checks (20 s of the bound are kept for the verdict's scontrol calls).
    node.config.write_text(node.config.read_text().replace("deep:600", "deep:23"))
    node.enter("repaired")
    node.shell_tool("all_reduce_perf", "exec sleep 60")  # hangs (the burn-in alone runs it)
    node.run()
    node.wait_burn_in()
    assert node.node["reason"] == "[gate] repaired/deep out: burn-in timed out"
    record = json.loads(node.node["comment"].removeprefix(hc.RECORD_MARK))
    assert record["result"] == "timeout" and record["failed"] == "burn-in timed out"


# --- The other ways back -------------------------------------------------------------------------------


def reboot_program(node: GateNode) -> subprocess.CompletedProcess[str]:
    """As slurmd runs RebootProgram: the link gpucluster-reboot, no arguments (the program then
    replaces itself with the reboot command)."""
    link = node.base / hc.REBOOT_PROGRAM_NAME
    link.symlink_to(hc.Path(hc.__file__).resolve())
    proc = subprocess.run(
        [sys.executable, str(link), *node.args()], env={"PATH": str(node.bin)}, capture_output=True,
        text=True, timeout=60, check=False,
    )  # fmt: skip
    assert node.rebooted.read_text() == "rebooted\n", proc.stdout + proc.stderr
    return proc


def test_reboot_program_puts_the_node_in_the_gate_then_reboots(node: GateNode) -> None:
    node.set_node(state="IDLE+DRAIN+REBOOT_ISSUED", reason="reboot requested")
    reboot_program(node)
    assert node.reservations.keys() == {"gpucluster_gate_gpu02"}
    assert node.node["reason"] == "[gate] reboot/quick waiting: for a burn-in"
    # Back up with nextstate=resume: Slurm lifted the drain, the reservation still holds it; the
    # next run drains it again and burns it in.
    node.set_node(state="IDLE+MAINT", reason=None)
    node.run()
    node.wait_burn_in()
    assert node.node["state"] == "IDLE+MAINT" or node.node["state"] == "IDLE"
    assert node.reservations == {} and node.node["reason"] is None


def test_the_reboot_program_reboots_even_where_slurm_does_not_answer(node: GateNode) -> None:
    node.set_node(down=True)
    reboot_program(node)
    gate = node.gate()
    assert gate is not None and gate["trigger"] == "reboot" and not gate["applied"]
    node.set_node(down=False)
    node.run()
    assert "gpucluster_gate_gpu02" in node.reservations
    node.wait_burn_in()


def test_a_reboot_outside_slurm_is_seen_by_its_new_boot_id(node: GateNode) -> None:
    node.run()
    node.boot("boot-2")
    node.run()
    assert node.node["reason"] is not None and node.node["reason"].startswith("[gate] reboot/quick")
    node.wait_burn_in()
    assert node.node["state"] == "IDLE"


def test_a_node_new_to_the_running_cluster_enters_the_gate_before_slurmd_registers(node: GateNode) -> None:
    """The slurm_health role asks the controller; for a node slurmctld does not know yet it
    records the gate on the node, without a Slurm call (a configless node has no configuration
    before its slurmd first runs)."""
    assert node.run("--enter-gate", "new", "--pending") == 0
    gate = node.gate()
    assert gate is not None and gate["trigger"] == "new" and gate["level"] == "deep" and not gate["applied"]
    assert node.calls() == []
    # slurmctld knows it now; slurmd's first health check run holds it (before it registers).
    node.set_node(state="UNKNOWN")
    node.run()
    assert "gpucluster_gate_gpu02" in node.reservations
    # The reason says the state the run found (the drain is this run's own).
    assert node.node["reason"] == "[gate] new/deep waiting: the node is UNKNOWN: its jobs end first"
    node.set_node(state="IDLE+DRAIN")
    node.run()
    node.wait_burn_in()
    assert node.node["state"] == "IDLE" and node.reservations == {}


def test_a_node_moved_from_kubernetes_enters_the_gate_as_moved(node: GateNode) -> None:
    node.run("--enter-gate", "move", "--pending")
    assert node.gate()["level"] == "standard"  # type: ignore[index]


def test_a_way_back_without_a_gate_says_so_by_its_exit_code(node: GateNode) -> None:
    node.config.write_text(node.config.read_text().replace("upgrade:quick", "upgrade:none"))
    node.set_node(state="IDLE+DRAIN", reason="gpucluster: slurmd upgrade to 26.05")
    assert node.run("--enter-gate", "upgrade") == hc.NO_GATE
    assert node.node["reason"] == "gpucluster: slurmd upgrade to 26.05" and node.reservations == {}


def test_an_upgraded_node_is_taken_over_from_the_upgrades_drain(node: GateNode) -> None:
    node.set_node(state="IDLE+DRAIN", reason="gpucluster: slurmd upgrade to 26.05")
    assert node.run("--enter-gate", "upgrade") == 0
    assert node.node["reason"] == "[gate] upgrade/quick waiting: for a burn-in"
    node.run()
    node.wait_burn_in()
    assert node.node["state"] == "IDLE"


def test_repaired_takes_a_node_in_service_out_for_a_deep_burn_in(node: GateNode) -> None:
    node.enter("repaired")
    assert node.node["state"] == "IDLE+DRAIN" and node.reservations.keys() == {"gpucluster_gate_gpu02"}
    node.run()
    assert node.gate()["level"] == "deep"  # type: ignore[index]
    node.wait_burn_in()
    assert node.node["state"] == "IDLE"


def test_leave_gate_is_an_administrators_way_out(node: GateNode) -> None:
    node.enter("repaired")
    assert node.run("--leave-gate") == 0
    assert node.reservations == {} and node.node["state"] == "IDLE" and node.gate() is None


def test_entering_twice_keeps_the_first_way_back_and_the_deeper_level(node: GateNode) -> None:
    node.enter("reboot")
    node.enter("move")
    gate = node.gate()
    assert gate is not None and (gate["trigger"], gate["level"]) == ("reboot", "standard")


def test_without_a_gate_section_the_gate_commands_refuse(
    node: GateNode, capsys: pytest.CaptureFixture[str]
) -> None:
    node.config.write_text(CONFIG)
    assert node.run("--enter-gate", "repaired") == 2
    assert "no [gpucluster gate] section" in capsys.readouterr().out


# --- The controllers' records and metrics ----------------------------------------------------------------


def test_the_controllers_keep_each_record_once_and_write_the_metrics(node: GateNode) -> None:
    node.nvidia_smi(width="8")
    node.enter("repaired")
    node.run()
    node.wait_burn_in()
    others = [{"name": "gpu01", "state": "IDLE", "reason": None, "comment": None}]
    (node.bin / "others.json").write_text(json.dumps(others))
    for _ in range(2):
        assert node.run("--keep-records") == 0
    (record,) = [json.loads(line) for line in (node.records / "records.jsonl").read_text().splitlines()]
    assert record["node"] == "gpu02" and record["result"] == "fail"
    assert {"check": "pcie", "status": "fail", "detail": "GPU 0 x8 of x16; GPU 1 x8 of x16; GPU 2 x8 of x16; "
            "GPU 3 x8 of x16; GPU 4 x8 of x16; GPU 5 x8 of x16; GPU 6 x8 of x16; GPU 7 x8 of x16"} in record["checks"]  # fmt: skip
    metrics = (node.metrics / "gpucluster_gate.prom").read_text()
    assert (
        'gpucluster_gate_node{slurm_node="gpu02",trigger="repaired",level="deep",phase="waiting"} 1'
        in metrics
    )
    assert 'gpucluster_gate_node_seconds{slurm_node="gpu02"}' in metrics
    assert 'gpucluster_gate_burn_ins_total{result="fail"} 1' in metrics
    assert 'gpucluster_gate_check_failures_total{check="pcie"} 1' in metrics
    assert "gpu01" not in metrics
    promtool = Path(__file__).resolve().parents[2] / ".venv" / "bin" / "promtool"
    checked = subprocess.run([str(promtool), "check", "metrics"], input=metrics, capture_output=True, text=True,
                             check=False)  # fmt: skip
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_a_node_out_shows_in_the_metrics_with_its_check(node: GateNode) -> None:
    node.set_node(
        state="IDLE+DRAIN", reason="[gate] health/quick out: gpu count: 7 of 8 (failed 2 burn-in(s))"
    )
    node.run("--keep-records")
    metrics = (node.metrics / "gpucluster_gate.prom").read_text()
    assert ('gpucluster_gate_node_out{slurm_node="gpu02",check="gpu count",'
            'reason="[gate] health/quick out: gpu count: 7 of 8 (failed 2 burn-in(s))"} 1') in metrics  # fmt: skip


def test_someone_elses_comment_is_not_overwritten(node: GateNode) -> None:
    node.set_node(comment="rack 7, slot 3")
    node.enter("repaired")
    node.run()
    node.wait_burn_in()
    assert node.node["comment"] == "rack 7, slot 3" and node.node["state"] == "IDLE"
    assert list((node.state_dir / "records").iterdir())


# --- The burn-in by hand: read-only ------------------------------------------------------------------------

# nvidia-smi options that change a GPU's settings: none may ever be run by the burn-in.
MUTATING = ("-pm", "--persistence-mode", "-mig", "--multi-instance-gpu", "-lgc", "-rgc", "-lmc", "-rmc",
            "-ac", "-rac", "-pl", "--power-limit", "-r", "--gpu-reset", "-c", "--compute-mode", "-e",
            "--ecc-config", "-am", "-acp", "-cc", "--lock-gpu-clocks", "--reset-gpu-clocks")  # fmt: skip


def test_a_burn_in_by_hand_prints_its_record_and_only_reads(
    node: GateNode, capsys: pytest.CaptureFixture[str]
) -> None:
    node.nvidia_smi()
    node.shell_tool("dcgmi", f'echo "$*" >> {node.base}/dcgmi.log\necho "| Memory | Pass |"')
    node.shell_tool("all_reduce_perf", f'echo "$*" >> {node.base}/nccl.log\n'
                    'echo "# Out of bounds values : 0 OK"\necho "# Avg bus bandwidth    : 321.5 "')  # fmt: skip
    capsys.readouterr()
    code = node.run("--level", "deep", "--json", "--gpu-model", "H100", "--driver", "550.163.01")
    record = json.loads(capsys.readouterr().out)
    statuses = {c["check"]: (c["status"], c["detail"]) for c in record["checks"]}
    assert code == 0 and record["result"] == "pass"
    assert statuses["gpu_model"] == ("pass", H100)
    assert statuses["driver"] == ("pass", "550.163.01")
    assert statuses["pcie"] == ("pass", "x16 on 8 GPU(s) (each at its maximum)")
    assert statuses["dcgm_diag"] == ("pass", "diag -r 3 passed")
    assert statuses["nccl"] == ("pass", "bus bandwidth 321.5 GB/s across 8 GPU(s) (no floor declared)")
    assert statuses["nccl_pair"][0] == "skip"
    assert statuses["nvlink"] == ("skip", "NVLink not declared; 1 of 1 link(s) up")
    # No Slurm call, no state written; nvidia-smi only asked.
    assert node.calls() == [] and not (node.state_dir / "state.json").exists()
    asked = (node.base / "nvidia-smi.log").read_text().split()
    assert not set(asked) & set(MUTATING), asked
    assert (node.base / "dcgmi.log").read_text() == "diag -r 3\n"
    assert (node.base / "nccl.log").read_text() == "-b 8M -e 1G -f 2 -g 8\n"


def test_a_burn_in_by_hand_with_a_floor_fails_below_it(
    node: GateNode, capsys: pytest.CaptureFixture[str]
) -> None:
    node.nvidia_smi()
    node.shell_tool(
        "all_reduce_perf", 'echo "# Out of bounds values : 0 OK"\necho "# Avg bus bandwidth : 99.0"'
    )
    assert node.run("--level", "standard", "--nccl-busbw", "150") == 1
    assert "fail  nccl       bus bandwidth 99 GB/s across 8 GPU(s) (floor 150)" in capsys.readouterr().out


def test_a_floor_on_one_gpu_fails_saying_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """What all_reduce_perf printed on an H200 machine (one GPU): its bus bandwidth is 0 there."""
    host = GateNode(tmp_path, monkeypatch)
    host.nvidia_smi(count=1)
    host.shell_tool(
        "all_reduce_perf", 'echo "# Out of bounds values : 0 OK"\necho "# Avg bus bandwidth    : 0 "'
    )
    args = ["--config", str(tmp_path / "none.conf"), "--root", str(host.root), "--state-dir", str(tmp_path / "s"),
            "--level", "standard", "--gpus", "1"]  # fmt: skip
    assert hc.main(args) == 0
    assert (
        "pass  nccl       bus bandwidth 0 GB/s across 1 GPU(s) (no floor declared)" in capsys.readouterr().out
    )
    assert hc.main([*args, "--nccl-busbw", "1"]) == 1
    assert (
        "fail  nccl       the run passed, but a floor of 1 GB/s cannot be met on one GPU: all_reduce's "
        "bus bandwidth is 0 there by definition (declare none)"
    ) in capsys.readouterr().out


def test_an_nccl_floor_on_a_node_type_of_one_gpu_is_refused_at_its_line(tmp_path: Path) -> None:
    lab = gated_lab(tmp_path)
    cluster_file = lab / "group_vars" / "all" / "cluster.yml"
    eight = 'gpus: {model: h100, count: 8, devices: "/dev/nvidia[0-7]", memory_gb: 80}\n'
    text = cluster_file.read_text()
    assert eight in text
    one = 'gpus: {model: h100, count: 1, devices: "/dev/nvidia0", memory_gb: 80}\n      burn_in: {nccl_busbw_gbps: 100}\n'
    cluster_file.write_text(text.replace(eight, one))
    line = cluster_file.read_text().splitlines().index("      burn_in: {nccl_busbw_gbps: 100}") + 1
    proc = run_cli("validate", str(lab))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert (
        f"{cluster_file}:{line}: cluster.node_types.sim-h100.burn_in.nccl_busbw_gbps: a floor no node of one GPU"
        in (proc.stdout + proc.stderr)
    )


def test_a_burn_in_by_hand_on_a_host_without_any_declaration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """As the standalone script runs on any GPU host: no healthcheck.conf, nothing declared."""
    host = GateNode(tmp_path, monkeypatch)
    host.nvidia_smi(count=1)
    code = hc.main(["--config", str(tmp_path / "none.conf"), "--root", str(host.root), "--state-dir",
                    str(tmp_path / "s"), "--level", "quick", "--json"])  # fmt: skip
    record = json.loads(capsys.readouterr().out)
    statuses = {c["check"]: c["status"] for c in record["checks"]}
    assert code == 0 and record["section"] == "(none)"
    assert statuses["gpu_count"] == "skip" and statuses["gpu_model"] == "skip" and statuses["pcie"] == "pass"
    assert "no GPU count declared; 1 GPU(s) found" in json.dumps(record)


# --- Model, render and program agree ---------------------------------------------------------------------


def test_the_program_and_the_model_name_the_same_ways_back_and_levels() -> None:
    assert hc.TRIGGERS == TRIGGERS and hc.LEVELS == LEVELS
    assert tuple(hc.LEVEL_CHECKS) == LEVELS


def test_the_program_looks_for_nccl_tests_where_verify_does() -> None:
    from gpucluster.verify.probes import ALL_REDUCE_PERF_PATHS

    assert hc.ALL_REDUCE_PERF_PATHS == ALL_REDUCE_PERF_PATHS


def gated_lab(tmp_path: Path) -> Path:
    """The lab's inventory with a return-to-service gate (its reboot a restart of slurmd)."""
    lab = tmp_path / "lab"
    shutil.copytree(INVENTORIES / "lab", lab)
    cluster_file = lab / "group_vars" / "all" / "cluster.yml"
    gate = "  gate:\n    reboot_command: /usr/bin/systemctl --no-block restart slurmd\n"
    cluster_file.write_text(cluster_file.read_text() + gate)
    return lab


def test_the_rendered_gate_section_is_what_the_program_reads(tmp_path: Path) -> None:
    cluster = load_cluster(gated_lab(tmp_path))
    files = render_files(cluster)
    path = tmp_path / "healthcheck.conf"
    path.write_text(files["slurm/healthcheck.conf"])
    gate = hc.load_gate(path)
    assert gate is not None
    assert gate.slots == {"gpu": 1} and gate.peers("gpu03") == ("gpu04",)
    assert {t: gate.level(t) for t in TRIGGERS} == {t: getattr(cluster.spec.gate.levels, t)  # type: ignore[union-attr]
                                                     for t in TRIGGERS}  # fmt: skip
    exp = hc.load_expectations(path, "gpu01")
    assert exp.burn_in.dcgm_diag == {"quick": 0, "standard": 2, "deep": 3}
