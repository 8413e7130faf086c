"""Shared fixtures: the repository layout and throwaway inventories."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]

INVENTORIES = REPO / "inventories"
# What a fresh root shell on Debian has (`env -i`): the README's commands must work with only this.
SCRUBBED_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "CI": "true", "LANG": "C.UTF-8"}


@dataclass(frozen=True)
class ReadmeCommands:
    lab: str
    tests: str


def readme_commands() -> ReadmeCommands:
    """The two commands the README opens with (its first bash block, comments dropped)."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```bash\n(.*?)```", text, re.DOTALL)
    assert block, "README.md has no bash block"
    lines = [line for line in block.group(1).splitlines() if line.strip() and not line.startswith("#")]
    assert len(lines) == 2, lines
    return ReadmeCommands(lab=lines[0], tests=lines[1])


# Tests that share one live thing run on one pytest-xdist worker, in order: the lab's
# containers, and the Molecule container every Slurm role's scenario names gcmol01. The README's
# test command runs two workers (pyproject addopts), so the lab and Molecule run side by side (three
# loaded this 2-core machine until tests with wall-time limits failed).
# (A scheduler of our own: xdist's `xdist_group` marks are ignored under pytest 9.)
SERIAL_DIRS = {
    "lab": "the lab",
    "roles": "the gcmol01 Molecule container",
    "packaging": "the wheel and the collection built once per session",
}
# Files whose tests share one module fixture that costs minutes: on several workers it would run twice.
SERIAL_FILES = {"tests/k8s/test_molecule.py": "the Kubernetes roles' Molecule scenarios"}


MOLECULE_SCENARIOS = "tests/roles/test_molecule.py::test_molecule_scenario["


def scenario_containers(nodeid: str) -> str | None:
    """The containers a Molecule scenario test creates (`role-scenario-release` in its id)."""
    if not nodeid.startswith(MOLECULE_SCENARIOS):
        return None
    role, scenario, _ = nodeid[len(MOLECULE_SCENARIOS) : -1].rsplit("-", 2)
    config = REPO / "roles" / role / "molecule" / scenario / "molecule.yml"
    names = re.findall(r"^\s*- name: (\S+)", config.read_text(encoding="utf-8"), re.MULTILINE)
    return ",".join(sorted(names)) or None


def serial_scope(nodeid: str) -> str:
    """The work unit of a test: one per shared thing, else the test alone."""
    path = nodeid.split("::", 1)[0]
    if path in SERIAL_FILES:
        return SERIAL_FILES[path]
    # A scenario whose containers no other scenario names runs beside the others (the Slurm
    # roles' scenarios share gcmol01 and stay together; one role's scenario on several releases
    # shares its containers and stays together too).
    containers = scenario_containers(nodeid)
    if containers is not None and containers != "gcmol01":
        return f"Molecule containers {containers}"
    parts = path.split("/")
    if len(parts) > 2 and parts[0] == "tests" and parts[1] in SERIAL_DIRS:
        return SERIAL_DIRS[parts[1]]
    return nodeid


# The longest work units start first, each on a worker of its own, and the short ones fill in
# around them: a long unit handed out last runs alone at the end while the other worker idles
# (xdist's own order is by the number of tests in a unit, and the older releases' labs are one test).
START_FIRST = (
    "tests/lab_releases/",  # two labs, one upgraded: about 20 min
    "tests/lab/",  # the session's lab: about 30 min
    MOLECULE_SCENARIOS,
    "tests/k8s/test_molecule.py",
)


def start_rank(nodeid: str) -> int:
    return next(
        (rank for rank, prefix in enumerate(START_FIRST) if nodeid.startswith(prefix)), len(START_FIRST)
    )


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Stable: the tests of one unit keep their order (the lab's tests build on each other).
    items.sort(key=lambda item: start_rank(item.nodeid))


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    from xdist.scheduler import LoadScopeScheduling

    class SharedThingScheduling(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return serial_scope(nodeid)

    return SharedThingScheduling(config, log)


def example_inventories() -> list[str]:
    return sorted(p.parent.name for p in INVENTORIES.glob("*/hosts.yml"))


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpucluster.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd or REPO,
        check=False,
    )


class InventoryFactory:
    """Writes a small inventory directory (hosts.yml + group_vars/all/cluster.yml) to edit per test."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def make(self, hosts: str, cluster: str, name: str = "inv") -> Path:
        directory = self.root / name
        (directory / "group_vars" / "all").mkdir(parents=True, exist_ok=True)
        (directory / "hosts.yml").write_text(textwrap.dedent(hosts))
        (directory / "group_vars" / "all" / "cluster.yml").write_text(textwrap.dedent(cluster))
        return directory

    def copy_example(self, example: str, name: str | None = None) -> Path:
        # The directory keeps the example's name unless told otherwise (the generated header names it).
        target = self.root / (name or example) / example if name else self.root / example
        shutil.copytree(INVENTORIES / example, target)
        return target


@pytest.fixture
def inventories(tmp_path: Path) -> InventoryFactory:
    return InventoryFactory(tmp_path)


SMALL_HOSTS = """\
    all:
      children:
        ctl:
          hosts:
            head:
        gpus:
          children:
            rack1:
              hosts:
                n[01:04]:
            rack2:
              hosts:
                n[05:08]:
    """

SMALL_CLUSTER = """\
    cluster:
      name: small
      slurm:
        version: "22.05"
        controller: head
        accounting: {host: head}
      node_types:
        h100: {sockets: 2, cores_per_socket: 8, memory_mb: 64000,
               gpus: {model: h100, count: 8, devices: "/dev/nvidia[0-7]"}}
      nodes:
        - {group: gpus, type: h100}
      fabric:
        tree:
          top: [leaf1, leaf2]
          leaf1: [rack1]
          leaf2: [rack2]
      partitions:
        - {name: batch, nodes: [gpus], default: true}
      qos:
        - {name: normal}
      users:
        - {name: alice, uid: 10001}
        - {name: bob, uid: 10002}
      tenants:
        - {name: team-a, fairshare: 50, gpu_quota: 32, gpu_limit: 48, users: [alice], qos: [normal]}
        - {name: team-b, fairshare: 50, gpu_quota: 32, users: [bob]}
    """
