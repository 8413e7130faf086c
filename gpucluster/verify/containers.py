"""verify rows of cluster.slurm.containers: the OCI runtime and Pyxis + enroot on each host.

The verify playbook runs the container probe (gpucluster.verify.container_probe) on the hosts it
names and keeps its output (`key=value` lines) as HostSeen.containers; these checks judge it
against the inventory.
"""

from __future__ import annotations

from gpucluster.slurm.containers import container_nodes, container_settings, pyxis_hosts
from gpucluster.verify.checks import CheckResult, Findings, Status
from gpucluster.verify.observed import Observations
from gpucluster.verify.probes import Plan


def parse_probe(text: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            found[key.strip()] = value.strip()
    return found


def check_oci(plan: Plan, seen: Observations) -> CheckResult:
    settings = container_settings(plan.cluster)
    if settings is None or not settings.oci:
        return CheckResult("oci-runtime", Status.SKIPPED, "cluster.slurm.containers.oci is off")
    findings = Findings()
    nodes = container_nodes(plan.cluster)
    for host in nodes:
        observed = seen.hosts.get(host)
        if observed is None or observed.unreachable:
            findings.add(f"{host} not reached", host)
            continue
        if not parse_probe(observed.containers).get("crun"):
            findings.add(f"{host}: no crun, which oci.conf runs", host)
    return findings.result("oci-runtime", f"crun on {len(nodes)} node(s) for oci.conf's rootless runtime")


def check_pyxis(plan: Plan, seen: Observations) -> CheckResult:
    settings = container_settings(plan.cluster)
    pyxis = settings.pyxis if settings is not None else None
    if pyxis is None:
        return CheckResult("pyxis", Status.SKIPPED, "cluster.slurm.containers.pyxis is not set")
    findings = Findings()
    # The hosts verify observes (controllers, accounting host, nodes); login hosts are not among them.
    hosts = [h for h in pyxis_hosts(plan.cluster) if h in plan.hosts]
    probes = [
        parse_probe(seen.hosts[h].containers)
        for h in hosts
        if h in seen.hosts and not seen.hosts[h].unreachable
    ]
    if (
        probes
        and len(probes) == len(hosts)
        and all(p.get("pyxis") != "yes" and not p.get("enroot") for p in probes)
    ):
        # Installed nowhere: the role ran without the sources and was told to skip them
        # (pyxis_enroot_missing_sources: skip); a host missing what the others have still fails.
        return CheckResult(
            "pyxis",
            Status.SKIPPED,
            f"Pyxis and enroot are installed on none of {len(hosts)} host(s) (no sources given)",
        )
    for host in hosts:
        observed = seen.hosts.get(host)
        if observed is None or observed.unreachable:
            findings.add(f"{host} not reached", host)
            continue
        probe = parse_probe(observed.containers)
        if probe.get("pyxis") != "yes":
            findings.add(f"{host}: srun --help lists no --container-image (Pyxis not loaded)", host)
        version = probe.get("enroot", "")
        if version != pyxis.enroot_version:
            findings.add(
                f"{host}: enroot {version or 'absent'}, the inventory pins {pyxis.enroot_version}", host
            )
    return findings.result(
        "pyxis", f"Pyxis loaded by srun and enroot {pyxis.enroot_version} on {len(hosts)} host(s)"
    )


def container_checks(plan: Plan, seen: Observations) -> list[CheckResult]:
    """The rows, only for an inventory that has containers in jobs."""
    if container_settings(plan.cluster) is None:
        return []
    return [check_oci(plan, seen), check_pyxis(plan, seen)]
