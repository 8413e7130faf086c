"""The README's commands as a new user runs them: `.venv/bin/gpucluster` from a root shell whose
PATH holds only the system directories, nothing activated. (The lab itself comes up this way in
tests/lab/conftest.py; .ci/run runs the test command this way.)"""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

from gpucluster.tools import bin_dir, venv_tool
from tests.conftest import REPO, SCRUBBED_ENV, InventoryFactory, readme_commands


def scrubbed(
    *command: str, extra: dict[str, str] | None = None, home: Path
) -> subprocess.CompletedProcess[str]:
    env = {**SCRUBBED_ENV, "HOME": str(home), **(extra or {})}
    return subprocess.run(
        command, cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False
    )


def test_ci_runs_the_readme_test_command_in_a_scrubbed_copy() -> None:
    commands = readme_commands()
    assert commands.lab == "bash scripts/setup.sh && .venv/bin/gpucluster lab up"
    assert commands.tests == "bash scripts/setup.sh && .venv/bin/python -m pytest"
    ci = (REPO / ".ci" / "run").read_text()
    assert f"readme_test_command='{commands.tests}'" in ci
    assert "env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin" in ci and "git clone" in ci


def test_gpucluster_runs_without_the_venv_on_path(tmp_path: Path) -> None:
    proc = scrubbed(str(bin_dir() / "gpucluster"), "validate", "inventories/lab", home=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "valid" in proc.stdout


def test_venv_tools_are_found_beside_the_interpreter_not_on_path(tmp_path: Path) -> None:
    # A decoy earlier on PATH must not be run.
    decoy = tmp_path / "bin"
    decoy.mkdir()
    (decoy / "ansible-vault").write_text("#!/bin/sh\necho decoy; exit 99\n")
    (decoy / "ansible-vault").chmod(0o755)
    code = "from gpucluster.tools import venv_tool; print(venv_tool('ansible-vault'))"
    proc = scrubbed(
        str(bin_dir() / "python"), "-c", code, extra={"PATH": f"{decoy}:/usr/bin:/bin"}, home=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(bin_dir() / "ansible-vault")
    assert Path(venv_tool("ansible-playbook")).parent == bin_dir()


def test_lab_vault_password_is_encrypted_with_a_scrubbed_path(tmp_path: Path) -> None:
    """The step that failed for a new user: `lab up` encrypting the database password."""
    target = tmp_path / "vault.yml"
    code = f"from gpucluster.lab.inventory import _vaulted_db_password as v; v(__import__('pathlib').Path({str(target)!r}))"
    proc = scrubbed(
        str(bin_dir() / "python"),
        "-c",
        code,
        extra={"GPUCLUSTER_LAB_DIR": str(tmp_path / "state")},
        home=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    text = target.read_text()
    assert "slurm_dbd_db_password: !vault |" in text and "$ANSIBLE_VAULT;1.1;AES256" in text
    assert oct(target.stat().st_mode & 0o777) == "0o600"


def test_a_missing_tool_is_named_with_the_fix(tmp_path: Path) -> None:
    # An interpreter outside any venv: there is no ansible-playbook beside it.
    code = textwrap.dedent(
        """
        import sys
        sys.executable = '/usr/bin/python3'
        from gpucluster.tools import ToolMissing, venv_tool
        try:
            venv_tool('ansible-playbook')
        except ToolMissing as exc:
            print(exc)
        """
    )
    proc = scrubbed(str(bin_dir() / "python"), "-c", code, home=tmp_path)
    assert "ansible-playbook: not installed beside /usr/bin/python3 (run scripts/setup.sh" in proc.stdout


def test_lab_status_when_nothing_was_built(tmp_path: Path) -> None:
    proc = scrubbed(
        str(bin_dir() / "gpucluster"),
        "lab",
        "status",
        extra={"GPUCLUSTER_LAB_DIR": str(tmp_path)},
        home=tmp_path,
    )
    assert proc.returncode == 1
    assert proc.stdout.strip() == "lab: absent (nothing built); run `gpucluster lab up`"
    assert "fatal" not in proc.stdout + proc.stderr


def test_lab_status_when_partly_built(tmp_path: Path, inventories: InventoryFactory) -> None:
    """A state file left by an `up` that stopped before the hosts existed: one line per missing
    piece, each with the command that fixes it, and no raw daemon output."""
    from tests.conftest import SMALL_CLUSTER, SMALL_HOSTS

    inventory = inventories.make(SMALL_HOSTS, SMALL_CLUSTER)
    state = tmp_path / "state"
    state.mkdir()
    (state / "state.json").write_text(f'{{"inventory": "{inventory}", "subnet": "10.213.77.0/24"}}\n')
    # In a network namespace of its own: the real lab may be up beside this test (its bridge
    # has the same name), and this machine must look as if the bridge was never made.
    proc = scrubbed(
        "unshare",
        "--net",
        "--",
        str(bin_dir() / "gpucluster"),
        "lab",
        "status",
        extra={"GPUCLUSTER_LAB_DIR": str(state)},
        home=tmp_path,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == f"lab: partly built from {inventory}"
    assert "  bridge gclab0 is missing: run `gpucluster lab up`" in lines
    for host in ("head", "n01", "n08"):
        assert f"  {host}: container gclab-{host} does not exist: run `gpucluster lab up`" in lines
    assert all(line.endswith("`") or line.endswith(")") for line in lines[1:])
    assert "fatal" not in proc.stdout + proc.stderr
