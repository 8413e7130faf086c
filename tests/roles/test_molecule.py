"""Every role's Molecule scenario (converge, idempotence, testinfra verify) in podman containers of
the lab image of the scenario's Slurm release: 26.05 for the roles' own scenarios, and gpu_driver's
default scenario on each older release too (each suite's own driver). The playbook on the older
releases is proven by their labs (tests/lab/older_releases.py)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from gpucluster.lab import image
from gpucluster.lab.paths import podman_env
from gpucluster.tools import venv_env, venv_tool

ROLES = Path(__file__).resolve().parents[2] / "roles"
SCENARIO_ROLES = sorted(p.parents[2].name for p in ROLES.glob("*/molecule/default/molecule.yml"))
OURS = [
    "gpu_driver",
    "gpu_mig",
    "monitoring_dcgm_exporter",
    "monitoring_node_exporter",
    "monitoring_prometheus",
    "munge",
    "nfs_server",
    "pyxis_enroot",
    "shared_storage",
    "slurm_accounts",
    "slurm_common",
    "slurm_compute",
    "slurm_containers",
    "slurm_controller",
    "slurm_dbd",
    "slurm_health",
    "slurm_power",
    "slurm_login",
    "slurm_node_ssh",
    "slurm_restd",
    "users",
]
# Further scenarios of a role, beside its default one.
EXTRA_SCENARIOS = [("slurm_compute", "configless"), ("gpu_driver", "nvidia")]
# Default scenarios run on the older releases too: gpu_driver's installs each suite's own driver
# (22.05 bookworm 535, 24.11 trixie 550; 26.05 forky 550 with the others).
# The release the roles' own scenarios target (molecule/inventory/*), and the older ones.
SCENARIO_RELEASE = "26.05"
OLDER_RELEASES = ("24.11", "22.05")
EVERY_RELEASE_DEFAULTS = ("gpu_driver",)
SCENARIOS = (
    [(role, "default", SCENARIO_RELEASE) for role in OURS]
    + [(role, "default", release) for role in EVERY_RELEASE_DEFAULTS for release in OLDER_RELEASES]
    + [(role, scenario, SCENARIO_RELEASE) for role, scenario in EXTRA_SCENARIOS]
)

pytestmark = pytest.mark.molecule


def test_each_slurm_role_has_a_scenario() -> None:
    assert set(OURS) <= set(SCENARIO_ROLES)


def test_each_extra_scenario_exists() -> None:
    for role, scenario in EXTRA_SCENARIOS:
        assert (ROLES / role / "molecule" / scenario / "molecule.yml").is_file(), (role, scenario)


def remove_leftover_containers(role: str, scenario: str, env: dict[str, str]) -> None:
    """The scenario's containers, if an interrupted run left them: its sequence starts with
    create, not with the (much slower) destroy playbook. Molecule's state of that run is not
    reused either (the test gives each run an empty ephemeral directory): a stale `created: true`
    made create skip and converge fail on a container that no longer existed."""
    config = yaml.safe_load((ROLES / role / "molecule" / scenario / "molecule.yml").read_text())
    # Last first: a container sharing an earlier one's network namespace must go before it.
    names = [platform["name"] for platform in reversed(config["platforms"])]
    subprocess.run(
        ["podman", "rm", "--force", "--ignore", "--time=0", *names], env=env, capture_output=True, check=True
    )


def test_the_roles_scenarios_target_the_scenario_release() -> None:
    inventories = Path(__file__).resolve().parents[2] / "molecule" / "inventory"
    for cluster_file in inventories.glob("*/group_vars/all/cluster.yml"):
        assert f'version: "{SCENARIO_RELEASE}"' in cluster_file.read_text(), cluster_file


@pytest.mark.parametrize(
    ("role", "scenario", "release"), SCENARIOS, ids=[f"{r}-{s}-{v}" for r, s, v in SCENARIOS]
)
def test_molecule_scenario(role: str, scenario: str, release: str, tmp_path: Path) -> None:
    tag, _ = image.ensure_image(lambda message: None, image.suite_of(release))
    env = {
        **venv_env(podman_env()),
        "GPUCLUSTER_LAB_IMAGE": tag,
        "GPUCLUSTER_SLURM_RELEASE": release,
        "MOLECULE_EPHEMERAL_DIRECTORY": str(tmp_path / "molecule"),
        "ANSIBLE_FORCE_COLOR": "0",
        "NO_COLOR": "1",
    }
    env.pop("PY_COLORS", None)
    remove_leftover_containers(role, scenario, env)
    proc = subprocess.run(
        [venv_tool("molecule"), "test", "--scenario-name", scenario],
        cwd=ROLES / role,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-6000:]
    # testinfra's own summary: the verify step ran real checks.
    assert re.search(r"\b\d+ passed\b", output), output[-3000:]
