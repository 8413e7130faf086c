"""Running the verify playbook (package data: verify.yml beside this module) with a plan and
reading back what it saw; the whole verification."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from gpucluster.model.cluster import Cluster
from gpucluster.packagedata import data_path
from gpucluster.tools import venv_env, venv_tool
from gpucluster.verify.checks import CheckResult, Status, run_checks
from gpucluster.verify.nodesoftware import node_software_checks
from gpucluster.verify.observed import Observations, VerifyError, read_observations
from gpucluster.verify.probes import Plan, make_plan

VERIFY_PLAYBOOK = data_path("verify", "verify.yml")
# Runs a playbook with extra arguments against the cluster's Ansible inventory; raises on failure.
PlaybookRunner = Callable[[Path, list[str]], None]


def collect(plan: Plan, run: PlaybookRunner) -> Observations:
    """Give the plan to the playbook as extra vars; read the observations it writes."""
    with tempfile.TemporaryDirectory(prefix="gpucluster-verify-") as tmp:
        plan_file = Path(tmp) / "plan.json"
        output = Path(tmp) / "observed.json"
        plan_file.write_text(json.dumps(plan.playbook_vars(output)), encoding="utf-8")
        run(VERIFY_PLAYBOOK, ["--extra-vars", f"@{plan_file}"])
        if not output.is_file():
            raise VerifyError(f"{VERIFY_PLAYBOOK.name} wrote no observations")
        doc = json.loads(output.read_text(encoding="utf-8"))
    return read_observations(doc, plan.controller)


def verify_cluster(cluster: Cluster, run: PlaybookRunner) -> list[CheckResult]:
    """Every check of the bare-metal Slurm part of `cluster`, as seen through `run`."""
    plan = make_plan(cluster)
    if not plan.cluster.hosts:
        return [
            CheckResult("slurm", Status.SKIPPED, "no node is owned by bare-metal Slurm: nothing to verify")
        ]
    seen = collect(plan, run)
    if seen.controller is None:
        host = seen.hosts.get(plan.controller)
        why = host.unreachable if host and host.unreachable else "no observation"
        first = next((line.strip() for line in why.splitlines() if line.strip()), why)
        raise VerifyError(f"cannot reach {plan.controller}, the primary controller: {first}")
    results = run_checks(plan, seen) + node_software_checks(plan, seen)
    from gpucluster.verify.containers import container_checks

    results += container_checks(plan, seen)
    # cluster.monitoring: every scrape target up (its own module; imported only when used).
    if getattr(cluster.spec, "monitoring", None) is not None:
        from gpucluster.verify.monitoring import check_targets

        targets = check_targets(cluster, run)
        if targets is not None:
            results.append(targets)
    return results


def _ansible_error(output: str) -> str:
    """The line of ansible-playbook's output that says what went wrong."""
    for line in output.splitlines():
        text = line.strip()
        if text.startswith(("fatal:", "ERROR!", "[ERROR]")):
            return text[:300]
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    return lines[-1][:300] if lines else "no output"


def ansible_runner(inventory: Path) -> PlaybookRunner:
    """ansible-playbook of the virtualenv on `inventory`, with the caller's Ansible settings
    (ansible.cfg, ANSIBLE_* variables) as for any other playbook run on that inventory."""

    def run(playbook: Path, extra: list[str]) -> None:
        command = [venv_tool("ansible-playbook"), "-i", str(inventory), str(playbook), *extra]
        proc = subprocess.run(command, env=venv_env(), capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            fd, log = tempfile.mkstemp(prefix="gpucluster-verify-", suffix=".log")
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(proc.stdout + proc.stderr)
            raise VerifyError(
                f"ansible-playbook {playbook.name} failed (exit {proc.returncode}): "
                f"{_ansible_error(proc.stdout + proc.stderr)} (full output: {log})"
            )

    return run
