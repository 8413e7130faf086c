"""One real lab per test session: `lab up` before the first lab test, `lab down` after the last.

A lab that was already up when the session started is reused and left running.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from gpucluster.cluster import Cluster, load_cluster
from gpucluster.lab import lab, network, nodes
from gpucluster.lab.paths import DEFAULT_INVENTORY, podman_env
from gpucluster.lab.playbook import PlaybookRun
from gpucluster.lab.state import LabState


@dataclass
class Lab:
    cluster: Cluster
    first_run: PlaybookRun | None

    def sh(
        self, *command: str, user: str | None = None, host: str | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        """Run a command in a lab host (default: the controller), optionally as a Unix user."""
        container = nodes.container_name(host or self.cluster.spec.slurm.controller[0])
        args = ["podman", "exec", "--workdir=/tmp", *(["--user", user] if user else []), container, *command]
        return subprocess.run(
            args, env=podman_env(), capture_output=True, text=True, timeout=timeout, check=False
        )

    def ok(self, *command: str, user: str | None = None, host: str | None = None) -> str:
        proc = self.sh(*command, user=user, host=host)
        assert proc.returncode == 0, f"{' '.join(command)} failed: {proc.stdout}{proc.stderr}"
        return proc.stdout

    def node_states(self) -> dict[str, str]:
        out = self.ok("sinfo", "--noheader", "--Node", "--format=%N %T")
        return dict(line.split() for line in out.splitlines() if line.strip())

    def wait(self, predicate: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return
            time.sleep(1)
        raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")

    def submit(self, *args: str, user: str | None = None) -> str:
        # Batch output goes nowhere: tenant users cannot write to the job's default directory.
        return self.ok("sbatch", "--parsable", "--output=/dev/null", *args, user=user).strip().split(";")[0]

    def cancel_all(self) -> None:
        jobs = self.ok("squeue", "--noheader", "--format=%i").split()
        if jobs:
            self.sh("scancel", *jobs)
        self.wait(lambda: self.ok("squeue", "--noheader").strip() == "", 60, "the queue to empty")


@pytest.fixture(scope="session")
def lab_env() -> Iterator[Lab]:
    existing = LabState.load()
    reuse = existing is not None and bool(existing.containers)
    run = None
    if not reuse:
        try:
            run = lab.up(DEFAULT_INVENTORY, progress=lambda message: None)
        except BaseException:
            lab.down(progress=lambda message: None)
            raise
    env = Lab(load_cluster(DEFAULT_INVENTORY), run)
    yield env
    if not reuse:
        lab.down(progress=lambda message: None)
        # `lab down` leaves nothing of the lab behind.
        names = subprocess.run(
            ["podman", "ps", "-a", "--format", "{{.Names}}"],
            env=podman_env(),
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        assert not [n for n in names if n.startswith("gclab-")]
        netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
        assert "gclab-" not in netns
        links = subprocess.run(
            ["ip", "-o", "link", "show"], capture_output=True, text=True, check=True
        ).stdout
        assert network.BRIDGE + ":" not in links
        assert LabState.load() is None


@pytest.fixture
def lab_cluster(lab_env: Lab) -> Iterator[Lab]:
    """The shared lab with an empty queue and every node responding, before and after each test
    (earlier tests kill slurmd and restart slurmctld; nodes take a moment to re-register)."""
    lab_env.cancel_all()
    lab_env.wait(
        lambda: all(not re.search(r"down|unknown|\*", s) for s in lab_env.node_states().values()),
        90,
        "every node to respond",
    )
    yield lab_env
    lab_env.cancel_all()
