"""The lab image: Debian 12 from debootstrap with the roles' packages baked in, tagged by content hash.

Lab nodes have no route to a package mirror, so the image carries every package the roles
install; `ansible.builtin.apt` with state=present is then a no-op on the nodes. Nothing comes
from a registry: the root filesystem is built on the host and `podman import`ed.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from gpucluster.lab.paths import IMAGE_RECIPE_DIR, IMAGE_REPO, podman_env, state_dir
from gpucluster.lab.shell import LabError, run

SUITE = "bookworm"
MIRROR = os.environ.get("GPUCLUSTER_LAB_MIRROR", "http://deb.debian.org/debian")
# Services the roles enable themselves; disabled in the image so a fresh node boots quiet.
# (ssh: slurm_login enables it on login nodes only; nfs-server and rpcbind: the NFS server role.)
ROLE_SERVICES = (
    "munge",
    "slurmctld",
    "slurmd",
    "slurmdbd",
    "slurmrestd",
    "mariadb",
    "ssh",
    "nfs-server",
    "rpcbind",
)
# Bump when the build steps below change (the package list is hashed on its own).
RECIPE_VERSION = "6"

Progress = Callable[[str], None]


def package_list(recipe_dir: Path = IMAGE_RECIPE_DIR) -> list[str]:
    lines = (recipe_dir / "packages.txt").read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]


def image_tag(recipe_dir: Path = IMAGE_RECIPE_DIR) -> str:
    """`localhost/gpucluster-lab:<hash>`: the hash covers the suite, packages and build steps."""
    digest = hashlib.sha256()
    for part in (SUITE, RECIPE_VERSION, *package_list(recipe_dir)):
        digest.update(part.encode() + b"\n")
    return f"{IMAGE_REPO}:{digest.hexdigest()[:12]}"


def image_exists(tag: str) -> bool:
    return run(["podman", "image", "exists", tag], env=podman_env(), check=False).returncode == 0


def _in_root(rootfs: Path, *cmd: str) -> None:
    run(
        ["chroot", str(rootfs), *cmd],
        env={**os.environ, "DEBIAN_FRONTEND": "noninteractive", "LC_ALL": "C"},
        timeout=1800,
    )


def build_image(tag: str, progress: Progress) -> None:
    """debootstrap -> apt-get install the package list -> tidy -> podman import as `tag`."""
    work = state_dir() / "image-build"
    rootfs = work / "rootfs"
    if work.exists():
        shutil.rmtree(work)
    rootfs.mkdir(parents=True)
    try:
        progress(f"image: debootstrap {SUITE} (minbase)")
        run(["debootstrap", "--variant=minbase", SUITE, str(rootfs), MIRROR], timeout=1800)
        policy = rootfs / "usr/sbin/policy-rc.d"
        # Packages must not start daemons inside the build root.
        policy.write_text("#!/bin/sh\nexit 101\n", encoding="utf-8")
        policy.chmod(0o755)
        packages = package_list()
        progress(f"image: apt-get install {len(packages)} packages")
        # Maintainer scripts need /proc; it is unmounted before the tree is archived.
        proc = rootfs / "proc"
        run(["mount", "-t", "proc", "proc", str(proc)])
        try:
            _in_root(rootfs, "apt-get", "update", "-qq")
            _in_root(rootfs, "apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages)
            _in_root(rootfs, "apt-get", "clean")
            _in_root(rootfs, "systemctl", "disable", *(f"{name}.service" for name in ROLE_SERVICES))
            # Debian enables socket activation: systemd itself would listen on *:3306 on every lab
            # host, including those that never run MariaDB (the slurm_dbd role turns it off on its own).
            _in_root(rootfs, "systemctl", "disable", "mariadb.socket", "rpcbind.socket")
            # nfs-common's rpc_pipefs mount fails in a container (and the lab mounts no NFS): without
            # the mask every node would boot `degraded`.
            _in_root(rootfs, "systemctl", "mask", "run-rpc_pipefs.mount")
        finally:
            run(["umount", "-l", str(proc)], check=False)
        policy.unlink()
        # The munge role generates the cluster key; a key baked into the image would be shared.
        (rootfs / "etc/munge/munge.key").unlink(missing_ok=True)
        # Likewise sshd's host keys (openssh-server's install made them): slurm_login creates each host's own.
        for host_key in (rootfs / "etc/ssh").glob("ssh_host_*"):
            host_key.unlink()
        for lists in (rootfs / "var/lib/apt/lists").glob("*_*"):
            lists.unlink()
        progress(f"image: podman import {tag}")
        previous = run(
            ["podman", "image", "inspect", "--format", "{{.Id}}", tag], env=podman_env(), check=False
        )
        tar = subprocess.Popen(
            ["tar", "-C", str(rootfs), "--numeric-owner", "-c", "."], stdout=subprocess.PIPE
        )
        imported = subprocess.run(
            ["podman", "import", "--change", 'CMD ["/sbin/init"]', "-", tag],
            stdin=tar.stdout,
            env=podman_env(),
            capture_output=True,
            text=True,
            check=False,
        )
        if tar.stdout is not None:
            tar.stdout.close()
        if tar.wait() != 0 or imported.returncode != 0:
            raise LabError(f"podman import {tag} failed: {imported.stderr.strip()}")
        old_id = previous.stdout.strip()
        if previous.returncode == 0 and old_id and not imported.stdout.strip().endswith(old_id):
            # A rebuild moves the tag; drop the image it leaves untagged (kept if a container uses it).
            run(["podman", "rmi", old_id], env=podman_env(), check=False)
    finally:
        if not (rootfs / "proc" / "self").exists():
            shutil.rmtree(work, ignore_errors=True)


# Podman's image store is machine-wide, so is the lock: a lab and a Molecule run started together
# build the image once (the second waits, then finds it cached).
BUILD_LOCK = (
    Path("/run/lock" if Path("/run/lock").is_dir() else tempfile.gettempdir()) / "gpucluster-lab-image.lock"
)


@contextmanager
def _build_lock() -> Iterator[None]:
    with open(BUILD_LOCK, "a", encoding="utf-8") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def ensure_image(progress: Progress, rebuild: bool = False) -> tuple[str, bool]:
    """The image tag, building it unless cached; returns (tag, built)."""
    tag = image_tag()
    with _build_lock():
        if image_exists(tag) and not rebuild:
            progress(f"image: {tag} (cached)")
            return tag, False
        build_image(tag, progress)
    return tag, True


def main() -> None:
    """`python -m gpucluster.lab.image`: build the image unless cached, print its tag
    (with --containers-conf: print the containers.conf path podman must use)."""
    import sys

    if "--containers-conf" in sys.argv[1:]:
        print(podman_env()["CONTAINERS_CONF"])
        return
    tag, _ = ensure_image(lambda message: print(message, file=sys.stderr))
    print(tag)


if __name__ == "__main__":
    main()
