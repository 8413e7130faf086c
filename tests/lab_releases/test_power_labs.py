"""Power saving in the lab (tests/lab/power_saving.py) at 26.05 and 24.11, as a lab of its own.

One test that runs that file in a pytest process of its own with a lab prefix, subnet and state
directory of its own (beside the session's lab and the older releases' lab). Not yet part of the
README's test command: its two labs add some 20 minutes to a suite that must first get faster
(issue 41). Run it with GPUCLUSTER_POWER_LABS=1:

    GPUCLUSTER_POWER_LABS=1 .venv/bin/python -m pytest -n0 -s tests/lab_releases/test_power_labs.py
"""

from __future__ import annotations

import os

import pytest

from .own_lab import run_own_lab

pytestmark = [
    pytest.mark.lab,
    pytest.mark.skipif(
        not os.environ.get("GPUCLUSTER_POWER_LABS"),
        reason="the power-saving labs run with GPUCLUSTER_POWER_LABS=1 (not yet in the suite's time)",
    ),
]

# Beside the 26.05 lab (gclab, 10.213.77.0/24) and the older releases' (gcrel, 10.213.79.0/24).
PREFIX = "gcpow"
SUBNET = "10.213.81.0/24"
# Two labs of four hosts and a BMC: 1,298 s beside a whole suite run (nice 10).
TIMEOUT = 2700
# Five tests per release.
EXPECTED = 10


def test_the_power_saving_labs_pass() -> None:
    print(
        run_own_lab("tests/lab/power_saving.py", PREFIX, SUBNET, TIMEOUT, EXPECTED, "the power-saving labs")
    )
