"""`gpucluster lab status`: is the lab absent, partly built, or up, in plain words.

Each missing or broken piece is one line naming the command that fixes it. Daemon output is only
shown once the lab is up; before that, Slurm's client commands only print their own fatal errors.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from gpucluster.errors import InventoryError
from gpucluster.lab import bmc, network, nodes
from gpucluster.lab.paths import podman_env
from gpucluster.lab.shell import run
from gpucluster.lab.state import LabState
from gpucluster.layers import load_cluster
from gpucluster.model.cluster import Cluster
from gpucluster.model.powered import saved_hosts

UP = "gpucluster lab up"
DOWN = "gpucluster lab down"
# Node states in which a node takes jobs (sinfo %T, lowercase; `+` flags and `*` not responding excluded).
USABLE_STATES = re.compile(r"^(idle|allocated|mixed|completing)$")


@dataclass
class LabReport:
    state: Literal["absent", "partial", "up"]
    problems: list[str] = field(default_factory=list)
    sections: list[tuple[str, str]] = field(default_factory=list)
    summary: str = ""


def _exec(container: str, *command: str, timeout: float = 60) -> tuple[int, str]:
    proc = run(["podman", "exec", container, *command], env=podman_env(), check=False, timeout=timeout)
    return proc.returncode, (proc.stdout + proc.stderr).strip()


def _service_active(container: str, unit: str) -> bool:
    code, _ = _exec(container, "systemctl", "is-active", "--quiet", unit)
    return code == 0


def _host_problems(state: LabState, cluster: Cluster) -> list[str]:
    """Bridge, namespaces and containers: what `lab up` creates before the playbook runs."""
    problems = []
    if not state.bridge or not network.link_exists(network.BRIDGE):
        problems.append(f"bridge {network.BRIDGE} is missing: run `{UP}`")
    saved = set(saved_hosts(cluster))
    for host in cluster.inventory.hostvars:
        if not network.netns_path(host).exists():
            problems.append(f"{host}: network namespace {network.netns_name(host)} is missing: run `{UP}`")
        name = nodes.container_name(host)
        if not nodes.container_exists(name):
            problems.append(f"{host}: container {name} does not exist: run `{UP}`")
        elif not nodes.container_running(name) and host not in saved:
            problems.append(f"{host}: container {name} is stopped: run `{UP}` (starts it again)")
    if bmc.needed(cluster) and not (state.bmc_pid and Path(f"/proc/{state.bmc_pid}").exists()):
        problems.append(f"the lab's BMC (Redfish) is not running: run `{UP}`")
    return problems


def _powered_off(cluster: Cluster) -> set[str]:
    """Power-saved hosts whose container is stopped: off, as Slurm asked their BMC."""
    return {h for h in saved_hosts(cluster) if not nodes.container_running(nodes.container_name(h))}


def _slurm_problems(state: LabState, cluster: Cluster) -> list[str]:
    """Daemons and node states, once every container runs."""
    if not state.converged:
        return [f"the Slurm playbook has not completed (log: .lab/ansible.log): run `{UP}`"]
    problems = []
    # Every controller (a backup that does not run cannot take over); the queries go to one that runs.
    running = [
        h for h in cluster.spec.slurm.controller if _service_active(nodes.container_name(h), "slurmctld")
    ]
    for host in cluster.spec.slurm.controller:
        if host not in running:
            problems.append(f"{host}: slurmctld is not running: run `{UP}` (the playbook starts it)")
    if not running:
        return problems
    controller = running[0]
    ctl = nodes.container_name(controller)
    accounting = cluster.spec.slurm.accounting
    if accounting and not _service_active(nodes.container_name(accounting.host), "slurmdbd"):
        problems.append(f"{accounting.host}: slurmdbd is not running: run `{UP}`")
    off = _powered_off(cluster)
    down_slurmd = [
        h for h in cluster.hosts if h not in off and not _service_active(nodes.container_name(h), "slurmd")
    ]
    for host in down_slurmd:
        problems.append(f"{host}: slurmd is not running: run `{UP}` (the playbook starts it)")
    code, out = _exec(ctl, "sinfo", "--noheader", "--Node", "--format=%N %T %E")
    if code != 0:
        return [*problems, f"{controller}: sinfo cannot reach slurmctld: run `{UP}`"]
    seen: dict[str, tuple[str, str]] = {}
    for line in out.splitlines():
        parts = line.split(maxsplit=2)
        if len(parts) >= 2:
            seen[parts[0]] = (parts[1], parts[2] if len(parts) > 2 else "")
    for host in cluster.hosts:
        if host in down_slurmd:
            continue
        node_state, reason = seen.get(host, ("missing", ""))
        if host in saved_hosts(cluster):
            # Powered down (~), powering up (#) or down (%), to be powered down (!): Slurm's to do.
            node_state = node_state.rstrip("~#%!")
        if not USABLE_STATES.match(node_state):
            why = f" ({reason})" if reason and reason != "none" else ""
            problems.append(
                f"{host}: Slurm node state is {node_state}{why}: run "
                f"`gpucluster lab run -- scontrol update nodename={host} state=resume`"
            )
    return problems


def report() -> LabReport:
    state = LabState.load()
    if state is None:
        return LabReport("absent", summary=f"lab: absent (nothing built); run `{UP}`")
    if not state.inventory:
        return LabReport(
            "partial",
            [f"the lab state names no inventory: run `{DOWN}`, then `{UP}`"],
            summary="lab: partly built",
        )
    try:
        cluster = load_cluster(Path(state.inventory))
    except InventoryError as exc:
        first = str(exc.problems[0]) if exc.problems else "invalid"
        return LabReport(
            "partial",
            [f"the lab's inventory no longer loads ({first}): run `{DOWN}`"],
            summary=f"lab: partly built from {state.inventory}",
        )
    problems = _host_problems(state, cluster)
    if not problems:
        problems = _slurm_problems(state, cluster)
    if problems:
        return LabReport("partial", problems, summary=f"lab: partly built from {state.inventory}")
    ctl = nodes.container_name(cluster.spec.slurm.controller[0])
    sections = []
    for title, command in (
        ("nodes", ["sinfo", "--Node", "--format=%N %P %T %G %E"]),
        ("fabric", ["scontrol", "show", "topology"]),
        ("jobs", ["squeue", "--format=%i %u %a %T %D %R %b"]),
    ):
        sections.append((title, _exec(ctl, *command)[1]))
    power = power_section(cluster, ctl)
    if power:
        sections.append(("power", power))
    summary = f"lab: up ({len(cluster.inventory.hostvars)} hosts from {state.inventory})"
    return LabReport("up", sections=sections, summary=summary)


def power_section(cluster: Cluster, ctl: str) -> str:
    """Each power-saved node: what its BMC reports (the container runs or not) and what Slurm
    shows, side by side (they differ only while a node powers up or down)."""
    saved = saved_hosts(cluster)
    if not saved:
        return ""
    _, out = _exec(ctl, "sinfo", "--noheader", "--Node", "--format=%N %T", "--nodes", ",".join(saved))
    slurm = dict(line.split(maxsplit=1) for line in out.splitlines() if len(line.split()) == 2)
    rows = ["NODE POWER(BMC) SLURM"]
    for host in saved:
        power = "On" if nodes.container_running(nodes.container_name(host)) else "Off"
        rows.append(f"{host} {power} {slurm.get(host, '?')}")
    return "\n".join(rows)
