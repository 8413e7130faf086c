"""The Kubernetes roles' Molecule scenarios: render-only converge, idempotence and verify.

No cluster is involved (gpucluster_k8s_apply=false writes the plan of what would be applied);
each scenario takes about 12 s.
"""

from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

from gpucluster.tools import venv_env, venv_tool
from tests.k8s.conftest import REPO

K8S_ROLES = [
    "cert_manager",
    "network_operator",
    "gpu_operator",
    "dra_driver",
    "kueue",
    "kai_scheduler",
    "volcano",
    "gpu_workloads",
    "slurm_on_k8s",
    # The releases of the roles above (render-only for a few of them).
    "helm_release",
]


def _run_scenario(role: str) -> subprocess.CompletedProcess[str]:
    env = {**venv_env(), "ANSIBLE_FORCE_COLOR": "0", "PY_COLORS": "0", "NO_COLOR": "1"}
    return subprocess.run(
        [venv_tool("molecule"), "test", "--scenario-name", "default"],
        cwd=REPO / "roles" / role,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )


@pytest.fixture(scope="module")
def scenario_results() -> dict[str, subprocess.CompletedProcess[str]]:
    """All scenarios, two at a time (each is mostly ansible-playbook start-up on one core)."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(K8S_ROLES, pool.map(_run_scenario, K8S_ROLES), strict=True))


@pytest.mark.molecule
@pytest.mark.parametrize("role", K8S_ROLES)
def test_render_only_scenario(
    role: str, scenario_results: dict[str, subprocess.CompletedProcess[str]]
) -> None:
    result = scenario_results[role]
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert "idempotence: Executed: Successful" in output
    assert "verify: Executed: Successful" in output
