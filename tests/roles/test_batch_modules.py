"""paths_absent and user_runtime_dirs: one module call per host where the roles looped a task per
file or per user. Run through Ansible on localhost as a role would call them (the user_runtime_dirs
calls here change nothing on this machine: a user that does not exist, or check mode; the
slurm_containers Molecule scenario starts the units in a systemd container)."""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.conftest import REPO


def module(name: str, args: dict[str, Any], *options: str) -> dict[str, Any]:
    """One ad-hoc call of gpucluster.cluster.NAME on localhost, its result as JSON."""
    proc = subprocess.run(
        [
            str(Path(sys.executable).parent / "ansible"), "localhost", "-i", "localhost,", "-c", "local",
            "-e", "ansible_python_interpreter={{ ansible_playbook_python }}",
            "-m", f"gpucluster.cluster.{name}", "-a", json.dumps(args), *options,
        ],
        cwd=REPO, capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1", "ANSIBLE_STDOUT_CALLBACK": "json"},
    )  # fmt: skip
    out = json.loads(proc.stdout)
    [play] = out["plays"]
    [task] = play["tasks"]
    return dict(task["hosts"]["localhost"])


def test_paths_absent_removes_what_exists_once_and_says_which(tmp_path: Path) -> None:
    conf, gres, link = tmp_path / "slurm.conf", tmp_path / "gres.conf", tmp_path / "cgroup.conf"
    conf.write_text("ClusterName=x\n")
    gres.write_text("")
    link.symlink_to(tmp_path / "elsewhere")  # dangling: the link goes, nothing else is touched
    paths = [str(conf), str(gres), str(link), str(tmp_path / "never-there.conf")]

    first = module("paths_absent", {"paths": paths})
    assert first["changed"] is True and first["removed"] == [str(conf), str(gres), str(link)]
    assert not [path for path in paths if os.path.lexists(path)]
    again = module("paths_absent", {"paths": paths})
    assert again["changed"] is False and again["removed"] == []


def test_paths_absent_in_check_mode_removes_nothing(tmp_path: Path) -> None:
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=x\n")
    result = module("paths_absent", {"paths": [str(conf)]}, "--check")
    assert result["changed"] is True and result["removed"] == [str(conf)]
    assert conf.exists()


def test_paths_absent_refuses_a_directory_and_a_relative_path(tmp_path: Path) -> None:
    kept = tmp_path / "slurm.conf"
    kept.write_text("")
    result = module("paths_absent", {"paths": [str(kept), str(tmp_path)]})
    assert result.get("failed") is True and result["msg"] == f"refusing to remove a directory: {tmp_path}"
    assert kept.exists()  # nothing is removed when one path is refused
    relative = module("paths_absent", {"paths": ["etc/slurm/slurm.conf"]})
    assert relative.get("failed") is True and "paths must be absolute" in relative["msg"]


def test_user_runtime_dirs_names_the_users_the_host_lacks_and_writes_nothing(tmp_path: Path) -> None:
    linger = tmp_path / "linger"
    result = module(
        "user_runtime_dirs", {"users": ["root", "gpucluster-nobody-here"], "linger_dir": str(linger)}
    )
    assert result.get("failed") is True
    assert result["msg"] == (
        "no such user on this host: gpucluster-nobody-here (the users role creates them first)"
    )
    assert not linger.exists()


def test_user_runtime_dirs_in_check_mode_says_what_it_would_do(tmp_path: Path) -> None:
    linger = tmp_path / "linger"
    linger.mkdir()
    (linger / "root").write_text("")
    user = pwd.getpwuid(os.getuid()).pw_name
    result = module("user_runtime_dirs", {"users": [user, user], "linger_dir": str(linger)}, "--check")
    # Lingering already (its file is there): only the unit is left to check, which no host here
    # runs for this test (the host's systemd, where there is one, is only asked is-active).
    assert result["lingering"] == ([] if user == "root" else [user])
    assert result["changed"] is bool(result["lingering"] or result["started"])
    assert set(result["started"]) <= {f"user-runtime-dir@{os.getuid()}.service"}
    assert sorted(p.name for p in linger.iterdir()) == ["root"]
