"""`gpucluster verify` rows of the GPU node software (node_types.*.software): the driver version
each node runs (one per node type, the pinned one where the inventory pins it), the services the
stack needs active (persistence daemon, fabric manager, IMEX) and DCGM answering.

What the hosts say comes from gpucluster.verify.gpu_probe, run by the verify playbook.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from gpucluster.hostlists import compress
from gpucluster.nodesoftware.stack import Stack
from gpucluster.verify.checks import CheckResult, Findings, Status
from gpucluster.verify.gpu_probe import stack_hosts
from gpucluster.verify.observed import HostSeen, Observations
from gpucluster.verify.probes import Plan


@dataclass
class StackSeen:
    driver: str = ""
    package: str = ""
    services: dict[str, str] = field(default_factory=dict)
    dcgm: int | None = None

    @property
    def version(self) -> str:
        """The driver version this host runs: the loaded module's, else the installed package's."""
        return self.driver or self.package.split("-", 1)[0]


def parse_probe(text: str) -> StackSeen:
    seen = StackSeen()
    for line in text.splitlines():
        word, _, rest = line.strip().partition(" ")
        if word == "driver":
            seen.driver = rest.strip()
        elif word == "package":
            seen.package = rest.strip()
        elif word == "service":
            unit, _, state = rest.partition(" ")
            seen.services[unit] = state.strip() or "unknown"
        elif word == "dcgm" and rest.strip().isdigit():
            seen.dcgm = int(rest.strip())
    return seen


def _observed(plan: Plan, seen: Observations, findings: Findings) -> dict[str, tuple[Stack, StackSeen]]:
    out = {}
    for host, stack in stack_hosts(plan.cluster).items():
        if host in plan.power_saved:
            continue  # off until Slurm powers it on: its software comes from its image or disk
        host_seen = seen.hosts.get(host, HostSeen(unreachable="not observed"))
        if host_seen.unreachable:
            findings.add(f"{host}: unreachable", host)
            continue
        out[host] = (stack, parse_probe(host_seen.gpu_stack))
    return out


def check_driver_versions(plan: Plan, seen: Observations) -> CheckResult:
    """One driver version per node type on every node of it, the inventory's where it pins one."""
    findings = Findings()
    observed = _observed(plan, seen, findings)
    if not observed and not findings.problems:
        return CheckResult("gpu-driver", Status.SKIPPED, "no node type with node software under Slurm")
    by_type: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for host, (stack, stack_seen) in observed.items():
        if not stack_seen.version:
            findings.add(f"{host}: no NVIDIA driver installed", host)
            continue
        by_type[stack.node_type][stack_seen.version].append(host)
        if stack.version and stack_seen.version != stack.version:
            findings.add(f"{host}: driver {stack_seen.version}, the inventory pins {stack.version}", host)
    for type_name, versions in by_type.items():
        if len(versions) > 1:
            listed = ", ".join(f"{v} on {compress(h)}" for v, h in sorted(versions.items()))
            findings.add(
                f"node type {type_name} drifts: {listed}", *[h for hs in versions.values() for h in hs]
            )
    summary = ", ".join(f"{t}: {' '.join(sorted(v))}" for t, v in sorted(by_type.items()))
    return findings.result("gpu-driver", f"driver {summary} on {len(observed)} nodes")


def check_gpu_services(plan: Plan, seen: Observations) -> CheckResult:
    """The stack's services active where the driver is loaded, and DCGM answering."""
    findings = Findings()
    observed = _observed(plan, seen, findings)
    if not observed and not findings.problems:
        return CheckResult("gpu-services", Status.SKIPPED, "no node type with node software under Slurm")
    checked = 0
    for host, (stack, stack_seen) in observed.items():
        if not stack_seen.driver:
            findings.add(f"{host}: the NVIDIA kernel driver is not loaded", host)
            continue
        for unit in stack.services:
            state = stack_seen.services.get(unit, "not reported")
            if state != "active":
                findings.add(f"{host}: {unit} is {state}", host)
        if stack.dcgm and stack_seen.dcgm != 0:
            why = (
                "dcgmi not installed"
                if stack_seen.dcgm is None
                else f"dcgmi discovery exit {stack_seen.dcgm}"
            )
            findings.add(f"{host}: DCGM not reachable ({why})", host)
        checked += 1
    return findings.result("gpu-services", f"driver services active and DCGM reachable on {checked} nodes")


def node_software_checks(plan: Plan, seen: Observations) -> list[CheckResult]:
    return [check_driver_versions(plan, seen), check_gpu_services(plan, seen)]
