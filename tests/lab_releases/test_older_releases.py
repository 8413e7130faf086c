"""The lab at Slurm 24.11 and 22.05 (tests/lab/older_releases.py), beside the session's 26.05 lab.

One test that runs that file in a pytest process of its own, with a lab prefix, subnet and state
directory of its own: the README's test command schedules it on one worker while the other runs
the 26.05 lab's tests, so the two labs share the machine's time (the lab tests wait on jobs and
daemons much of theirs). Its output is the child session's, printed whole when it fails.
"""

from __future__ import annotations

import pytest

from .own_lab import run_own_lab

pytestmark = pytest.mark.lab

# Beside the 26.05 lab (gclab, 10.213.77.0/24) and the Molecule containers (no network).
PREFIX = "gcrel"
SUBNET = "10.213.79.0/24"
# Two labs (each brought up, checked and taken down), with room for a slow machine (the
# collector's metrics test waits up to about 6 min per lab at worst, about 1 min as a rule). They
# took 2,630 s in a whole suite run, and more than 2,700 s in one on a busier machine.
TIMEOUT = 3600
# Six tests on each release (shared GPUs included), then on 24.11 the gate and the upgrade to 26.05
# (its last test), on 22.05 the fleet move.
EXPECTED = 15


def test_the_older_releases_labs_pass() -> None:
    run_own_lab("tests/lab/older_releases.py", PREFIX, SUBNET, TIMEOUT, EXPECTED, "the older releases' labs")
