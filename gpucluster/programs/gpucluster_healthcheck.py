#!/usr/bin/python3
"""gpucluster-healthcheck: Slurm's HealthCheckProgram and Prolog on gpucluster's nodes.

What this node must have comes from healthcheck.conf, rendered by gpucluster from the inventory:
the section whose `nodes` list names the node lists the checks its node type enables. Each
check runs only where its tool or device exists (nvidia-smi, dcgmi, /dev/kmsg).

- As HealthCheckProgram (the default): a failing node is drained with the reason
  `[health] <check>: <what it saw>`; a node whose reason starts with `[health]` is resumed once
  every check passes. A node drained for any other reason (an administrator's) is left alone.
- As Prolog (SLURM_SCRIPT_CONTEXT=prolog_slurmd, or --prolog): only the fast fatal check (GPU
  count). On failure the node is drained the same way and the exit code is 1, so Slurm requeues the
  job; a healthy node costs no call to slurmctld.

Python 3 standard library only (Debian 12's /usr/bin/python3). Every external command runs with a
timeout and the whole run fits a budget (default 50 s): Slurm 22.05 kills the program at 60 s.
Exit codes: 0 healthy, 1 a check failed (or Slurm could not be asked), 2 bad configuration (0 as
the Prolog, which must not fail jobs for a deployment error).
"""

from __future__ import annotations

import argparse
import configparser
import contextlib
import fcntl
import json
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PREFIX = "[health]"
DEFAULT_CONFIG = "/etc/slurm/healthcheck.conf"
DEFAULT_STATE_DIR = "/var/lib/gpucluster/health"
# Slurm 22.05 kills the program after 60 s; leave room for Python's start and slurmd's bookkeeping.
DEFAULT_BUDGET = 50.0
# Seconds each tool may take. scontrol's share is kept back from the checks so that a slow check
# can never leave the run without time to drain or resume the node.
# nvidia-smi's exit code when it cannot talk to the NVIDIA driver.
NVIDIA_SMI_NO_DRIVER = 9
TOOL_TIMEOUT = {"nvidia-smi": 10.0, "dcgmi": 30.0, "scontrol": 10.0}
SCONTROL_RESERVE = 2 * TOOL_TIMEOUT["scontrol"]
# Cheap checks first, so that the slow ones are what a tight budget cuts.
CHECK_ORDER = ("gpu_count", "mounts", "infiniband", "xid", "ecc", "dcgm")
PROLOG_CHECKS = ("gpu_count",)
# Checks that load the GPUs: run only in the node states of `heavy_node_state` (HealthCheckNodeState
# values; IDLE by default), so that no job shares its GPUs with a diagnostic.
HEAVY_CHECKS = ("dcgm",)
CONFIG_KEYS = (
    "nodes", "checks", "gpus", "devices", "xid_fatal", "infiniband", "mounts", "budget", "heavy_node_state",
)  # fmt: skip
MAX_REASON = 200
MAX_XIDS_KEPT = 20
# Slurm runs HealthCheckProgram and Prolog with an environment of its own, without PATH.
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
XID_RE = re.compile(r"NVRM: Xid \((?:PCI:)?([0-9A-Fa-f:.]+)\): (\d+)")
REASON_SUFFIX_RE = re.compile(r" \[[^\[\]]*@[^\[\]]*\]$")  # scontrol's " [user@time]"


class ConfigError(Exception):
    """healthcheck.conf is missing, malformed, or does not name this node (exit 2)."""


class ToolTimeout(Exception):
    """A tool did not finish within its own timeout: itself a sign of trouble (a hung driver)."""


class NoTime(Exception):
    """The run's budget does not leave a tool its full timeout: the check is skipped, not failed."""


# --- Configuration -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Expectations:
    """What one node type's nodes must have (one section of healthcheck.conf)."""

    section: str
    checks: tuple[str, ...]
    gpus: int = 0
    devices: tuple[str, ...] = ()
    xid_fatal: frozenset[int] = frozenset()
    infiniband: tuple[tuple[str, int], ...] = ()
    mounts: tuple[str, ...] = ()
    # Seconds a run may take: Slurm kills the program after its HealthCheckTimeout (60 s, fixed
    # before 26.05); None: the --budget default.
    budget: float | None = None
    # Node states the heavy checks run in; empty (a configuration without the key): any.
    heavy_node_state: tuple[str, ...] = ()


def _words(section: configparser.SectionProxy, key: str) -> list[str]:
    return section.get(key, "").split()


def parse_section(name: str, section: configparser.SectionProxy) -> Expectations:
    unknown = sorted(set(section) - set(CONFIG_KEYS))
    if unknown:
        raise ConfigError(f"section [{name}]: unknown key(s) {', '.join(unknown)}")
    checks = tuple(_words(section, "checks"))
    bad = [c for c in checks if c not in CHECK_ORDER]
    if bad:
        raise ConfigError(f"section [{name}]: unknown check(s) {', '.join(bad)}")
    try:
        gpus = int(section.get("gpus", "0") or "0")
        budget = float(section["budget"]) if section.get("budget") else None
        xids = frozenset(int(x) for x in _words(section, "xid_fatal"))
        ports = []
        for item in _words(section, "infiniband"):
            device, _, port = item.rpartition(":")
            ports.append((device, int(port)))
    except ValueError as exc:
        raise ConfigError(f"section [{name}]: {exc}") from None
    return Expectations(
        section=name,
        checks=checks,
        gpus=gpus,
        devices=tuple(_words(section, "devices")),
        xid_fatal=xids,
        infiniband=tuple(ports),
        mounts=tuple(_words(section, "mounts")),
        budget=budget,
        heavy_node_state=tuple(_words(section, "heavy_node_state")),
    )


def load_expectations(path: Path, node: str) -> Expectations:
    """The section of `path` whose `nodes` name `node`."""
    parser = configparser.ConfigParser(interpolation=None, default_section="\0")
    try:
        with open(path, encoding="utf-8") as handle:
            parser.read_file(handle)
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
    except configparser.Error as exc:
        raise ConfigError(f"{path}: {exc}") from None
    for name in parser.sections():
        if node in _words(parser[name], "nodes"):
            return parse_section(name, parser[name])
    raise ConfigError(f"no section of {path} names node {node}")


# --- Running tools -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Output:
    rc: int
    out: str
    err: str

    def first_line(self) -> str:
        for line in (self.err + "\n" + self.out).splitlines():
            if line.strip():
                return line.strip()
        return f"exit code {self.rc}"


def run_tool(argv: list[str], timeout: float, env: dict[str, str] | None = None) -> Output:
    """Run a command; on timeout kill its whole process group. A process stuck in the kernel (a
    hung GPU driver) cannot be reaped: it is abandoned instead of waited for."""
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
        env=env,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.communicate(timeout=1)
        shown = " ".join([argv[0], *(a.split("=")[0] for a in argv[1:2])])  # e.g. nvidia-smi --query-gpu
        raise ToolTimeout(f"{shown} timed out after {timeout:.0f} s") from None
    return Output(proc.returncode, out, err)


@dataclass
class Context:
    """Where a run looks (overridable for tests) and how much time it has left."""

    root: Path
    kmsg: Path
    state_dir: Path
    deadline: float
    env: dict[str, str]
    # Kept back from the checks for scontrol (a short test budget keeps half).
    reserve: float = SCONTROL_RESERVE
    notes: list[str] = field(default_factory=list)

    def path(self, absolute: str) -> Path:
        return self.root / absolute.lstrip("/")

    def has(self, tool: str) -> bool:
        return shutil.which(tool, path=self.env.get("PATH", DEFAULT_PATH)) is not None

    def run(self, argv: list[str], final: bool = False) -> Output:
        """argv with its tool's timeout, or less when the budget is short (then NoTime if it
        does not finish: the budget, not the tool, cut it short). Checks leave `reserve` seconds
        to the final scontrol calls."""
        own = TOOL_TIMEOUT.get(argv[0], 10.0)
        allowed = min(own, self.deadline - time.monotonic() - (0 if final else self.reserve))
        if allowed < 1:
            raise NoTime(f"{argv[0]} skipped: no time left in this run")
        try:
            return run_tool(argv, allowed, self.env)
        except ToolTimeout:
            if allowed < own:
                raise NoTime(f"{argv[0]} skipped: cut short by this run's time budget") from None
            raise
        except OSError as exc:
            return Output(127, "", f"{argv[0]}: {exc.strerror}")


# --- State between runs ------------------------------------------------------------------------


@dataclass
class State:
    """Kept in <state-dir>/state.json: how far the kernel log was read, the fatal XIDs seen this
    boot, and what the last run found and did."""

    boot_id: str = ""
    kmsg_seq: int = -1
    xids: list[dict[str, Any]] = field(default_factory=list)
    last_run: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> State:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            return cls(
                boot_id=str(data.get("boot_id", "")),
                kmsg_seq=int(data.get("kmsg_seq", -1)),
                xids=list(data.get("xids", [])),
                last_run=dict(data.get("last_run", {})),
            )
        except (OSError, ValueError, TypeError, AttributeError):
            return cls()  # none yet, or unreadable: start over (the kernel log is read again)

    def save(self, path: Path) -> None:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".state-", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(self.__dict__, handle, indent=1, sort_keys=True)
                handle.write("\n")
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise


# --- Checks ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Failure:
    check: str  # as it appears in the drain reason, e.g. "gpu count"
    saw: str

    def __str__(self) -> str:
        return f"{self.check}: {self.saw}"


def driver_unanswered(rc: int | None, output: str) -> bool:
    """nvidia-smi could not talk to the driver: exit 9 (no driver loaded), or NVML failing to
    initialise (seen as exit 255 "Failed to initialize NVML: Unknown Error" in a container of
    trixie without the driver)."""
    return rc == NVIDIA_SMI_NO_DRIVER or (rc not in (None, 0) and "Failed to initialize NVML" in output)


def check_gpu_count(exp: Expectations, ctx: Context, state: State) -> Failure | None:
    if exp.gpus <= 0:
        return None
    if ctx.has("nvidia-smi"):
        try:
            result = ctx.run(["nvidia-smi", "-L"])
        except ToolTimeout as exc:
            return Failure("gpu count", str(exc))
        if driver_unanswered(result.rc, result.out + result.err):
            # Installed but without a driver that answers (module not loaded, or the GPUs fell off
            # the bus): nothing can run on this node's GPUs.
            return Failure(
                "gpu driver", f"not answering (nvidia-smi exit {result.rc}: {result.first_line()})"
            )
        if result.rc != 0:
            return Failure("gpu count", f"nvidia-smi -L failed: {result.first_line()}")
        found = sum(1 for line in result.out.splitlines() if line.startswith("GPU "))
        return Failure("gpu count", f"{found} of {exp.gpus}") if found < exp.gpus else None
    if not exp.devices:
        ctx.notes.append("gpu count: skipped (no nvidia-smi and no device files declared)")
        return None
    missing = [d for d in exp.devices if not ctx.path(d).exists()]
    if not missing:
        return None
    found = len(exp.devices) - len(missing)
    shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
    return Failure("gpu count", f"{found} of {exp.gpus} (missing {shown})")


def mount_points(ctx: Context) -> set[str]:
    """Mount points from mountinfo: reading it cannot hang on a dead NFS server, a stat() can."""
    points = set()
    with open(ctx.path("/proc/self/mountinfo"), encoding="utf-8", errors="replace") as handle:
        for line in handle:
            fields = line.split()
            if len(fields) > 4:
                # mountinfo escapes space, tab, newline and backslash as octal (\040 ...).
                points.add(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4]))
    return points


def check_mounts(exp: Expectations, ctx: Context, state: State) -> Failure | None:
    try:
        mounted = mount_points(ctx)
    except OSError as exc:
        return Failure("mounts", f"cannot read mountinfo: {exc.strerror}")
    missing = [m for m in exp.mounts if m.rstrip("/") not in mounted and m not in mounted]
    return Failure("mounts", f"{', '.join(missing)} not mounted") if missing else None


def check_infiniband(exp: Expectations, ctx: Context, state: State) -> Failure | None:
    problems = []
    for device, port in exp.infiniband:
        path = ctx.path(f"/sys/class/infiniband/{device}/ports/{port}/state")
        try:
            text = path.read_text(encoding="utf-8").strip()  # e.g. "4: ACTIVE"
        except OSError:
            problems.append(f"{device} port {port} missing")
            continue
        port_state = text.partition(":")[2].strip() or text
        if port_state != "ACTIVE":
            problems.append(f"{device} port {port} {port_state}")
    return Failure("infiniband", "; ".join(problems)) if problems else None


def kmsg_records(path: Path) -> list[tuple[int, str]]:
    """(sequence number, text) of the kernel log. /dev/kmsg gives one record per read and EPIPE
    when the record under the reader was overwritten; a regular file (tests) holds one per line."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    chunks: list[bytes] = []
    try:
        if stat.S_ISCHR(os.fstat(fd).st_mode):
            while True:
                try:
                    chunk = os.read(fd, 16384)
                except BlockingIOError:
                    break  # read everything there is
                except BrokenPipeError:
                    continue
                if not chunk:
                    break
                chunks.append(chunk)
        else:
            while chunk := os.read(fd, 1 << 20):
                chunks.append(chunk)
    finally:
        os.close(fd)
    records = []
    for line in b"".join(chunks).decode("utf-8", "replace").splitlines():
        if not line or line[0] == " ":
            continue  # a record's key=value continuation lines
        head, sep, text = line.partition(";")
        fields = head.split(",")
        if not sep or len(fields) < 2 or not fields[1].isdigit():
            continue
        records.append((int(fields[1]), text))
    return records


def check_xid(exp: Expectations, ctx: Context, state: State) -> Failure | None:
    """Fatal XIDs logged since the last run are remembered until the node boots again (or
    --clear-xid after a GPU reset): the kernel log is read only from where the last run stopped."""
    boot_path = ctx.path("/proc/sys/kernel/random/boot_id")
    try:
        boot_id = boot_path.read_text(encoding="utf-8").strip()
    except OSError:
        boot_id = ""
    if boot_id != state.boot_id:
        state.boot_id, state.kmsg_seq, state.xids = boot_id, -1, []
    try:
        records = kmsg_records(ctx.kmsg)
    except OSError as exc:
        ctx.notes.append(f"xid: skipped ({ctx.kmsg}: {exc.strerror or exc})")
        return _xid_failure(state)
    if records and records[-1][0] < state.kmsg_seq:
        state.kmsg_seq = -1  # the log restarted without a new boot id: read it all
    for seq, text in records:
        if seq <= state.kmsg_seq:
            continue
        match = XID_RE.search(text)
        if match and int(match.group(2)) in exp.xid_fatal:
            state.xids.append({"seq": seq, "xid": int(match.group(2)), "pci": match.group(1)})
        state.kmsg_seq = seq
    del state.xids[:-MAX_XIDS_KEPT]
    return _xid_failure(state)


def _xid_failure(state: State) -> Failure | None:
    if not state.xids:
        return None
    first = state.xids[0]
    more = f" (+{len(state.xids) - 1} more)" if len(state.xids) > 1 else ""
    return Failure("xid", f"{first['xid']} on {first['pci']}{more}")


def _flag(value: str) -> bool | None:
    """nvidia-smi's Yes/No or a count; None for [N/A] and [Not Supported]."""
    value = value.strip()
    if value.isdigit():
        return int(value) > 0
    if value.lower() in ("yes", "true"):
        return True
    if value.lower() in ("no", "false"):
        return False
    return None


def check_ecc(exp: Expectations, ctx: Context, state: State) -> Failure | None:
    if not ctx.has("nvidia-smi"):
        ctx.notes.append("ecc: skipped (no nvidia-smi)")
        return None
    query = "index,pci.bus_id,ecc.errors.uncorrected.volatile.total,retired_pages.pending"
    try:
        result = ctx.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader,nounits"])
    except ToolTimeout as exc:
        return Failure("ecc", str(exc))
    if result.rc != 0:
        return Failure("ecc", f"nvidia-smi failed: {result.first_line()}")
    problems = []
    index_of: dict[str, str] = {}
    for line in result.out.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != 4:
            continue
        index, bus, uncorrected, pending = fields
        index_of[bus.lower()] = index
        if uncorrected.isdigit() and int(uncorrected) > 0:
            problems.append(f"GPU {index} {uncorrected} uncorrected ECC errors")
        if _flag(pending):
            problems.append(f"GPU {index} pages pending retirement")
    # Row remapping (A100 and later); older GPUs refuse the query, which says nothing about health.
    try:
        remap = ctx.run(
            [
                "nvidia-smi",
                "--query-remapped-rows=gpu_bus_id,remapped_rows.pending,remapped_rows.failure",
                "--format=csv,noheader",
            ]
        )
    except ToolTimeout as exc:
        return Failure("ecc", str(exc))
    if remap.rc == 0:
        for line in remap.out.splitlines():
            fields = [f.strip() for f in line.split(",")]
            if len(fields) != 3:
                continue
            gpu = index_of.get(fields[0].lower(), fields[0])
            if _flag(fields[2]):
                problems.append(f"GPU {gpu} row remapping failed")
            elif _flag(fields[1]):
                problems.append(f"GPU {gpu} row remapping pending")
    return Failure("ecc", "; ".join(problems)) if problems else None


def check_dcgm(exp: Expectations, ctx: Context, state: State) -> Failure | None:
    if not ctx.has("dcgmi"):
        ctx.notes.append("dcgm: skipped (no dcgmi)")
        return None
    try:
        result = ctx.run(["dcgmi", "diag", "-r", "1"])
    except ToolTimeout as exc:
        return Failure("dcgm", str(exc))
    failed = []
    for line in result.out.splitlines():
        match = re.match(r"^\|\s*([^|]+?)\s*\|\s*Fail\b", line)
        if match:
            failed.append(match.group(1))
    if failed:
        return Failure("dcgm", f"diag -r 1 failed: {', '.join(failed)}")
    if result.rc != 0:
        return Failure("dcgm", f"dcgmi diag -r 1 exited {result.rc}: {result.first_line()}")
    return None


CHECKS = {
    "gpu_count": check_gpu_count,
    "mounts": check_mounts,
    "infiniband": check_infiniband,
    "xid": check_xid,
    "ecc": check_ecc,
    "dcgm": check_dcgm,
}


def run_checks(
    exp: Expectations, ctx: Context, state: State, prolog: bool, skip: tuple[str, ...] = ()
) -> list[Failure]:
    failures = []
    for name in CHECK_ORDER:
        if name not in exp.checks or (prolog and name not in PROLOG_CHECKS) or name in skip:
            continue
        try:
            failure = CHECKS[name](exp, ctx, state)
        except NoTime as exc:
            ctx.notes.append(f"{name}: {exc}")
            continue
        if failure:
            failures.append(failure)
    return failures


# --- Slurm -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NodeStatus:
    state: str  # as scontrol shows it, e.g. IDLE+DRAIN
    reason: str | None

    @property
    def drained(self) -> bool:
        return any(part.startswith("DRAIN") for part in self.state.split("+"))

    def in_state(self, wanted: str) -> bool:
        """Whether the node is in a HealthCheckNodeState state (ANY, IDLE, NONDRAINED_IDLE, MIXED,
        ALLOC). A node still completing a job (IDLE+COMPLETING) is not idle yet."""
        base, *flags = self.state.split("+")
        idle = base == "IDLE" and "COMPLETING" not in flags
        return {
            "ANY": True,
            "IDLE": idle,
            "NONDRAINED_IDLE": idle and not self.drained,
            "MIXED": base == "MIXED",
            "ALLOC": base == "ALLOCATED",
        }.get(wanted, False)


def heavy_skipped(exp: Expectations, ctx: Context, node: str) -> tuple[tuple[str, ...], NodeStatus | None]:
    """The heavy checks this run leaves out, and the node's status when it had to ask for it."""
    heavy = tuple(c for c in HEAVY_CHECKS if c in exp.checks)
    if not heavy or not exp.heavy_node_state or "ANY" in exp.heavy_node_state:
        return (), None
    try:
        status = node_status(ctx, node)
    except (RuntimeError, ToolTimeout, NoTime) as exc:
        ctx.notes.append(f"{', '.join(heavy)}: skipped (node state unknown: {exc})")
        return heavy, None
    if any(status.in_state(s) for s in exp.heavy_node_state):
        return (), status
    wanted = " or ".join(exp.heavy_node_state)
    ctx.notes.append(f"{', '.join(heavy)}: skipped (node {status.state}; runs when {wanted})")
    return heavy, status


def parse_show_node(text: str) -> NodeStatus:
    state, reason = "", None
    for line in text.splitlines():
        stripped = line.strip()
        found = re.search(r"(?:^|\s)State=(\S+)", stripped)
        if found and not state:
            state = found.group(1)
        if stripped.startswith("Reason="):
            reason = REASON_SUFFIX_RE.sub("", stripped[len("Reason=") :])
    return NodeStatus(state, reason)


def node_status(ctx: Context, node: str) -> NodeStatus:
    result = ctx.run(["scontrol", "show", "node", node], final=True)
    if result.rc != 0 or "State=" not in result.out:
        raise RuntimeError(f"scontrol show node {node}: {result.first_line()}")
    return parse_show_node(result.out)


def drain_reason(failures: list[Failure]) -> str:
    reason = f"{PREFIX} " + "; ".join(str(f) for f in failures)
    # One line, no characters scontrol would re-split, and short enough for sinfo's columns.
    reason = re.sub(r"\s+", " ", reason)
    return reason if len(reason) <= MAX_REASON else reason[: MAX_REASON - 3] + "..."


@dataclass(frozen=True)
class Action:
    kind: str  # "drain", "resume" or "none"
    reason: str = ""
    why: str = ""


def decide(failures: list[Failure], status: NodeStatus) -> Action:
    """The whole policy: drain on failure, resume only what this program drained."""
    ours = status.reason is not None and status.reason.startswith(PREFIX)
    if failures:
        reason = drain_reason(failures)
        if status.drained and not ours:
            return Action("none", why=f"already drained for another reason ({status.reason}): left alone")
        if status.drained and status.reason == reason:
            return Action("none", why="already drained for this")
        return Action("drain", reason=reason)
    if status.drained and ours:
        return Action("resume", why=f"healthy again (was: {status.reason})")
    if status.drained:
        return Action("none", why=f"healthy; drained for another reason ({status.reason}): left alone")
    return Action("none")


def apply(ctx: Context, node: str, action: Action) -> None:
    if action.kind == "drain":
        argv = ["scontrol", "update", f"NodeName={node}", "State=DRAIN", f"Reason={action.reason}"]
    elif action.kind == "resume":
        argv = ["scontrol", "update", f"NodeName={node}", "State=RESUME"]
    else:
        return
    result = ctx.run(argv, final=True)
    if result.rc != 0:
        raise RuntimeError(f"{' '.join(argv[:4])} failed: {result.first_line()}")


# --- Main --------------------------------------------------------------------------------------


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="gpucluster-healthcheck", description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--config", type=Path, default=Path(DEFAULT_CONFIG), help="expectations file")
    parser.add_argument("--node", help="Slurm node name (default $SLURMD_NODENAME, else the short hostname)")
    parser.add_argument(
        "--prolog",
        action="store_true",
        default=os.environ.get("SLURM_SCRIPT_CONTEXT") == "prolog_slurmd",
        help="run as Prolog: only the fast fatal checks (default when Slurm runs it as Prolog)",
    )
    parser.add_argument("--root", type=Path, default=Path("/"), help="root of /dev, /sys and /proc")
    parser.add_argument("--kmsg", type=Path, help="kernel log (default <root>/dev/kmsg)")
    parser.add_argument("--state-dir", type=Path, default=Path(DEFAULT_STATE_DIR))
    parser.add_argument(
        "--budget",
        type=float,
        help=f"seconds the run may take (default: healthcheck.conf's budget, else {DEFAULT_BUDGET:.0f})",
    )
    parser.add_argument("--dry-run", action="store_true", help="check and print; change nothing")
    parser.add_argument(
        "--check-config", action="store_true", help="only find this node's section and print its checks"
    )
    parser.add_argument(
        "--clear-xid", action="store_true", help="forget the fatal XIDs of this boot (after a GPU reset)"
    )
    return parser.parse_args(argv)


def node_name(args: argparse.Namespace) -> str:
    return args.node or os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    env = dict(os.environ)
    env.setdefault("PATH", DEFAULT_PATH)
    env["SLURM_TIME_FORMAT"] = "standard"  # the " [user@time]" suffix parse_show_node strips
    node = node_name(args)
    try:
        exp = load_expectations(args.config, node)
    except ConfigError as exc:
        print(f"gpucluster-healthcheck: {exc}", file=sys.stderr)
        # A broken deployment is not a broken GPU: as the Prolog it must not fail every job (and
        # drain every node); the periodic runs report it in slurmd's log instead.
        return 0 if args.prolog and not args.check_config else 2
    if args.check_config:
        print(f"{node}: section [{exp.section}], checks: {' '.join(exp.checks) or 'none'}")
        return 0
    budget = args.budget or exp.budget or DEFAULT_BUDGET
    ctx = Context(
        root=args.root,
        kmsg=args.kmsg or args.root / "dev" / "kmsg",
        state_dir=args.state_dir,
        deadline=time.monotonic() + budget,
        env=env,
        reserve=min(SCONTROL_RESERVE, budget / 2),
    )
    if args.prolog:
        return prolog_run(exp, ctx, node, args.dry_run)
    return health_run(exp, ctx, node, args)


def prolog_run(exp: Expectations, ctx: Context, node: str, dry_run: bool) -> int:
    """Fast fatal checks only; the XID state belongs to the periodic runs and is not touched."""
    failures = run_checks(exp, ctx, State(), prolog=True)
    if not failures:
        return 0
    print(f"{node}: {'; '.join(str(f) for f in failures)}")
    if not dry_run:
        try:
            action = decide(failures, node_status(ctx, node))
            apply(ctx, node, action)
        except (RuntimeError, ToolTimeout, NoTime) as exc:
            # Slurm drains the node itself ("Prolog error") when the prolog fails.
            print(f"{node}: {exc}", file=sys.stderr)
    return 1


def health_run(exp: Expectations, ctx: Context, node: str, args: argparse.Namespace) -> int:
    ctx.state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    with open(ctx.state_dir / "lock", "w", encoding="utf-8") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            # An interval shorter than a slow run: the run in progress decides.
            print(f"{node}: a previous run is still going; nothing to do")
            return 0
        state_file = ctx.state_dir / "state.json"
        state = State.load(state_file)
        if args.clear_xid:
            state.xids = []
        skip, _ = heavy_skipped(exp, ctx, node)
        failures = run_checks(exp, ctx, state, prolog=False, skip=skip)
        outcome = 1 if failures else 0
        try:
            action = decide(failures, node_status(ctx, node))
            if args.dry_run:
                done = f"dry run, would do: {action.kind} {action.reason}".rstrip()
            else:
                apply(ctx, node, action)
                done = {"drain": f"drained: {action.reason}", "resume": "resumed"}.get(
                    action.kind, "no change"
                )
        except (RuntimeError, ToolTimeout, NoTime) as exc:
            action, done, outcome = Action("none"), f"Slurm not updated: {exc}", 1
        summary = "; ".join(str(f) for f in failures) or "healthy"
        print(f"{node}: {summary}; {done}{'; ' + action.why if action.why else ''}")
        for note in ctx.notes:
            print(f"{node}: {note}")
        if not args.dry_run:
            now = time.time()
            state.last_run = {
                "time": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(now)),
                "epoch": round(now, 3),
                "failures": [str(f) for f in failures],
                "action": action.kind,
                "result": done,
                "why": action.why,
            }
            state.save(state_file)
    return outcome


if __name__ == "__main__":
    sys.exit(main())
