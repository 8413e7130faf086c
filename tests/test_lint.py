"""The house rules as tests: ruff, mypy --strict on gpucluster/, yamllint, ansible-lint (production)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gpucluster.tools import ToolMissing, venv_env, venv_tool
from tests.conftest import REPO


def run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=REPO, env=venv_env(), capture_output=True, text=True, check=False)


def tool(name: str) -> str:
    # The project's virtualenv, never whatever PATH holds.
    try:
        return venv_tool(name)
    except ToolMissing as exc:
        pytest.fail(str(exc))


def test_ruff_check() -> None:
    proc = run(tool("ruff"), "check", ".")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ruff_format() -> None:
    proc = run(tool("ruff"), "format", "--check", ".")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_mypy_strict() -> None:
    proc = run(sys.executable, "-m", "mypy")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_yamllint() -> None:
    proc = run(tool("yamllint"), "--strict", ".")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ansible_lint_production_profile() -> None:
    if not (REPO / "roles").is_dir() or not any((REPO / "roles").iterdir()):
        pytest.fail("no roles to lint")
    # verify.yml: the playbook `gpucluster verify` runs, package data of gpucluster.verify.
    proc = run(
        tool("ansible-lint"),
        "--profile",
        "production",
        "--offline",
        "roles",
        "playbooks",
        "gpucluster/verify/verify.yml",
        # The collection's metadata (the galaxy rule: version, changelog, runtime.yml).
        "galaxy.yml",
        "meta",
    )
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-3000:]
