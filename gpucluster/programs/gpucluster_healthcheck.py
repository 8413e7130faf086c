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

- With a gate (healthcheck.conf's [gpucluster gate], cluster.gate): a node the health check
  drained is not resumed when healthy again; it enters the return-to-service gate, as do a
  rebooted node (RebootProgram: this program as gpucluster-reboot), a node new to the cluster, an
  upgraded, moved or repaired one (--enter-gate): a reservation of its own and a `[gate]` drain
  until a burn-in of its way back's level passes (below: "The gate"). On the controllers,
  --keep-records keeps each burn-in's record; on Kubernetes' nodes, --kubernetes-gate keeps the
  gate with a taint instead.
- By hand: `--level quick|standard|deep [--json]` runs a burn-in on this host and prints it;
  read-only (no Slurm call, no GPU setting changed), with or without healthcheck.conf.

Python 3 standard library only (Debian 12's /usr/bin/python3). Every external command runs with a
timeout and the whole run fits a budget (default 50 s): Slurm 22.05 kills the program at 60 s.
Exit codes: 0 healthy, 1 a check failed (or Slurm could not be asked), 2 bad configuration (0 as
the Prolog, which must not fail jobs for a deployment error).
"""

from __future__ import annotations

import argparse
import calendar
import configparser
import contextlib
import fcntl
import json
import os
import re
import shutil
import signal
import socket
import ssl
import stat
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

PREFIX = "[health]"
DEFAULT_CONFIG = "/etc/slurm/healthcheck.conf"
DEFAULT_STATE_DIR = "/var/lib/gpucluster/health"
# Where the controllers keep a record of every burn-in (--keep-records).
DEFAULT_RECORDS_DIR = "/var/lib/gpucluster/gate"
# The return-to-service gate (gpucluster.model.gate holds the same names; a unit test checks).
TRIGGERS = ("health", "reboot", "new", "upgrade", "move", "repaired")
LEVELS = ("quick", "standard", "deep")
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
    # What the gate's burn-in compares against (node_types.<type>.burn_in).
    "gpu_model", "driver", "pcie_width", "nvlink", "imex", "ib_rate", "dcgm_diag", "nccl_busbw",
    "nccl_pair_busbw",
)  # fmt: skip
# The gate's own section of healthcheck.conf (a name no node type can have: it holds a blank).
GATE_SECTION = "gpucluster gate"
GATE_KEYS = (
    "levels", "time_limit", "slots", "attempts", "reboot_command", "metrics_dir", "records_dir", "leaves",
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
    burn_in: BurnInSpec = field(default_factory=lambda: BurnInSpec())


# The `dcgmi diag -r` level of each burn-in level where a node type declares none.
DEFAULT_DCGM_DIAG = {"quick": 0, "standard": 2, "deep": 3}


@dataclass(frozen=True)
class BurnInSpec:
    """What the gate's burn-in compares against; an empty value: not declared (the check then
    reports what it found and counts as skipped)."""

    gpu_model: str = ""
    driver: str = ""
    pcie_width: int = 0
    nvlink: bool = False
    imex: bool = False
    ib_rate: int = 0  # Gb/s
    dcgm_diag: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_DCGM_DIAG))
    nccl_busbw: float = 0.0  # GB/s
    nccl_pair_busbw: float = 0.0


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
        burn_in=parse_burn_in(name, section),
    )


def _pairs(section: configparser.SectionProxy, key: str) -> dict[str, str]:
    """`a:1 b:2` -> {"a": "1", "b": "2"}."""
    pairs = {}
    for item in _words(section, key):
        name, sep, value = item.rpartition(":")
        if not sep or not name:
            raise ValueError(f"{key}: {item!r} is not name:value")
        pairs[name] = value
    return pairs


def _yes(section: configparser.SectionProxy, key: str) -> bool:
    return section.get(key, "no").strip().lower() in ("yes", "true", "1")


def parse_burn_in(name: str, section: configparser.SectionProxy) -> BurnInSpec:
    try:
        dcgm = dict(DEFAULT_DCGM_DIAG)
        dcgm.update({level: int(value) for level, value in _pairs(section, "dcgm_diag").items()})
        return BurnInSpec(
            gpu_model=section.get("gpu_model", "").strip(),
            driver=section.get("driver", "").strip(),
            pcie_width=int(section.get("pcie_width", "0") or "0"),
            nvlink=_yes(section, "nvlink"),
            imex=_yes(section, "imex"),
            ib_rate=int(section.get("ib_rate", "0") or "0"),
            dcgm_diag=dcgm,
            nccl_busbw=float(section.get("nccl_busbw", "0") or "0"),
            nccl_pair_busbw=float(section.get("nccl_pair_busbw", "0") or "0"),
        )
    except ValueError as exc:
        raise ConfigError(f"section [{name}]: {exc}") from None


@dataclass(frozen=True)
class GateConf:
    """The gate's section: the burn-in level of each way back, the time bounds, the burn-in
    slots of each partition, and where records and metrics go."""

    levels: dict[str, str]
    time_limit: dict[str, int]
    slots: dict[str, int]
    attempts: int = 2
    reboot_command: tuple[str, ...] = ("/usr/bin/systemctl", "reboot")
    metrics_dir: str = ""
    records_dir: str = DEFAULT_RECORDS_DIR
    leaves: tuple[tuple[str, ...], ...] = ()

    def level(self, trigger: str) -> str:
        return self.levels.get(trigger, "none")

    def peers(self, node: str) -> tuple[str, ...]:
        """The other nodes under the same leaf switch."""
        for leaf in self.leaves:
            if node in leaf:
                return tuple(n for n in leaf if n != node)
        return ()


def parse_gate(section: configparser.SectionProxy) -> GateConf:
    unknown = sorted(set(section) - set(GATE_KEYS))
    if unknown:
        raise ConfigError(f"section [{GATE_SECTION}]: unknown key(s) {', '.join(unknown)}")
    try:
        levels = _pairs(section, "levels")
        bad = [f"{t}:{lv}" for t, lv in levels.items() if t not in TRIGGERS or lv not in (*LEVELS, "none")]
        if bad:
            raise ValueError(f"levels: unknown {', '.join(bad)}")
        return GateConf(
            levels=levels,
            time_limit={k: int(v) for k, v in _pairs(section, "time_limit").items()},
            slots={k: int(v) for k, v in _pairs(section, "slots").items()},
            attempts=int(section.get("attempts", "2") or "2"),
            reboot_command=tuple(_words(section, "reboot_command")) or GateConf.reboot_command,
            metrics_dir=section.get("metrics_dir", "").strip(),
            records_dir=section.get("records_dir", "").strip() or DEFAULT_RECORDS_DIR,
            leaves=tuple(tuple(leaf.split(",")) for leaf in _words(section, "leaves")),
        )
    except ValueError as exc:
        raise ConfigError(f"section [{GATE_SECTION}]: {exc}") from None


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
        if name != GATE_SECTION and node in _words(parser[name], "nodes"):
            return parse_section(name, parser[name])
    raise ConfigError(f"no section of {path} names node {node}")


def load_gate(path: Path) -> GateConf | None:
    """The gate's section of `path`; None where the inventory has no gate (or no file)."""
    parser = configparser.ConfigParser(interpolation=None, default_section="\0")
    try:
        with open(path, encoding="utf-8") as handle:
            parser.read_file(handle)
    except OSError:
        return None
    except configparser.Error as exc:
        raise ConfigError(f"{path}: {exc}") from None
    return parse_gate(parser[GATE_SECTION]) if parser.has_section(GATE_SECTION) else None


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
    # What the checks saw when they passed, and why a check did not run (the burn-in's record).
    seen: dict[str, str] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)

    def path(self, absolute: str) -> Path:
        return self.root / absolute.lstrip("/")

    def has(self, tool: str) -> bool:
        return self.which(tool) is not None

    def which(self, tool: str) -> str | None:
        return shutil.which(tool, path=self.env.get("PATH", DEFAULT_PATH))

    def skip(self, check: str, reason: str) -> None:
        """A check that could not run here: noted, and never counted as passed."""
        self.skipped[check] = reason
        self.notes.append(f"{check.replace('_', ' ')}: skipped ({reason})")

    def run(self, argv: list[str], final: bool = False, timeout: float | None = None) -> Output:
        """argv with its tool's timeout (or `timeout`), or less when the budget is short (then
        NoTime if it does not finish: the budget, not the tool, cut it short). Checks leave
        `reserve` seconds to the final scontrol calls."""
        own = timeout if timeout is not None else TOOL_TIMEOUT.get(argv[0], 10.0)
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
    # The gate: where this node stands on its way back (None: in service), the boot the last run
    # saw (a new one is a reboot), and how many burn-ins ended how.
    gate: dict[str, Any] | None = None
    last_boot: str = ""
    counts: dict[str, int] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> State:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            gate = data.get("gate")
            return cls(
                boot_id=str(data.get("boot_id", "")),
                kmsg_seq=int(data.get("kmsg_seq", -1)),
                xids=list(data.get("xids", [])),
                last_run=dict(data.get("last_run", {})),
                gate=dict(gate) if isinstance(gate, dict) else None,
                last_boot=str(data.get("last_boot", "")),
                counts={str(k): int(v) for k, v in dict(data.get("counts", {})).items()},
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
        ctx.seen["gpu_count"] = f"{found} of {exp.gpus} (nvidia-smi)"
        return Failure("gpu count", f"{found} of {exp.gpus}") if found < exp.gpus else None
    if not exp.devices:
        ctx.skip("gpu_count", "no nvidia-smi and no device files declared")
        return None
    missing = [d for d in exp.devices if not ctx.path(d).exists()]
    if not missing:
        ctx.seen["gpu_count"] = f"{exp.gpus} of {exp.gpus} (device files)"
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
    ctx.seen["mounts"] = f"{', '.join(exp.mounts)} mounted"
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
    ctx.seen["infiniband"] = f"{len(exp.infiniband)} port(s) ACTIVE"
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
        ctx.skip("xid", f"{ctx.kmsg}: {exc.strerror or exc}")
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
        return None  # (no fatal XID this boot)
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
        ctx.skip("ecc", "no nvidia-smi")
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
    ctx.seen["ecc"] = f"no uncorrected error or pending retirement on {len(index_of)} GPU(s)"
    return Failure("ecc", "; ".join(problems)) if problems else None


def check_dcgm(exp: Expectations, ctx: Context, state: State) -> Failure | None:
    if not ctx.has("dcgmi"):
        ctx.skip("dcgm", "no dcgmi")
        return None
    return dcgm_diag(ctx, "dcgm", 1, engine_down_skips=False)


# Seconds `dcgmi diag -r N` may take (DCGM's own estimates: level 1 under a minute, 2 a few
# minutes, 3 about half an hour, 4 up to a few hours on 8 GPUs).
DCGM_SECONDS = {1: 120.0, 2: 900.0, 3: 3600.0, 4: 14400.0}


def dcgm_diag(ctx: Context, check: str, level: int, engine_down_skips: bool = True) -> Failure | None:
    """`dcgmi diag -r level`: a test line `| name | Fail` or a non-zero exit fails. For the
    burn-in, DCGM's host engine not answering is a check that could not run (skipped), not a GPU
    fault; the health check keeps draining on it, as it always did."""
    timeout = TOOL_TIMEOUT["dcgmi"] if level == 1 else DCGM_SECONDS[level]
    try:
        result = ctx.run(["dcgmi", "diag", "-r", str(level)], timeout=timeout)
    except ToolTimeout as exc:
        return Failure(check, str(exc))
    failed = []
    for line in result.out.splitlines():
        match = re.match(r"^\|\s*([^|]+?)\s*\|\s*Fail\b", line)
        if match:
            failed.append(match.group(1))
    if failed:
        return Failure(check, f"diag -r {level} failed: {', '.join(failed)}")
    engine_down = re.search(r"host ?engine|Unable to (connect|establish)", result.out + result.err, re.I)
    if result.rc != 0 and engine_down and engine_down_skips:
        ctx.skip(check, f"DCGM's host engine does not answer ({result.first_line()})")
        return None
    if result.rc != 0:
        return Failure(check, f"dcgmi diag -r {level} exited {result.rc}: {result.first_line()}")
    ctx.seen[check] = f"diag -r {level} passed"
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


# --- Burn-in: the gate's checks ----------------------------------------------------------------
# Read-only towards the GPUs: nvidia-smi queries (-L, --query-*, nvlink --status), dcgmi diag,
# nvidia-imex-ctl's query, nccl-tests. Nothing here changes a GPU setting (no MIG, clocks,
# persistence mode, application clocks or resets); tests/unit/test_burn_in.py holds every command
# it runs to that list.

# Every check of a burn-in, in the order it runs: cheap inventory checks first, load last.
BURN_IN_CHECKS = (
    "gpu_count", "gpu_model", "driver", "ecc", "pcie", "nvlink", "imex", "infiniband", "mounts", "xid",
    "dcgm_diag", "nccl", "nccl_pair",
)  # fmt: skip
# What each level runs (the checks a node cannot run are skipped with the reason).
LEVEL_CHECKS = {
    "quick": BURN_IN_CHECKS[:11],
    "standard": BURN_IN_CHECKS[:12],
    "deep": BURN_IN_CHECKS,
}
# Seconds each burn-in tool may take (besides dcgmi's per level, DCGM_SECONDS).
BURN_IN_SECONDS = {"nvidia-smi": 30.0, "nvidia-imex-ctl": 30.0, "nccl": 900.0, "nccl_pair": 1200.0}
# Where nccl-tests' all_reduce_perf is looked for after PATH (gpucluster.verify.probes has the same
# list; a unit test checks).
ALL_REDUCE_PERF_PATHS = (
    "/usr/local/bin/all_reduce_perf",
    "/opt/nccl-tests/build/all_reduce_perf",
    "/usr/local/nccl-tests/build/all_reduce_perf",
)
GPU_QUERY = "index,name,pci.bus_id,driver_version,pcie.link.width.current,pcie.link.width.max"
BUSBW_RE = re.compile(r"#\s*Avg bus bandwidth\s*:\s*([0-9.]+)")


@dataclass
class Outcome:
    """One check of a burn-in: pass (what it saw), fail (what it saw) or skip (why it did not run,
    and what it found where it could look)."""

    check: str
    status: str
    detail: str
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "status": self.status,
            "detail": self.detail,
            "seconds": round(self.seconds, 1),
        }

    def __str__(self) -> str:
        return f"{self.check.replace('_', ' ')}: {self.detail}"


@dataclass
class BurnIn:
    """What one burn-in works with: the node's expectations, where it looks, its level, and (in
    the gate) Slurm, for the pair test."""

    exp: Expectations
    ctx: Context
    state: State
    level: str
    node: str
    gate: GateConf | None = None
    slurm: bool = False
    gpu_rows: list[list[str]] | None = None

    def gpus(self) -> list[list[str]]:
        """nvidia-smi's GPU_QUERY rows, asked once per burn-in ([] without nvidia-smi)."""
        if self.gpu_rows is None:
            self.gpu_rows = []
            if self.ctx.has("nvidia-smi"):
                result = self.ctx.run(
                    ["nvidia-smi", f"--query-gpu={GPU_QUERY}", "--format=csv,noheader,nounits"],
                    timeout=BURN_IN_SECONDS["nvidia-smi"],
                )
                if result.rc != 0:
                    raise CheckFailed(f"nvidia-smi --query-gpu failed: {result.first_line()}")
                rows = [[f.strip() for f in line.split(",")] for line in result.out.splitlines()]
                self.gpu_rows = [r for r in rows if len(r) == len(GPU_QUERY.split(","))]
        return self.gpu_rows


class CheckFailed(Exception):
    """A burn-in check found a fault (its message says what)."""


class CheckSkipped(Exception):
    """A burn-in check that cannot run here (its message says why)."""


def _health_outcome(name: str, run: BurnIn) -> str:
    """One of the health check's own checks, as a burn-in check."""
    failure = CHECKS[name](run.exp, run.ctx, run.state)
    if failure:
        raise CheckFailed(failure.saw if failure.check == name.replace("_", " ") else str(failure))
    if name in run.ctx.skipped:
        raise CheckSkipped(run.ctx.skipped[name])
    return run.ctx.seen.get(name, "passed")


def bi_gpu_count(run: BurnIn) -> str:
    if run.exp.gpus <= 0:
        found = f"{len(run.gpus())} GPU(s) found" if run.ctx.has("nvidia-smi") else "no nvidia-smi"
        raise CheckSkipped(f"no GPU count declared; {found}")
    return _health_outcome("gpu_count", run)


def _need_nvidia_smi(run: BurnIn) -> list[list[str]]:
    if not run.ctx.has("nvidia-smi"):
        raise CheckSkipped("no nvidia-smi")
    rows = run.gpus()
    if not rows:
        raise CheckSkipped("nvidia-smi lists no GPU")
    return rows


def bi_gpu_model(run: BurnIn) -> str:
    names = sorted({row[1] for row in _need_nvidia_smi(run)})
    wanted = run.exp.burn_in.gpu_model
    if wanted:
        wrong = [n for n in names if wanted.lower() not in n.lower()]
        if wrong:
            raise CheckFailed(f"{', '.join(wrong)} (declared: {wanted})")
        return ", ".join(names)
    if len(names) > 1:
        raise CheckFailed(f"GPUs of different models: {', '.join(names)}")
    raise CheckSkipped(f"no model declared; found {names[0]}")


def bi_driver(run: BurnIn) -> str:
    versions = sorted({row[3] for row in _need_nvidia_smi(run)})
    wanted = run.exp.burn_in.driver
    if not wanted:
        raise CheckSkipped(f"no driver version declared; found {', '.join(versions)}")
    if versions != [wanted]:
        raise CheckFailed(f"{', '.join(versions)} (declared: {wanted})")
    return wanted


def bi_ecc(run: BurnIn) -> str:
    return _health_outcome("ecc", run)


def bi_pcie(run: BurnIn) -> str:
    rows = _need_nvidia_smi(run)
    wanted = run.exp.burn_in.pcie_width
    narrow, unknown = [], []
    for index, _, _, _, current, widest in rows:
        if not current.isdigit():
            unknown.append(index)
            continue
        floor = wanted or (int(widest) if widest.isdigit() else int(current))
        if int(current) < floor:
            narrow.append(f"GPU {index} x{current} of x{floor}")
    if narrow:
        raise CheckFailed("; ".join(narrow))
    if len(unknown) == len(rows):
        raise CheckSkipped("the GPUs report no PCIe link width")
    widths = sorted({row[4] for row in rows if row[4].isdigit()})
    how = f"declared x{wanted}" if wanted else "each at its maximum"
    return f"x{'/x'.join(widths)} on {len(rows) - len(unknown)} GPU(s) ({how})"


def bi_nvlink(run: BurnIn) -> str:
    _need_nvidia_smi(run)
    result = run.ctx.run(["nvidia-smi", "nvlink", "--status"], timeout=BURN_IN_SECONDS["nvidia-smi"])
    if result.rc != 0:
        raise CheckFailed(f"nvidia-smi nvlink --status failed: {result.first_line()}")
    links = [line.strip() for line in result.out.splitlines() if line.strip().startswith("Link ")]
    inactive = [line for line in links if "inactive" in line.lower()]
    fabric = _fabric_problems(run)
    found = f"{len(links) - len(inactive)} of {len(links)} link(s) up" + (f"; {fabric}" if fabric else "")
    if not run.exp.burn_in.nvlink:
        raise CheckSkipped(f"NVLink not declared; {found if links else 'no NVLink on these GPUs'}")
    if not links:
        raise CheckFailed("no NVLink found on these GPUs")
    if inactive or fabric:
        raise CheckFailed(found)
    return found


def _fabric_problems(run: BurnIn) -> str:
    """The GPU fabric state (NVSwitch systems and NVL72, driver 550+): anything but Completed /
    Success is a problem; GPUs or drivers without one say so and are fine."""
    result = run.ctx.run(
        ["nvidia-smi", "--query-gpu=index,fabric.state,fabric.status", "--format=csv,noheader"],
        timeout=BURN_IN_SECONDS["nvidia-smi"],
    )
    if result.rc != 0:
        return ""  # a driver that knows no fabric fields
    problems = []
    for line in result.out.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != 3 or fields[1] in ("Completed", "[N/A]", "N/A", "[Not Supported]", "Not Supported"):
            continue
        problems.append(f"GPU {fields[0]} fabric {fields[1]} ({fields[2]})")
    return "; ".join(problems)


def bi_imex(run: BurnIn) -> str:
    if not run.exp.burn_in.imex:
        raise CheckSkipped("IMEX not declared for this node type")
    if not run.ctx.has("nvidia-imex-ctl"):
        raise CheckFailed("nvidia-imex-ctl not installed")
    result = run.ctx.run(["nvidia-imex-ctl", "-q"], timeout=BURN_IN_SECONDS["nvidia-imex-ctl"])
    if result.rc != 0 or "READY" not in result.out:
        raise CheckFailed(f"IMEX not ready: {result.first_line()}")
    return "READY"


def bi_infiniband(run: BurnIn) -> str:
    if not run.exp.infiniband:
        raise CheckSkipped("no InfiniBand ports declared")
    seen = _health_outcome("infiniband", run)
    wanted = run.exp.burn_in.ib_rate
    if not wanted:
        return seen
    slow = []
    for device, port in run.exp.infiniband:
        path = run.ctx.path(f"/sys/class/infiniband/{device}/ports/{port}/rate")
        try:
            text = path.read_text(encoding="utf-8").strip()  # e.g. "400 Gb/sec (4X NDR)"
            rate = float(text.split()[0])
        except (OSError, ValueError, IndexError):
            slow.append(f"{device} port {port} rate unreadable")
            continue
        if rate < wanted:
            slow.append(f"{device} port {port} at {rate:g} Gb/s")
    if slow:
        raise CheckFailed(f"{'; '.join(slow)} (declared {wanted} Gb/s)")
    return f"{seen}, each at {wanted} Gb/s"


def bi_mounts(run: BurnIn) -> str:
    if not run.exp.mounts:
        raise CheckSkipped("no mounts declared")
    return _health_outcome("mounts", run)


def bi_xid(run: BurnIn) -> str:
    if "xid" not in run.exp.checks or not run.exp.xid_fatal:
        raise CheckSkipped("the XID check is not enabled for this node type")
    _health_outcome("xid", run)
    return "no fatal XID this boot"


def bi_dcgm_diag(run: BurnIn) -> str:
    level = run.exp.burn_in.dcgm_diag.get(run.level, 0)
    if not level:
        raise CheckSkipped(f"no DCGM diagnostic at the {run.level} level")
    if not run.ctx.has("dcgmi"):
        raise CheckSkipped("no dcgmi (DCGM not installed)")
    failure = dcgm_diag(run.ctx, "dcgm_diag", level)
    if failure:
        raise CheckFailed(failure.saw)
    if "dcgm_diag" in run.ctx.skipped:
        raise CheckSkipped(run.ctx.skipped["dcgm_diag"])
    return run.ctx.seen.get("dcgm_diag", f"diag -r {level} passed")


def all_reduce_perf(ctx: Context) -> str | None:
    found = ctx.which("all_reduce_perf")
    if found:
        return found
    return next((p for p in ALL_REDUCE_PERF_PATHS if ctx.path(p).is_file()), None)


def busbw_outcome(result: Output, floor: float, where: str) -> str:
    """all_reduce_perf's verdict: it ran, no value out of bounds, the average bus bandwidth at
    least `floor` GB/s (0: only recorded)."""
    if result.rc != 0:
        raise CheckFailed(f"all_reduce_perf {where} exited {result.rc}: {result.first_line()}")
    wrong = re.search(r"#\s*Out of bounds values\s*:\s*(\d+)", result.out)
    if wrong and int(wrong.group(1)) > 0:
        raise CheckFailed(f"{wrong.group(1)} values out of bounds {where}")
    found = BUSBW_RE.search(result.out)
    if not found:
        raise CheckFailed(f"all_reduce_perf {where} printed no average bus bandwidth")
    busbw = float(found.group(1))
    if floor and busbw < floor:
        raise CheckFailed(f"bus bandwidth {busbw:g} GB/s {where} (floor {floor:g})")
    return f"bus bandwidth {busbw:g} GB/s {where}" + (
        f" (floor {floor:g})" if floor else " (no floor declared)"
    )


def bi_nccl(run: BurnIn) -> str:
    program = all_reduce_perf(run.ctx)
    if program is None:
        raise CheckSkipped("nccl-tests not installed (no all_reduce_perf)")
    gpus = run.exp.gpus or len(run.gpus())
    if gpus < 1:
        raise CheckSkipped("no GPU to run NCCL on")
    result = run.ctx.run(
        [program, "-b", "8M", "-e", "1G", "-f", "2", "-g", str(gpus)], timeout=BURN_IN_SECONDS["nccl"]
    )
    floor = run.exp.burn_in.nccl_busbw
    if gpus == 1 and floor:
        # nccl-tests scales all_reduce's bus bandwidth by 2(n-1)/n: 0 on one GPU, whatever the
        # GPU does (seen on an H200). The run is judged; a floor there cannot be met.
        busbw_outcome(result, 0.0, "on 1 GPU")  # a failed or wrong run fails as such
        raise CheckFailed(f"the run passed, but a floor of {floor:g} GB/s cannot be met on one GPU: "
                          "all_reduce's bus bandwidth is 0 there by definition (declare none)")  # fmt: skip
    return busbw_outcome(result, floor, f"across {gpus} GPU(s)")


def bi_nccl_pair(run: BurnIn) -> str:
    """all_reduce across this node and an idle node in service under the same leaf, as a job of
    root's in a reservation of the two (the gated node is resumed for it: its own reservation
    keeps every user job off it meanwhile)."""
    if not run.slurm or run.gate is None:
        raise CheckSkipped("the pair test runs only in the gate (it needs Slurm and a neighbour)")
    program = all_reduce_perf(run.ctx)
    if program is None or not run.ctx.has("srun"):
        raise CheckSkipped("nccl-tests or srun not installed")
    partner = idle_peer(run.ctx, run.node, run.gate.peers(run.node))
    if partner is None:
        raise CheckSkipped("no idle node in service under the same leaf switch")
    return pair_all_reduce(run, program, partner)


BURN_IN = {
    "gpu_count": bi_gpu_count,
    "gpu_model": bi_gpu_model,
    "driver": bi_driver,
    "ecc": bi_ecc,
    "pcie": bi_pcie,
    "nvlink": bi_nvlink,
    "imex": bi_imex,
    "infiniband": bi_infiniband,
    "mounts": bi_mounts,
    "xid": bi_xid,
    "dcgm_diag": bi_dcgm_diag,
    "nccl": bi_nccl,
    "nccl_pair": bi_nccl_pair,
}


class BurnInTimedOut(Exception):
    """The burn-in's time bound passed before its checks ended."""


def run_one(run: BurnIn, name: str) -> Outcome:
    started = time.monotonic()
    try:
        status, detail = "pass", BURN_IN[name](run)
    except CheckFailed as exc:
        status, detail = "fail", str(exc)
    except CheckSkipped as exc:
        status, detail = "skip", str(exc)
    except ToolTimeout as exc:
        status, detail = "fail", str(exc)
    except NoTime:
        raise BurnInTimedOut(name) from None
    return Outcome(name, status, detail, time.monotonic() - started)


def burn_in(run: BurnIn) -> tuple[str, list[Outcome]]:
    """Every check of the level, in order: ("pass" | "fail" | "timeout", the outcomes)."""
    outcomes: list[Outcome] = []
    for name in LEVEL_CHECKS[run.level]:
        try:
            if time.monotonic() > run.ctx.deadline - run.ctx.reserve:
                raise BurnInTimedOut(name)
            outcomes.append(run_one(run, name))
        except BurnInTimedOut:
            outcomes.append(Outcome(name, "fail", "burn-in timed out"))
            return "timeout", outcomes
    return ("fail" if any(o.status == "fail" for o in outcomes) else "pass"), outcomes


# --- Slurm -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NodeStatus:
    state: str  # as scontrol shows it, e.g. IDLE+DRAIN
    reason: str | None
    partitions: list[str] = field(default_factory=list)
    comment: str | None = None

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
    state, reason, partitions, comment = "", None, [], None
    for line in text.splitlines():
        stripped = line.strip()
        found = re.search(r"(?:^|\s)State=(\S+)", stripped)
        if found and not state:
            state = found.group(1)
        if stripped.startswith("Reason="):
            reason = REASON_SUFFIX_RE.sub("", stripped[len("Reason=") :])
        elif stripped.startswith("Comment="):
            comment = stripped[len("Comment=") :] or None
        elif stripped.startswith("Partitions="):
            partitions = [p for p in stripped[len("Partitions=") :].split(",") if p and p != "(null)"]
    return NodeStatus(state, reason, partitions, comment)


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


# --- The gate: reservations, drains and burn-ins of a node on its way back ----------------------
#
# A node in the gate is held twice: a maintenance reservation of its own (gpucluster_gate_<node>,
# root only, so no user job lands whatever its state: a reboot's nextstate=resume or a resume by
# hand lifts a drain, not a reservation) and a drain whose reason starts `[gate]` and says why:
#   [gate] <way back>/<level> waiting: ...   burn-in: ...   out: <check>: <what it saw>
# A burn-in runs only on an idle node, in one of its partitions' burn-in slots (reservations
# gpucluster_burnin_<partition>_<k>: creating one is Slurm's own atomic test-and-set, and each
# expires with its burn-in's time bound), as a process of its own beside slurmd. Only a pass lifts
# the hold; a drain someone else set is never touched.

GATE_PREFIX = "[gate]"
# Drain reasons gpucluster's procedures set (slurm_upgrade's batches, a move's drain): the gate
# takes these over, as it does the health check's.
GPUCLUSTER_PREFIX = "gpucluster:"
# Slurm's own reasons of `scontrol reboot` (ASAP and the default): the gate takes them over when
# its RebootProgram runs.
REBOOT_REASONS = ("Reboot ASAP", "reboot requested", "reboot issued")
GATE_RESERVATION = "gpucluster_gate_{node}"
SLOT_RESERVATION = "gpucluster_burnin_{partition}_{index}"
PAIR_RESERVATION = "gpucluster_pair_{node}"
# Past its time bound a burn-in gets this long to end before it is stopped and counted as timed out.
GRACE = 60.0
# A record of the last burn-in in the node's Comment (the controllers copy it, --keep-records).
RECORD_MARK = "gate-record "
# Node flags under which no burn-in starts (the node is busy, rebooting or not answering).
NOT_READY = ("COMPLETING", "NOT_RESPONDING", "REBOOT_ISSUED", "REBOOT_REQUESTED", "POWERING_UP",
             "POWERED_DOWN", "POWERING_DOWN", "FAIL")  # fmt: skip


def owned(reason: str | None, takeover: tuple[str, ...] = ()) -> bool:
    """Whether a drain reason is gpucluster's (the health check's, the gate's, a procedure's)."""
    return reason is not None and reason.startswith((PREFIX, GATE_PREFIX, GPUCLUSTER_PREFIX, *takeover))


def gate_reason(gate: dict[str, Any], detail: str) -> str:
    reason = f"{GATE_PREFIX} {gate['trigger']}/{gate['level']} {gate['phase']}: {detail}"
    reason = re.sub(r"\s+", " ", reason)
    return reason if len(reason) <= MAX_REASON else reason[: MAX_REASON - 3] + "..."


def scontrol(ctx: Context, *args: str) -> Output:
    return ctx.run(["scontrol", *args], final=True)


def reservation_exists(ctx: Context, name: str) -> bool:
    result = scontrol(ctx, "show", "reservation", name)
    if result.rc == 0 and f"ReservationName={name}" in result.out:
        return True
    if "not found" in (result.out + result.err).lower() or "No reservations" in result.out:
        return False
    raise RuntimeError(f"scontrol show reservation {name}: {result.first_line()}")


def create_reservation(ctx: Context, name: str, nodes: str, minutes: int | None, ignore_jobs: bool) -> bool:
    """A root-only maintenance reservation; False when one of that name exists (another node
    took that slot first)."""
    flags = "MAINT,IGNORE_JOBS" if ignore_jobs else "MAINT"
    duration = "UNLIMITED" if minutes is None else str(minutes)
    result = scontrol(ctx, "create", "reservation", f"ReservationName={name}", f"Nodes={nodes}",
                      "StartTime=now", f"Duration={duration}", "Users=root", f"Flags={flags}")  # fmt: skip
    if result.rc == 0:
        return True
    if "duplicate" in (result.out + result.err).lower():
        return False
    raise RuntimeError(f"scontrol create reservation {name}: {result.first_line()}")


def delete_reservation(ctx: Context, name: str) -> None:
    result = scontrol(ctx, "delete", f"ReservationName={name}")
    if result.rc != 0 and "not found" not in (result.out + result.err).lower():
        raise RuntimeError(f"scontrol delete reservation {name}: {result.first_line()}")


def update_node(ctx: Context, node: str, *fields: str) -> None:
    result = scontrol(ctx, "update", f"NodeName={node}", *fields)
    if result.rc != 0:
        raise RuntimeError(
            f"scontrol update NodeName={node} {' '.join(fields)[:40]} failed: {result.first_line()}"
        )


def new_gate(gconf: GateConf, trigger: str) -> dict[str, Any] | None:
    level = gconf.level(trigger)
    if level == "none":
        return None
    return {"trigger": trigger, "level": level, "phase": "waiting", "attempts": 0, "entered": round(time.time()),
            "applied": False, "detail": "for a burn-in"}  # fmt: skip


def enter(gconf: GateConf, state: State, trigger: str) -> str:
    """Put the node in the gate for `trigger` (its Slurm side follows in `hold`). A node already
    in the gate keeps its way back and takes the deeper level; a node out after failing stays out
    unless an administrator repaired it."""
    fresh = new_gate(gconf, trigger)
    if fresh is None:
        return f"no gate after {trigger} (its level is none)"
    gate = state.gate
    if gate is None:
        state.gate = fresh
        return f"in the gate: {trigger}, {fresh['level']} burn-in"
    if gate["phase"] == "out" and trigger != "repaired":
        return f"stays out ({gate.get('detail', '')}): only `repaired` brings it back"
    if trigger == "repaired":
        state.gate = {**fresh, "applied": gate.get("applied", False)}
        return f"in the gate again: repaired, {fresh['level']} burn-in"
    if LEVELS.index(fresh["level"]) > LEVELS.index(gate["level"]):
        gate["level"] = fresh["level"]
    return f"already in the gate ({gate['trigger']}); {gate['level']} burn-in"


def hold(
    ctx: Context, node: str, gate: dict[str, Any], status: NodeStatus, takeover: tuple[str, ...] = ()
) -> str:
    """The node's reservation, and its drain with the gate's reason (a drain someone else set
    stays as it is). Returns what it did."""
    done = [reserve(ctx, node, gate), drain_for(ctx, node, gate, status, takeover)]
    return "; ".join(d for d in done if d) or "held"


def reserve(ctx: Context, node: str, gate: dict[str, Any]) -> str:
    """The node's own maintenance reservation: no user job lands on it whatever its state."""
    name = GATE_RESERVATION.format(node=node)
    gate["applied"] = True
    if reservation_exists(ctx, name):
        return ""
    create_reservation(ctx, name, node, None, ignore_jobs=True)
    return f"reservation {name} created"


def drain_for(
    ctx: Context, node: str, gate: dict[str, Any], status: NodeStatus, takeover: tuple[str, ...] = ()
) -> str:
    """The drain with the gate's reason, unless someone else's drain is on."""
    reason = gate_reason(gate, gate.get("detail", ""))
    if status.drained and not owned(status.reason, takeover):
        return f"drained by someone else ({status.reason}): left as it is"
    if status.drained and status.reason == reason:
        return ""
    update_node(ctx, node, "State=DRAIN", f"Reason={reason}")
    return f"drained: {reason}"


def release(ctx: Context, node: str, gate: dict[str, Any], status: NodeStatus) -> str:
    """A pass: the slots and the node's reservation go, and the drain if it is the gate's."""
    for slot in gate.get("slots", []):
        delete_reservation(ctx, slot)
    delete_reservation(ctx, GATE_RESERVATION.format(node=node))
    if status.drained and owned(status.reason):
        update_node(ctx, node, "State=RESUME")
        return "released: reservation deleted, resumed"
    if status.drained:
        return f"released: reservation deleted; drained by someone else ({status.reason}): left drained"
    return "released: reservation deleted"


def ready_for_burn_in(status: NodeStatus) -> str | None:
    """Why no burn-in can start on the node now (None: it can)."""
    base, *flags = status.state.rstrip("*").split("+")
    if status.state.endswith("*"):
        return "the node does not respond"
    if base != "IDLE":
        return f"the node is {status.state}: its jobs end first"
    busy = [f for f in flags if f in NOT_READY]
    return f"the node is {status.state}" if busy else None


def take_slots(
    ctx: Context, node: str, gconf: GateConf, partitions: list[str], minutes: int
) -> list[str] | None:
    """A burn-in slot in each of the node's partitions, or None (and none held) when one is full."""
    held: list[str] = []
    for partition in sorted(partitions) or ["(none)"]:
        limit = max(1, gconf.slots.get(partition, 1))
        for index in range(1, limit + 1):
            name = SLOT_RESERVATION.format(partition=re.sub(r"[^A-Za-z0-9_.-]", "_", partition), index=index)
            if create_reservation(ctx, name, node, minutes, ignore_jobs=True):
                held.append(name)
                break
        else:
            for name in held:
                delete_reservation(ctx, name)
            return None
    return held


def spawn_burn_in(ctx: Context, args: argparse.Namespace, node: str) -> int:
    """The burn-in as a process of its own (a session of its own: slurmd ends the health check's
    process group, not this), its output in the state directory."""
    argv = [sys.executable, str(Path(__file__).resolve()), "--burn-in-run", "--node", node,
            "--config", str(args.config), "--state-dir", str(ctx.state_dir), "--root", str(ctx.root)]  # fmt: skip
    if args.kmsg:
        argv += ["--kmsg", str(args.kmsg)]
    with open(ctx.state_dir / "burn-in.log", "a", encoding="utf-8") as log:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                env=ctx.env, start_new_session=True)  # fmt: skip
    return proc.pid


def burn_in_alive(gate: dict[str, Any], state_dir: Path) -> bool:
    """Whether the gate's burn-in still runs: its pid is a burn-in of this state directory (a pid
    reused by another node's burn-in, or by anything else, is not)."""
    pid = gate.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"--burn-in-run" in argv and os.fsencode(str(state_dir)) in argv


def stop_burn_in(gate: dict[str, Any], state_dir: Path) -> None:
    pid = gate.get("pid")
    if isinstance(pid, int) and burn_in_alive(gate, state_dir):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)


def admit(ctx: Context, args: argparse.Namespace, node: str, gconf: GateConf, gate: dict[str, Any],
          status: NodeStatus) -> str:  # fmt: skip
    """Start the burn-in where the node is ready and a slot of each of its partitions is free."""
    why = ready_for_burn_in(status)
    if why:
        gate["detail"] = why
        return f"waiting: {why}"
    limit = gconf.time_limit.get(gate["level"], 900)
    slots = take_slots(ctx, node, gconf, status.partitions, limit // 60 + 2)
    if slots is None:
        gate["detail"] = f"for a burn-in slot of {', '.join(status.partitions)}"
        return f"waiting {gate['detail']}"
    now = time.time()
    gate.update(phase="burn-in", slots=slots, started=round(now), deadline=round(now + limit),
                detail=f"{gate['level']} running since {time.strftime('%H:%M:%S', time.localtime(now))}")  # fmt: skip
    gate["pid"] = spawn_burn_in(ctx, args, node)
    return f"burn-in started ({gate['level']}, pid {gate['pid']}, bound {limit} s)"


def watch(ctx: Context, node: str, gconf: GateConf, state: State, status: NodeStatus) -> str:
    """A burn-in under way: past its bound (and a grace) it is stopped and counted as timed out;
    a burn-in that ended without a verdict (killed, the node rebooted) counts as a failed one."""
    gate = state.gate
    assert gate is not None
    alive = burn_in_alive(gate, ctx.state_dir)
    if alive and time.time() < gate.get("deadline", 0) + GRACE:
        return f"burn-in running ({gate['detail']})"
    if alive:
        stop_burn_in(gate, ctx.state_dir)
        record = failed_record(node, gate, "timeout", "burn-in timed out")
    else:
        record = failed_record(node, gate, "fail", "burn-in ended without a result")
    return conclude(ctx, node, gconf, state, status, record)


def failed_record(node: str, gate: dict[str, Any], result: str, detail: str) -> dict[str, Any]:
    started = gate.get("started", time.time())
    return burn_in_record(node, gate, result, [Outcome("burn_in", "fail", detail)], started)


def burn_in_record(node: str, gate: dict[str, Any], result: str, outcomes: list[Outcome],
                   started: float) -> dict[str, Any]:  # fmt: skip
    failed = next((o for o in outcomes if o.status == "fail"), None)
    return {
        "node": node,
        "trigger": gate["trigger"],
        "level": gate["level"],
        "attempt": gate.get("attempts", 0) + 1,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
        "seconds": round(time.time() - started, 1),
        "result": result,
        "failed": None if failed is None else ("burn-in timed out" if result == "timeout" else str(failed)),
        "checks": [o.as_dict() for o in outcomes],
    }


def conclude(ctx: Context, node: str, gconf: GateConf, state: State, status: NodeStatus,
             record: dict[str, Any]) -> str:  # fmt: skip
    """A burn-in's verdict applied: a pass releases the node; a failure sends it back to wait for
    another try, or (the last try, or timed out) keeps it out; every burn-in leaves its record."""
    gate = state.gate
    assert gate is not None
    keep_record(ctx, node, gconf, record, status)
    for slot in gate.pop("slots", []):
        delete_reservation(ctx, slot)
    gate.pop("pid", None)
    if record["result"] == "pass":
        done = release(ctx, node, gate, status)
        state.gate = None
        state.counts["pass"] = state.counts.get("pass", 0) + 1
        return f"burn-in passed; {done}"
    gate["attempts"] = gate.get("attempts", 0) + 1
    state.counts[record["result"]] = state.counts.get(record["result"], 0) + 1
    if record["result"] == "timeout" or gate["attempts"] >= gconf.attempts:
        tries = "" if record["result"] == "timeout" else f" (failed {gate['attempts']} burn-in(s))"
        gate.update(phase="out", detail=f"{record['failed']}{tries}")
    else:
        gate.update(
            phase="waiting", detail=f"{record['failed']} (try {gate['attempts']} of {gconf.attempts} failed)"
        )
    done = hold(ctx, node, gate, status)
    return f"burn-in {record['result']}: {record['failed']}; {done}"


def keep_record(ctx: Context, node: str, gconf: GateConf, record: dict[str, Any], status: NodeStatus) -> None:
    """The record in the node's records directory, and in its Slurm Comment (unless someone else
    wrote that) for the controllers to keep."""
    folder = ctx.state_dir / "records"
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%S", time.localtime())
    (folder / f"{stamp}-{node}.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    if status.comment and not status.comment.startswith(RECORD_MARK):
        ctx.notes.append(f"record not put in the node's Comment (someone else's: {status.comment[:40]})")
        return
    compact = {**record, "checks": [[c["check"], c["status"], c["detail"]] for c in record["checks"]]}
    update_node(ctx, node, f"Comment={RECORD_MARK}{json.dumps(compact, separators=(',', ':'))}")


def idle_peer(ctx: Context, node: str, peers: tuple[str, ...]) -> str | None:
    """The first node under the same leaf that is in service and idle (no job, no drain, in no
    reservation of the gate): the known-good half of the pair test."""
    for peer in peers:
        try:
            status = node_status(ctx, peer)
        except (RuntimeError, ToolTimeout, NoTime):
            continue
        if status.state == "IDLE" or status.state == "IDLE+CLOUD":
            return peer
    return None


def pair_all_reduce(run: BurnIn, program: str, partner: str) -> str:
    """all_reduce_perf over the pair as root's job in a reservation of the two nodes. The gated
    node is resumed for it (its own reservation keeps users off) and drained again after."""
    ctx, node = run.ctx, run.node
    name = PAIR_RESERVATION.format(node=node)
    minutes = int(BURN_IN_SECONDS["nccl_pair"] // 60) + 2
    if not create_reservation(ctx, name, f"{node},{partner}", minutes, ignore_jobs=False):
        raise CheckSkipped(f"the pair reservation {name} exists already")
    status = node_status(ctx, node)
    try:
        if status.drained and owned(status.reason):
            update_node(ctx, node, "State=RESUME")
        gpus = str(run.exp.gpus or len(run.gpus()) or 1)
        result = ctx.run(
            ["srun", f"--reservation={name}", "--nodes=2", f"--nodelist={node},{partner}", "--exclusive",
             f"--ntasks-per-node={gpus}", f"--gpus-per-node={gpus}", f"--time={minutes}",
             "--job-name=gpucluster-burn-in", program, "-b", "8M", "-e", "1G", "-f", "2", "-g", "1"],
            timeout=BURN_IN_SECONDS["nccl_pair"],
        )  # fmt: skip
    finally:
        if status.drained and owned(status.reason) and status.reason:
            update_node(ctx, node, "State=DRAIN", f"Reason={status.reason}")
        delete_reservation(ctx, name)
    return busbw_outcome(result, run.exp.burn_in.nccl_pair_busbw, f"with {partner}")


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
    gate = parser.add_argument_group("the return-to-service gate (healthcheck.conf's [gpucluster gate])")
    mode = gate.add_mutually_exclusive_group()
    mode.add_argument("--level", choices=LEVELS,
                      help="run a burn-in of this level and print it; changes nothing (no Slurm call, no GPU setting)")  # fmt: skip
    mode.add_argument("--enter-gate", choices=TRIGGERS, metavar="WAY_BACK",
                      help=f"put this node in the gate ({', '.join(TRIGGERS)})")  # fmt: skip
    mode.add_argument("--leave-gate", action="store_true",
                      help="take this node out of the gate without a burn-in (an administrator's decision)")  # fmt: skip
    mode.add_argument("--reboot", action="store_true", default=Path(sys.argv[0]).name == REBOOT_PROGRAM_NAME,
                      help=f"Slurm's RebootProgram: into the gate, then the configured reboot (default when run as {REBOOT_PROGRAM_NAME})")  # fmt: skip
    mode.add_argument("--keep-records", action="store_true",
                      help="on a controller: keep the nodes' burn-in records and write the gate's metrics")  # fmt: skip
    mode.add_argument("--kubernetes-gate", action="store_true",
                      help="in a pod of the gate's DaemonSet: keep this Kubernetes node's gate (its taint)")  # fmt: skip
    mode.add_argument("--burn-in-run", action="store_true", help=argparse.SUPPRESS)
    gate.add_argument("--pending", action="store_true",
                      help="with --enter-gate: record it on the node only (slurmctld does not know the node yet)")  # fmt: skip
    gate.add_argument("--json", action="store_true", help="with --level: the burn-in's record as JSON")
    gate.add_argument(
        "--interval", type=float, default=60.0, help="with --kubernetes-gate: seconds between looks"
    )
    gate.add_argument("--once", action="store_true", help="with --kubernetes-gate: one look, then exit")
    gate.add_argument("--api", help="with --kubernetes-gate: the API server's URL (default: the pod's own)")
    gate.add_argument(
        "--namespace",
        default="gpucluster-gate",
        help="with --kubernetes-gate and --api: the Leases' namespace",
    )
    gate.add_argument(
        "--gpus", type=int, help="with --level: the GPU count to expect (default healthcheck.conf's)"
    )
    gate.add_argument("--gpu-model", help="with --level: text every GPU's name must contain")
    gate.add_argument("--driver", help="with --level: the driver version every GPU must report")
    gate.add_argument(
        "--pcie-width", type=int, help="with --level: the PCIe link width every GPU must run at"
    )
    gate.add_argument(
        "--nccl-busbw", type=float, help="with --level: NCCL all_reduce bus bandwidth floor, GB/s"
    )
    return parser.parse_args(argv)


REBOOT_PROGRAM_NAME = "gpucluster-reboot"
# --enter-gate's exit code where the way back's level is none (the caller resumes the node itself).
NO_GATE = 3


def node_name(args: argparse.Namespace) -> str:
    """--node, else what Slurm says: SLURMD_NODENAME for health checks and prologs,
    SLURM_NODE_NAME for RebootProgram (26.05; older releases set none), else the short hostname."""
    return (
        args.node
        or os.environ.get("SLURMD_NODENAME")
        or os.environ.get("SLURM_NODE_NAME")
        or socket.gethostname().split(".")[0]
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    env = dict(os.environ)
    env.setdefault("PATH", DEFAULT_PATH)
    env["SLURM_TIME_FORMAT"] = "standard"  # the " [user@time]" suffix parse_show_node strips
    node = node_name(args)
    if args.level:
        return standalone_burn_in(args, env, node)
    if args.keep_records:
        return keep_records(args, env)
    if args.kubernetes_gate:
        return kubernetes_gate(args, env, node)
    try:
        exp = load_expectations(args.config, node)
        gconf = load_gate(args.config)
    except ConfigError as exc:
        print(f"gpucluster-healthcheck: {exc}", file=sys.stderr)
        if args.reboot:
            return reboot_anyway(args, None)
        # A broken deployment is not a broken GPU: as the Prolog it must not fail every job (and
        # drain every node); the periodic runs report it in slurmd's log instead.
        return 0 if args.prolog and not args.check_config else 2
    if args.check_config:
        gated = f"; gate: {' '.join(f'{t}:{gconf.level(t)}' for t in TRIGGERS)}" if gconf else ""
        print(f"{node}: section [{exp.section}], checks: {' '.join(exp.checks) or 'none'}{gated}")
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
    if args.enter_gate or args.leave_gate or args.reboot or args.burn_in_run:
        if gconf is None:
            print(
                f"{node}: {args.config} has no [{GATE_SECTION}] section: the inventory sets no cluster.gate"
            )
            return reboot_anyway(args, None) if args.reboot else 2
        return gate_command(args, exp, gconf, ctx, node)
    return health_run(exp, ctx, node, args, gconf)


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


@contextlib.contextmanager
def locked(state_dir: Path, wait: float = 0.0) -> Iterator[bool]:
    """The state directory's lock: True once held, False where another run holds it (after
    waiting up to `wait` seconds)."""
    state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    with open(state_dir / "lock", "w", encoding="utf-8") as lock:
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    yield False
                    return
                time.sleep(0.5)
        yield True


def current_boot(ctx: Context) -> str:
    try:
        return ctx.path("/proc/sys/kernel/random/boot_id").read_text(encoding="utf-8").strip()
    except OSError:
        return ""


def health_run(
    exp: Expectations, ctx: Context, node: str, args: argparse.Namespace, gconf: GateConf | None = None
) -> int:
    with locked(ctx.state_dir) as held:
        if not held:
            # An interval shorter than a slow run: the run in progress decides.
            print(f"{node}: a previous run is still going; nothing to do")
            return 0
        state_file = ctx.state_dir / "state.json"
        state = State.load(state_file)
        if args.clear_xid:
            state.xids = []
        boot = current_boot(ctx)
        rebooted = bool(state.last_boot) and bool(boot) and boot != state.last_boot
        skip, _ = heavy_skipped(exp, ctx, node)
        if state.gate and state.gate.get("phase") == "burn-in":
            skip = tuple(CHECK_ORDER)  # the burn-in runs them, and more, meanwhile
            ctx.notes.append("checks: left to the burn-in under way")
        failures = run_checks(exp, ctx, state, prolog=False, skip=skip)
        outcome = 1 if failures else 0
        try:
            status = node_status(ctx, node)
            if gconf is not None:
                action, done = gate_run(ctx, args, node, gconf, state, status, failures, rebooted)
            else:
                action = decide(failures, status)
                done = ""
            if not done and args.dry_run:
                done = f"dry run, would do: {action.kind} {action.reason}".rstrip()
            elif not done:
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
            state.last_boot = boot or state.last_boot
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


def gate_run(ctx: Context, args: argparse.Namespace, node: str, gconf: GateConf, state: State,
             status: NodeStatus, failures: list[Failure], rebooted: bool) -> tuple[Action, str]:  # fmt: skip
    """A periodic run where the inventory has a gate: a health failure outside the gate drains
    as ever; a node the health check drained, healthy again, enters the gate instead of being
    resumed; a reboot enters it; a node in the gate moves on (held, admitted, watched) whatever
    the health checks find (its burn-in runs them again and counts their failures)."""
    if state.gate is None and rebooted:
        ctx.notes.append(f"gate: the node rebooted ({enter(gconf, state, 'reboot')})")
    if state.gate is None:
        action = decide(failures, status)
        if action.kind != "resume":
            return action, ""
        ctx.notes.append(f"gate: {enter(gconf, state, 'health')}")
        if state.gate is None:  # the health check's way back skips the gate
            return action, ""
    gate = state.gate
    assert gate is not None
    if args.dry_run:
        return Action(
            "none"
        ), f"dry run: in the gate ({gate['trigger']}/{gate['level']} {gate['phase']}), no change"
    if gate["phase"] == "burn-in":
        return Action("none"), watch(ctx, node, gconf, state, status)
    if gate["phase"] == "out":
        return Action("none"), f"gate: {hold(ctx, node, gate, status)}"
    # A node in the gate whose health checks fail is burnt in all the same: the burn-in runs those
    # checks too, and its failures count towards the node staying out.
    if status.drained and not owned(status.reason):
        return Action("none"), f"gate: {hold(ctx, node, gate, status)}; no burn-in under someone else's drain"
    # The reservation before the burn-in, the reason after (it says how the admission went).
    done = [reserve(ctx, node, gate), admit(ctx, args, node, gconf, gate, status)]
    done.append(drain_for(ctx, node, gate, status))
    return Action("none"), "gate: " + "; ".join(d for d in done if d)


def gate_command(
    args: argparse.Namespace, exp: Expectations, gconf: GateConf, ctx: Context, node: str
) -> int:
    """--enter-gate, --leave-gate, --reboot (Slurm's RebootProgram) and the detached burn-in."""
    if args.burn_in_run:
        return burn_in_run(args, exp, gconf, ctx, node)
    if args.enter_gate and args.pending:
        return enter_pending(args, gconf, ctx, node)
    ctx.deadline = time.monotonic() + 60
    with locked(ctx.state_dir, wait=30) as held:
        if not held:
            print(f"{node}: another run holds {ctx.state_dir}/lock; try again")
            return reboot_anyway(args, gconf) if args.reboot else 1
        state_file = ctx.state_dir / "state.json"
        state = State.load(state_file)
        try:
            if args.leave_gate:
                done = leave(ctx, node, state)
            else:
                trigger = "reboot" if args.reboot else args.enter_gate
                done = enter(gconf, state, trigger)
                if state.gate is not None:
                    takeover = REBOOT_REASONS if args.reboot else ()
                    done += "; " + hold(ctx, node, state.gate, node_status(ctx, node), takeover)
            # Leaving succeeds with no gate left; entering says by NO_GATE that there is none.
            code = 0 if args.leave_gate or state.gate is not None else NO_GATE
        except (RuntimeError, ToolTimeout, NoTime) as exc:
            done, code = f"Slurm not updated ({exc}); the next health check run applies it", 1
        state.save(state_file)
    print(f"{node}: {done}")
    return reboot_anyway(args, gconf) if args.reboot else code


def enter_pending(args: argparse.Namespace, gconf: GateConf, ctx: Context, node: str) -> int:
    """The gate recorded on the node only, its Slurm side left to the next health check run: for
    a node slurmctld does not know yet (new to the running cluster, or moved back from
    Kubernetes), which slurmd's first run holds before it registers."""
    with locked(ctx.state_dir, wait=30) as held:
        if not held:
            print(f"{node}: another run holds {ctx.state_dir}/lock; try again")
            return 1
        state_file = ctx.state_dir / "state.json"
        state = State.load(state_file)
        done = enter(gconf, state, args.enter_gate)
        state.save(state_file)
    print(f"{node}: {done} (held from slurmd's first health check run on)")
    return 0 if state.gate is not None else NO_GATE


def leave(ctx: Context, node: str, state: State) -> str:
    gate = state.gate or {}
    stop_burn_in(gate, ctx.state_dir)
    for slot in gate.get("slots", []):
        delete_reservation(ctx, slot)
    done = release(ctx, node, gate, node_status(ctx, node))
    state.gate = None
    return f"out of the gate without a burn-in; {done}"


def reboot_anyway(args: argparse.Namespace, gconf: GateConf | None) -> int:
    """RebootProgram reboots whatever happened to the gate: the node's own state holds the gate
    until its Slurm side is applied after the boot."""
    if not args.reboot:
        return 2
    command = list(gconf.reboot_command if gconf else GateConf.reboot_command)
    sys.stdout.flush()
    try:
        os.execv(command[0], command)
    except OSError as exc:
        print(f"gpucluster-reboot: {' '.join(command)}: {exc.strerror}", file=sys.stderr)
    return 1


def burn_in_run(args: argparse.Namespace, exp: Expectations, gconf: GateConf, ctx: Context, node: str) -> int:
    """The detached burn-in the health check started: its checks, then its verdict applied."""
    state_file = ctx.state_dir / "state.json"
    # The run that started this one saves the gate (its phase, this pid) under the state lock after
    # starting it: read once that run lets go. Read at once, a loaded machine showed the state of
    # before, "nothing to do", and the gate left waiting out its bound.
    with locked(ctx.state_dir, wait=90):
        snapshot = State.load(state_file)
    gate = snapshot.gate
    if gate is None or gate.get("phase") != "burn-in":
        print(f"{node}: not in burn-in: nothing to do")
        return 0
    started = float(gate.get("started", time.time()))
    ctx.deadline = time.monotonic() + float(gate.get("deadline", started + 900)) - time.time()
    ctx.reserve = SCONTROL_RESERVE
    result, outcomes = burn_in(BurnIn(exp, ctx, snapshot, gate["level"], node, gconf, slurm=True))
    record = burn_in_record(node, gate, result, outcomes, started)
    ctx.deadline = time.monotonic() + 120  # time for the verdict's scontrol calls
    with locked(ctx.state_dir, wait=90) as held:
        state = State.load(state_file)
        if not held or state.gate is None or state.gate.get("pid") != os.getpid():
            print(f"{node}: the gate moved on meanwhile; this burn-in's result is dropped")
            return 1
        try:
            done = conclude(ctx, node, gconf, state, node_status(ctx, node), record)
        except (RuntimeError, ToolTimeout, NoTime) as exc:
            done = f"Slurm not updated ({exc}); the next health check run retries"
            state.gate["phase"], state.gate["pid"] = "burn-in", -1  # a dead pid: watch() concludes
            state.save(state_file)
            print(f"{node}: burn-in {result}; {done}")
            return 1
        state.save(state_file)
    print(f"{node}: {done}")
    return 0 if result == "pass" else 1


def standalone_burn_in(args: argparse.Namespace, env: dict[str, str], node: str) -> int:
    """`--level L [--json]`: a burn-in on this host as it is, with the node's section of
    healthcheck.conf where there is one (else what the options declare). Read-only: no Slurm call,
    no GPU setting changed, the health check's state left as it is."""
    try:
        exp = load_expectations(args.config, node)
    except ConfigError:
        exp = Expectations(section="(none)", checks=("gpu_count", "ecc", "xid"), xid_fatal=frozenset())
    declared = {k: v for k, v in (("gpu_model", args.gpu_model), ("driver", args.driver),
                ("pcie_width", args.pcie_width), ("nccl_busbw", args.nccl_busbw)) if v is not None}  # fmt: skip
    exp = replace(exp, gpus=args.gpus if args.gpus is not None else exp.gpus,
                  burn_in=replace(exp.burn_in, **declared))  # fmt: skip
    limits = {"quick": 900, "standard": 3600, "deep": 14400}
    ctx = Context(root=args.root, kmsg=args.kmsg or args.root / "dev" / "kmsg", state_dir=args.state_dir,
                  deadline=time.monotonic() + limits[args.level], env=env, reserve=0)  # fmt: skip
    started = time.time()
    snapshot = State.load(args.state_dir / "state.json")
    result, outcomes = burn_in(BurnIn(exp, ctx, snapshot, args.level, node))
    record = burn_in_record(node, {"trigger": "by hand", "level": args.level}, result, outcomes, started)
    record["section"] = exp.section
    if args.json:
        print(json.dumps(record, indent=1))
    else:
        print(f"{node}: {args.level} burn-in ({exp.section}): {result} in {record['seconds']} s")
        for outcome in outcomes:
            print(f"  {outcome.status:4}  {outcome.check:10} {outcome.detail}")
    return 0 if result == "pass" else 1


# --- On the controllers: the burn-ins' records and the gate's metrics ---------------------------

METRICS_FILE = "gpucluster_gate.prom"
GATE_REASON_RE = re.compile(r"^\[gate\] (\w+)/(\w+) (waiting|burn-in|out): ?(.*)$")


def show_blocks(text: str) -> list[str]:
    """`scontrol show node|reservation` of everything: one block per entity."""
    return [block for block in re.split(r"\n\s*\n", text) if block.strip()]


def keep_records(args: argparse.Namespace, env: dict[str, str]) -> int:
    """A controller's timer: every node's last burn-in record (its Comment) appended to
    records.jsonl when new, and the gate's metrics for node-exporter's textfile collector."""
    try:
        gconf = load_gate(args.config)
    except ConfigError as exc:
        print(f"gpucluster-healthcheck: {exc}", file=sys.stderr)
        return 2
    if gconf is None:
        print(f"{args.config} has no [{GATE_SECTION}] section: nothing to keep")
        return 0
    ctx = Context(root=args.root, kmsg=Path("/dev/null"), state_dir=args.state_dir,
                  deadline=time.monotonic() + 40, env=env, reserve=0)  # fmt: skip
    nodes = scontrol(ctx, "show", "node")
    reservations = scontrol(ctx, "show", "reservation")
    if nodes.rc != 0:
        print(f"scontrol show node: {nodes.first_line()}", file=sys.stderr)
        return 1
    statuses = {}
    for block in show_blocks(nodes.out):
        name = re.search(r"NodeName=(\S+)", block)
        if name:
            statuses[name.group(1)] = parse_show_node(block)
    folder = Path(gconf.records_dir)
    folder.mkdir(mode=0o755, parents=True, exist_ok=True)
    records = read_records(folder / "records.jsonl")
    new = [r for r in comment_records(statuses) if record_key(r) not in {record_key(k) for k in records}]
    if new:
        with open(folder / "records.jsonl", "a", encoding="utf-8") as handle:
            for record in new:
                handle.write(json.dumps(record, sort_keys=True) + "\n")
        records += new
    entered = reservation_starts(reservations.out if reservations.rc == 0 else "")
    text = gate_metrics(statuses, entered, records)
    if gconf.metrics_dir and Path(gconf.metrics_dir).is_dir():
        write_textfile(Path(gconf.metrics_dir) / METRICS_FILE, text)
    print(f"{len(new)} new record(s), {len(records)} in {folder / 'records.jsonl'}")
    return 0


def read_records(path: Path) -> list[dict[str, Any]]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    records = []
    for line in lines:
        with contextlib.suppress(ValueError):
            records.append(json.loads(line))
    return records


def record_key(record: dict[str, Any]) -> tuple[str, str, int]:
    return (str(record.get("node")), str(record.get("started")), int(record.get("attempt", 0)))


def comment_records(statuses: dict[str, NodeStatus]) -> list[dict[str, Any]]:
    """The records the nodes left in their Comment, with their checks as objects again."""
    found = []
    for status in statuses.values():
        if not status.comment or not status.comment.startswith(RECORD_MARK):
            continue
        try:
            record = json.loads(status.comment[len(RECORD_MARK) :])
            record["checks"] = [
                {"check": c, "status": s, "detail": d} for c, s, d in record.get("checks", [])
            ]
        except (ValueError, TypeError):
            continue
        found.append(record)
    return found


def reservation_starts(text: str) -> dict[str, float]:
    """node -> when its gate reservation started (the time it entered the gate)."""
    starts = {}
    for block in show_blocks(text):
        name = re.search(r"ReservationName=gpucluster_gate_(\S+)", block)
        start = re.search(r"StartTime=(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)", block)
        if name and start:
            starts[name.group(1)] = time.mktime(time.strptime(start.group(1), "%Y-%m-%dT%H:%M:%S"))
    return starts


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ")


def sample(name: str, value: float | int, **labels: str) -> str:
    """One line of Prometheus' text format (no braces written as such: the program also travels
    inside a Helm chart's ConfigMap, where a pair of braces would be a template)."""
    inner = ",".join(f'{key}="{_label(text)}"' for key, text in labels.items())
    return f"{name}{chr(123)}{inner}{chr(125)} {value}" if inner else f"{name} {value}"


def gate_metrics(
    statuses: dict[str, NodeStatus], entered: dict[str, float], records: list[dict[str, Any]]
) -> str:
    """The gate's metrics in Prometheus' text format."""
    now = time.time()
    lines = [
        "# HELP gpucluster_gate_node A node in the return-to-service gate: its way back, level and phase.",
        "# TYPE gpucluster_gate_node gauge",
    ]
    seconds: list[str] = []
    out: list[str] = []
    burning: dict[str, int] = {}
    for node, status in sorted(statuses.items()):
        found = GATE_REASON_RE.match(status.reason or "") if status.drained else None
        if found is None and node not in entered:
            continue
        trigger, level, phase, detail = found.groups() if found else ("unknown", "unknown", "held", "")
        lines.append(
            sample("gpucluster_gate_node", 1, slurm_node=node, trigger=trigger, level=level, phase=phase)
        )
        if node in entered:
            seconds.append(
                sample("gpucluster_gate_node_seconds", round(now - entered[node]), slurm_node=node)
            )
        if phase == "out":
            check = detail.split(":")[0] if ":" in detail else detail
            out.append(
                sample(
                    "gpucluster_gate_node_out", 1, slurm_node=node, check=check, reason=status.reason or ""
                )
            )
        if phase == "burn-in":
            for partition in status.partitions:
                burning[partition] = burning.get(partition, 0) + 1
    lines += ["# HELP gpucluster_gate_node_seconds Seconds since the node entered the gate.",
              "# TYPE gpucluster_gate_node_seconds gauge", *seconds,
              "# HELP gpucluster_gate_node_out A node that failed the gate and stays out, with the failing check.",
              "# TYPE gpucluster_gate_node_out gauge", *out,
              "# HELP gpucluster_gate_nodes_in_burn_in Nodes in burn-in, per partition.",
              "# TYPE gpucluster_gate_nodes_in_burn_in gauge"]  # fmt: skip
    partitions = sorted({p for s in statuses.values() for p in s.partitions})
    lines += [sample("gpucluster_gate_nodes_in_burn_in", burning.get(p, 0), partition=p) for p in partitions]
    results = {"pass": 0, "fail": 0, "timeout": 0}
    checks: dict[str, int] = {}
    for record in records:
        results[str(record.get("result"))] = results.get(str(record.get("result")), 0) + 1
        for check in record.get("checks", []):
            if check.get("status") == "fail":
                checks[check["check"]] = checks.get(check["check"], 0) + 1
    lines += ["# HELP gpucluster_gate_burn_ins_total Burn-ins recorded on this controller, by result.",
              "# TYPE gpucluster_gate_burn_ins_total counter",
              *(sample("gpucluster_gate_burn_ins_total", n, result=r) for r, n in sorted(results.items())),
              "# HELP gpucluster_gate_check_failures_total Failed burn-in checks recorded on this controller, by check.",
              "# TYPE gpucluster_gate_check_failures_total counter",
              *(sample("gpucluster_gate_check_failures_total", n, check=c) for c, n in sorted(checks.items()))]  # fmt: skip
    return "\n".join(lines) + "\n"


def write_textfile(path: Path, text: str) -> None:
    """Whole, then renamed: node-exporter never reads half a file."""
    fd, tmp = tempfile.mkstemp(prefix=".gate-", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


# --- The gate on Kubernetes: one pod of a DaemonSet on each of Kubernetes' GPU nodes ------------
#
# A node in the gate carries the taint gpucluster.io/gate=<way back>:NoSchedule: no pod that does
# not tolerate it lands (the DaemonSet's own pod does). The pod burns its node in (the same checks
# as on Slurm's nodes), one node of a node type's pool at a time per burn-in slot (a Lease created
# only if absent: the API server's own test-and-set), and on a pass removes the taint; after
# `attempts` failures the taint's value becomes `out`. Each burn-in's record goes into the node's
# annotation gpucluster.io/gate-record. A reboot (a new boot id) puts the taint on.

KUBE_TAINT = "gpucluster.io/gate"
KUBE_RECORD = "gpucluster.io/gate-record"
KUBE_ATTEMPTS = "gpucluster.io/gate-attempts"
KUBE_OUT = "out"
SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
LEASE = "gpucluster-burnin-{pool}-{index}"


class KubeApi:
    """The few Kubernetes API calls the gate makes, with the pod's service account."""

    def __init__(self, base: str, token: str, ca: Path | None, namespace: str) -> None:
        self.base, self.token, self.namespace = base.rstrip("/"), token, namespace
        self.context = ssl.create_default_context(cafile=str(ca)) if ca else None

    @classmethod
    def in_cluster(cls) -> KubeApi:
        host = os.environ.get("KUBERNETES_SERVICE_HOST", "kubernetes.default.svc")
        port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
        token = (SERVICE_ACCOUNT / "token").read_text(encoding="utf-8").strip()
        namespace = (SERVICE_ACCOUNT / "namespace").read_text(encoding="utf-8").strip()
        return cls(f"https://{host}:{port}", token, SERVICE_ACCOUNT / "ca.crt", namespace)

    def call(
        self, method: str, path: str, body: Any = None, kind: str = "application/json"
    ) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data=data, method=method)
        request.add_header("Authorization", f"Bearer {self.token}")
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", kind)
        try:
            with urllib.request.urlopen(request, timeout=30, context=self.context) as response:
                return response.status, json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as exc:
            try:
                return exc.code, json.loads(exc.read() or b"{}")
            except ValueError:
                return exc.code, {}

    def node(self, name: str) -> dict[str, Any]:
        status, body = self.call("GET", f"/api/v1/nodes/{name}")
        if status != 200:
            raise RuntimeError(f"GET node {name}: HTTP {status} {body.get('message', '')}")
        node: dict[str, Any] = body
        return node

    def patch_node(self, name: str, operations: list[dict[str, Any]]) -> None:
        status, body = self.call("PATCH", f"/api/v1/nodes/{name}", operations, "application/json-patch+json")
        if status != 200:
            raise RuntimeError(f"PATCH node {name}: HTTP {status} {body.get('message', '')}")

    def take_lease(self, name: str, holder: str, seconds: int) -> bool:
        """A Lease that expires with the burn-in; False when another node holds it."""
        path = f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases"
        now = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())
        lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": name},
                 "spec": {"holderIdentity": holder, "leaseDurationSeconds": seconds, "acquireTime": now,
                          "renewTime": now}}  # fmt: skip
        status, body = self.call("POST", path, lease)
        if status == 201:
            return True
        if status != 409:
            raise RuntimeError(f"POST lease {name}: HTTP {status} {body.get('message', '')}")
        status, held = self.call("GET", f"{path}/{name}")
        spec = held.get("spec", {}) if status == 200 else {}
        if spec.get("holderIdentity") == holder:
            return True
        renewed = str(spec.get("renewTime", ""))[:19]
        if renewed and time.time() > calendar.timegm(time.strptime(renewed, "%Y-%m-%dT%H:%M:%S")) + int(
            spec.get("leaseDurationSeconds", 0)
        ):
            self.call("DELETE", f"{path}/{name}")  # expired: its holder died mid burn-in
            return self.call("POST", path, lease)[0] == 201
        return False

    def drop_lease(self, name: str) -> None:
        self.call("DELETE", f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases/{name}")


def gate_taint(node: dict[str, Any]) -> tuple[int, dict[str, Any]] | None:
    for index, taint in enumerate(node.get("spec", {}).get("taints") or []):
        if taint.get("key") == KUBE_TAINT:
            return index, taint
    return None


def taint_node(api: KubeApi, node: dict[str, Any], way_back: str) -> None:
    name = node["metadata"]["name"]
    taint = {"key": KUBE_TAINT, "value": way_back, "effect": "NoSchedule"}
    version = {
        "op": "test",
        "path": "/metadata/resourceVersion",
        "value": node["metadata"]["resourceVersion"],
    }
    if node.get("spec", {}).get("taints"):
        api.patch_node(name, [version, {"op": "add", "path": "/spec/taints/-", "value": taint}])
    else:
        api.patch_node(name, [version, {"op": "add", "path": "/spec/taints", "value": [taint]}])


def kube_gate_once(api: KubeApi, run: BurnIn, gconf: GateConf, state: State, rebooted: bool) -> str:
    """One look at this node: a reboot puts it in the gate; a node in the gate (and not out) is
    burnt in when a slot of its pool is free; its verdict changes the taint."""
    node = api.node(run.node)
    if gate_taint(node) is None and rebooted and gconf.level("reboot") != "none":
        taint_node(api, node, "reboot")
        node = api.node(run.node)
    found = gate_taint(node)
    if found is None:
        return "in service"
    way_back = str(found[1].get("value", "repaired"))
    if way_back == KUBE_OUT:
        return "out (failed its burn-ins) until repaired"
    level = gconf.level(way_back) if way_back in TRIGGERS else "deep"
    level = "quick" if level == "none" else level
    limit = gconf.time_limit.get(level, 900)
    pool = re.sub(r"[^a-z0-9-]", "-", run.exp.section.lower())
    names = [
        LEASE.format(pool=pool, index=k) for k in range(1, max(1, gconf.slots.get(run.exp.section, 1)) + 1)
    ]
    lease = next((name for name in names if api.take_lease(name, run.node, limit + 120)), None)
    if lease is None:
        return f"waiting for a burn-in slot of {run.exp.section}"
    started = time.time()
    run.level = level
    run.ctx.deadline = time.monotonic() + limit
    try:
        result, outcomes = burn_in(run)
    finally:
        api.drop_lease(lease)
    attempts = int((node["metadata"].get("annotations") or {}).get(KUBE_ATTEMPTS, "0") or "0")
    gate = {"trigger": way_back, "level": level, "attempts": attempts}
    record = burn_in_record(run.node, gate, result, outcomes, started)
    state.counts[result] = state.counts.get(result, 0) + 1
    return kube_verdict(api, run.node, gconf, record, attempts)


def kube_verdict(api: KubeApi, name: str, gconf: GateConf, record: dict[str, Any], attempts: int) -> str:
    """A pass removes the taint; a failure counts, and the last one (or a timeout) turns the
    taint's value to `out`. The record goes into the node's annotation either way."""
    node = api.node(name)
    found = gate_taint(node)
    if found is None:
        return f"burn-in {record['result']}; the taint was lifted meanwhile"
    path = f"/spec/taints/{found[0]}"
    annotations = dict(node["metadata"].get("annotations") or {})
    annotations[KUBE_RECORD] = json.dumps(record, separators=(",", ":"))
    ops: list[dict[str, Any]] = [{"op": "test", "path": f"{path}/key", "value": KUBE_TAINT}]
    if record["result"] == "pass":
        annotations.pop(KUBE_ATTEMPTS, None)
        ops.append({"op": "remove", "path": path})
        done = "passed: taint removed"
    else:
        annotations[KUBE_ATTEMPTS] = str(attempts + 1)
        if record["result"] == "timeout" or attempts + 1 >= gconf.attempts:
            ops.append({"op": "replace", "path": f"{path}/value", "value": KUBE_OUT})
            done = f"{record['result']}: {record['failed']}; stays out"
        else:
            done = f"{record['result']}: {record['failed']} (try {attempts + 1} of {gconf.attempts})"
    ops.append({"op": "add", "path": "/metadata/annotations", "value": annotations})
    api.patch_node(name, ops)
    return f"burn-in {done}"


def kubernetes_gate(args: argparse.Namespace, env: dict[str, str], node: str) -> int:
    """--kubernetes-gate: the DaemonSet pod's loop (once with --once)."""
    try:
        exp = load_expectations(args.config, node)
        gconf = load_gate(args.config)
    except ConfigError as exc:
        print(f"gpucluster-healthcheck: {exc}", file=sys.stderr)
        return 2
    if gconf is None:
        print(f"{args.config} has no [{GATE_SECTION}] section")
        return 2
    api = (
        KubeApi.in_cluster()
        if args.api is None
        else KubeApi(args.api, os.environ.get("KUBE_TOKEN", ""), None, args.namespace)
    )
    while True:
        state_file = args.state_dir / "state.json"
        state = State.load(state_file)
        ctx = Context(root=args.root, kmsg=args.kmsg or args.root / "dev" / "kmsg", state_dir=args.state_dir,
                      deadline=time.monotonic() + 900, env=env, reserve=0)  # fmt: skip
        boot = current_boot(ctx)
        rebooted = bool(state.last_boot) and bool(boot) and boot != state.last_boot
        try:
            said = kube_gate_once(
                api, BurnIn(exp, ctx, State.load(state_file), "quick", node, gconf), gconf, state, rebooted
            )
        except (RuntimeError, OSError, ValueError) as exc:
            said = f"Kubernetes not updated: {exc}"
        print(f"{node}: {said}", flush=True)
        state.last_boot = boot or state.last_boot
        args.state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        state.save(state_file)
        if args.once:
            return 0
        time.sleep(args.interval)


if __name__ == "__main__":
    sys.exit(main())
