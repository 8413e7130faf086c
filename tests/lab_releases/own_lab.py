"""A file of lab tests run in a pytest process of its own, with a lab prefix, subnet and state
directory of its own, so that its lab runs beside the session's (and each driver's beside the
others'). Its output is the child session's, returned whole to print when it fails."""

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


def run_own_lab(test_file: str, prefix: str, subnet: str, timeout: float, expected: int, what: str) -> str:
    """Run `test_file` with `-n 0` in its own lab; fail unless exactly `expected` tests passed
    (none skipped, failed or in error) within `timeout` seconds. Returns the child's output."""
    state = Path(tempfile.mkdtemp(prefix=f"gpucluster-{prefix}-"))
    env = {
        **os.environ,
        "GPUCLUSTER_LAB_PREFIX": prefix,
        "GPUCLUSTER_LAB_SUBNET": subnet,
        "GPUCLUSTER_LAB_DIR": str(state / ".lab"),
    }
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "0", "-q", "-rA", "-s", test_file],
            cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout, check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired as exc:
        # The child session is gone with its fixtures' teardown: its lab goes here.
        subprocess.run([str(REPO / ".venv/bin/gpucluster"), "lab", "down", "--left-behind"], cwd=REPO, env=env,
                       check=False, capture_output=True, timeout=300)  # fmt: skip
        pytest.fail(f"{what} took more than {timeout:.0f} s:\n{exc.stdout!r}")
    finally:
        shutil.rmtree(state, ignore_errors=True)
    output = proc.stdout + proc.stderr
    summary = output.strip().splitlines()[-1] if output.strip() else ""
    assert proc.returncode == 0, output
    assert re.search(rf"\b{expected} passed\b", summary) and not re.search(
        r"skipped|failed|error", summary
    ), output
    return output
