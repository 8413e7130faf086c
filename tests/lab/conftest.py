"""One real lab per test session, brought up and removed by the README's own commands.

Before the first lab test, the README's first command (`bash scripts/setup.sh && .venv/bin/gpucluster
lab up`) runs as a new user would run it: from the repository, in a scrubbed environment (no
inherited PATH, venv or HOME). After the last, `.venv/bin/gpucluster lab down` the same way, and
nothing of the lab may remain. A lab that was already up when the session started is reused and
left running.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from gpucluster.changes.apply import ByHand, Run, apply_actions, playbook_path
from gpucluster.changes.plan import make_plan
from gpucluster.lab import network, nodes
from gpucluster.lab.inventory import write_inventory
from gpucluster.lab.paths import DEFAULT_INVENTORY, PREFIX, podman_env, state_dir
from gpucluster.lab.playbook import run_playbook
from gpucluster.lab.state import LabState
from gpucluster.layers import load_cluster
from gpucluster.model.cluster import Cluster
from gpucluster.model.powered import always_on
from gpucluster.rendering import render_files
from tests.conftest import REPO, SCRUBBED_ENV, readme_commands

# Image build (uncached ~1 min), seven containers, the playbook and the smoke jobs; measured 1-2.5 min.
LAB_UP_TIMEOUT = 900


@dataclass
class Lab:
    cluster: Cluster
    # `changed=` of the playbook run that built this lab (None when an existing lab was reused).
    first_changed: int | None
    # What building it printed: `lab up`'s output and the playbook's full log (None when reused).
    first_output: str | None = None

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

    @property
    def nodes_up(self) -> list[str]:
        """The compute nodes that are always on: not the power-saved ones (cluster.nodes[].power),
        which Slurm powers off when idle (an inventory with power-saved nodes has those)."""
        return always_on(self.cluster, self.cluster.hosts)

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


def ran(log: str, header: str) -> bool:
    """Whether a playbook log shows `TASK [role : name]` or `RUNNING HANDLER [role : name]`, the
    role named short or by its collection (gpucluster.cluster.role)."""
    kind, _, rest = header.partition(" [")
    return re.search(rf"{re.escape(kind)} \[(gpucluster\.cluster\.)?{re.escape(rest)}", log) is not None


@dataclass(frozen=True)
class Applied:
    """One run of `gpucluster apply`'s plan against the lab: its playbook, limit and full log."""

    playbook: str
    hosts: tuple[str, ...]
    tags: tuple[str, ...]
    log: str


def apply_change(old: Path, new: Path, extra: Sequence[str] = ()) -> list[Applied]:
    """What `gpucluster apply OLD NEW --inventory-dir NEW` runs (the same plan and actions), run
    against the lab with its vault and connection: each playbook limited to the hosts its steps
    change. `new` is the lab's generated inventory (inventory_dir), edited."""
    old_cluster, new_cluster = load_cluster(old), load_cluster(new)
    new_files = render_files(new_cluster)
    plan = make_plan(old_cluster, new_cluster, render_files(old_cluster), new_files)
    assert not plan.refused, plan.refused
    actions = apply_actions(old_cluster, new_cluster, plan, new_files)
    by_hand = [action for action in actions if isinstance(action, ByHand)]
    assert not by_hand, by_hand
    applied = []
    for action in actions:
        assert isinstance(action, Run)
        # Its options as `gpucluster apply` gives them (--limit, -e, --tags), after the playbook.
        options = [*action.argv(new)[4:], *extra]
        run = run_playbook(new, lambda message: None, playbook_path(action.playbook), extra=options)
        applied.append(
            Applied(action.playbook, action.hosts, action.tags, run.log.read_text(encoding="utf-8"))
        )
    return applied


def apply_back(edited: Path, source: Path = DEFAULT_INVENTORY) -> list[Applied]:
    """The lab's own inventory (`source`, the one it was brought up with) again, applied from the
    edited one the lab runs now (what lab.converge() does for every host, for only the hosts the
    change touches)."""
    with tempfile.TemporaryDirectory(prefix="gpucluster-applied-") as scratch:
        deployed = Path(scratch) / edited.name
        shutil.copytree(edited, deployed, symlinks=True)
        own = write_inventory(source, load_cluster(source))
        return apply_change(deployed, own)


def rows_a_lab_skips() -> set[str]:
    """`lab verify` rows no lab can pass, each said plainly as skipped: nccl-tests (not in the
    lab), the driver stack (the lab's GPUs are device files, no driver the inventory manages), the
    return-to-service gate (the lab's inventory sets no cluster.gate), and Pyxis unless GPUCLUSTER_PYXIS_SOURCES names its archives (test_containers.py runs the jobs)."""
    rows = {"nccl", "gpu-driver", "gpu-services", "gate"}
    if not os.environ.get("GPUCLUSTER_PYXIS_SOURCES"):
        rows.add("pyxis")
    return rows


def plain_gres(gres: str) -> str:
    """A GRES as sinfo or the REST API prints it, without the socket or index suffix of a
    gres.conf with Cores= (`gpu:h100:8(S:0)` -> `gpu:h100:8`)."""
    return re.sub(r"\((S|IDX):[^)]*\)", "", gres)


# What makes a lab its own, beside the session's: its prefix, subnet and state folder.
OWN_LAB = ("GPUCLUSTER_LAB_PREFIX", "GPUCLUSTER_LAB_SUBNET", "GPUCLUSTER_LAB_DIR")


def run_scrubbed(command: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """A README command, from the repository, with only what a fresh root shell has."""
    home = tempfile.mkdtemp(prefix="gpucluster-home-")
    # A second lab on this machine stays itself: its prefix, subnet and directory pass through.
    own = {k: v for k, v in os.environ.items() if k in (*OWN_LAB, "GPUCLUSTER_PYXIS_SOURCES")}
    try:
        return subprocess.run(
            ["bash", "-c", command],
            cwd=REPO,
            env={**SCRUBBED_ENV, **own, "HOME": home},
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    finally:
        shutil.rmtree(home, ignore_errors=True)


def inventory_for_release(source: Path, release: str, root: Path) -> Path:
    """A copy of the lab inventory `source` under `root`, targeting `release`."""
    inventory = root / source.name
    shutil.copytree(source, inventory)
    cluster_file = inventory / "group_vars" / "all" / "cluster.yml"
    text = cluster_file.read_text()
    assert '    version: "26.05"\n' in text
    cluster_file.write_text(text.replace('    version: "26.05"\n', f'    version: "{release}"\n'))
    return inventory


def lab_down_left_behind() -> None:
    """`lab down --left-behind` as a user runs it: a run killed mid-session (CI's time limit) took
    its state folder, not its lab."""
    proc = run_scrubbed(".venv/bin/gpucluster lab down --left-behind", timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@dataclass
class OwnLab:
    lab: Lab
    inventory: Path
    # What `lab up` printed (its smoke jobs included).
    up_output: str


@contextmanager
def own_lab_up(source: Path, release: str, root: Path, what: str) -> Iterator[OwnLab]:
    """The lab inventory `source` at `release`, brought up as a user would (`gpucluster lab up`,
    scrubbed) as a lab of its own (OWN_LAB must be set), and taken down afterwards."""
    missing = [name for name in OWN_LAB if not os.environ.get(name)]
    if missing:
        pytest.fail(f"{what} need a lab of their own: set {', '.join(missing)}")
    lab_down_left_behind()
    inventory = inventory_for_release(source, release, root)
    started = time.monotonic()
    proc = run_scrubbed(f".venv/bin/gpucluster lab up {inventory}", timeout=LAB_UP_TIMEOUT)
    if proc.returncode != 0:
        lab_down_left_behind()
        pytest.fail(f"lab up of Slurm {release} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    print(f"\nlab up of {source.name} at Slurm {release}: {time.monotonic() - started:.1f} s")
    changed = re.search(r"changed=(\d+)", proc.stdout)
    lab = Lab(load_cluster(inventory), int(changed.group(1)) if changed else None, proc.stdout)
    try:
        yield OwnLab(lab, inventory, proc.stdout + proc.stderr)
    finally:
        lab_down_left_behind()


@pytest.fixture(scope="session")
def lab_env() -> Iterator[Lab]:
    existing = LabState.load()
    reuse = existing is not None and bool(existing.containers)
    changed = None
    output = None
    if not reuse:
        lab_down_left_behind()
        proc = run_scrubbed(readme_commands().lab, timeout=LAB_UP_TIMEOUT)
        if proc.returncode != 0:
            run_scrubbed(".venv/bin/gpucluster lab down", timeout=300)
            pytest.fail(f"the README's lab command failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        # The smoke jobs `lab up` prints, and the playbook's change count.
        assert "$ srun" in proc.stdout and "CUDA_VISIBLE_DEVICES=" in proc.stdout, proc.stdout
        found = re.search(r"changed=(\d+)", proc.stdout)
        assert found, proc.stdout
        changed = int(found.group(1))
        output = proc.stdout + proc.stderr + (state_dir() / "ansible.log").read_text(encoding="utf-8")
    # A lab already up is tested as the inventory it was built from (a copy of the lab's with
    # power-saved nodes, say); a new one is the README's.
    source = (
        Path(existing.inventory)
        if reuse and existing is not None and existing.inventory
        else DEFAULT_INVENTORY
    )
    env = Lab(load_cluster(source), changed, output)
    yield env
    if not reuse:
        proc = run_scrubbed(".venv/bin/gpucluster lab down", timeout=300)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        # `lab down` leaves nothing of the lab behind.
        names = subprocess.run(
            ["podman", "ps", "-a", "--format", "{{.Names}}"],
            env=podman_env(),
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        assert not [n for n in names if n.startswith(f"{PREFIX}-")]
        netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
        assert f"{PREFIX}-" not in netns
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
