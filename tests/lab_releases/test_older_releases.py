"""The lab at Slurm 24.11 and 22.05 (tests/lab/older_releases.py), beside the session's 26.05 lab.

One test that runs that file in a pytest process of its own, with a lab prefix, subnet and state
directory of its own: the README's test command schedules it on one worker while the other runs
the 26.05 lab's tests, so the two labs share the machine's time (the lab tests wait on jobs and
daemons much of theirs). Its output is the child session's, printed whole when it fails.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.lab

# Beside the 26.05 lab (gclab, 10.213.77.0/24) and the Molecule containers (no network).
PREFIX = "gcrel"
SUBNET = "10.213.79.0/24"
# Two labs (each brought up, checked and taken down), with room for a slow machine (the
# collector's metrics test waits up to about 6 min per lab at worst, about 1 min as a rule). They
# took 2,630 s in a whole suite run, and more than 2,700 s in one on a busier machine.
TIMEOUT = 3300
# Seven tests per release: six on each (shared GPUs included), then the upgrade of the 24.11 lab to
# 26.05 (its last test) and the fleet move on 22.05.
EXPECTED = 14


def test_the_older_releases_labs_pass() -> None:
    state = Path(tempfile.mkdtemp(prefix="gpucluster-older-labs-"))
    env = {
        **os.environ,
        "GPUCLUSTER_LAB_PREFIX": PREFIX,
        "GPUCLUSTER_LAB_SUBNET": SUBNET,
        "GPUCLUSTER_LAB_DIR": str(state / ".lab"),
    }
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "0", "-q", "-rA",
             "tests/lab/older_releases.py"],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired as exc:
        # The child session is gone with its fixtures' teardown: its lab goes here.
        subprocess.run([str(REPO / ".venv/bin/gpucluster"), "lab", "down"], cwd=REPO, env=env, check=False,
                       capture_output=True, timeout=300)  # fmt: skip
        pytest.fail(f"the older releases' labs took more than {TIMEOUT} s:\n{exc.stdout!r}")
    finally:
        shutil.rmtree(state, ignore_errors=True)
    output = proc.stdout + proc.stderr
    summary = output.strip().splitlines()[-1] if output.strip() else ""
    assert proc.returncode == 0, output
    assert re.search(rf"\b{EXPECTED} passed\b", summary) and not re.search(
        r"skipped|failed|error", summary
    ), output
