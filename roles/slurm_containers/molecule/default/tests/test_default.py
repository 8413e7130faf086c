"""slurm_containers on the Molecule container: crun is installed and each user has a lasting
/run/user/<uid> of their own, which a rootless crun of that user can use as its --root."""

from __future__ import annotations

import pytest


def test_crun_is_installed(host) -> None:
    assert host.package("crun").is_installed
    assert host.run("crun --version").rc == 0


@pytest.mark.parametrize(("user", "uid"), [("alice", 2001), ("bob", 2002)])
def test_each_user_has_a_runtime_directory_kept_by_systemd(host, user: str, uid: int) -> None:
    directory = host.file(f"/run/user/{uid}")
    assert directory.is_directory and directory.user == user and directory.mode == 0o700
    assert host.file(f"/var/lib/systemd/linger/{user}").exists
    # The user's rootless crun keeps its state there (the same --root oci.conf gives it).
    listed = host.run(f"su -s /bin/sh {user} -c 'crun --rootless=true --root=/run/user/{uid}/ list'")
    assert listed.rc == 0, listed.stderr
