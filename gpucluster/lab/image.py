"""The lab images: one per Debian suite (bookworm 22.05, trixie 24.11, forky 26.05), each a
debootstrap root with the roles' packages baked in, tagged by content hash.

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

# The suite of the lab inventory's release (26.05), for callers that name none.
DEFAULT_SUITE = "forky"
# debootstrap scripts of suites the host's (Debian 12) debootstrap does not know by name.
DEBOOTSTRAP_SCRIPTS = {"forky": "/usr/share/debootstrap/scripts/sid"}
# The archive is a stored snapshot: a suite whose Release file is past its Valid-Until (testing's
# are short-lived) would be refused by apt.
APT_OPTIONS = ("-o", "Acquire::Check-Valid-Until=false")
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
    "sackd",
    "prometheus",
    "prometheus-alertmanager",
    "prometheus-node-exporter",
)
# Bump when the build steps below change (the package list is hashed on its own).
RECIPE_VERSION = "8"

Progress = Callable[[str], None]


def package_list(suite: str = DEFAULT_SUITE, recipe_dir: Path = IMAGE_RECIPE_DIR) -> list[str]:
    """The packages of `suite`'s image: every line without a suite list, and those naming it."""
    packages = []
    for raw in (recipe_dir / "packages.txt").read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, _, suites = line.partition("[")
        if not suites or suite in suites.rstrip("]").split():
            packages.append(name.strip())
    return packages


def image_tag(suite: str = DEFAULT_SUITE, recipe_dir: Path = IMAGE_RECIPE_DIR) -> str:
    """`localhost/gpucluster-lab:<suite>-<hash>`: the hash covers the suite, packages and build steps."""
    digest = hashlib.sha256()
    for part in (suite, RECIPE_VERSION, *package_list(suite, recipe_dir)):
        digest.update(part.encode() + b"\n")
    return f"{IMAGE_REPO}:{suite}-{digest.hexdigest()[:12]}"


def suite_of(release_name: str) -> str:
    """The Debian suite whose packages are Slurm `release_name` (the lab runs only those)."""
    from gpucluster.model.releases import PROVEN, RELEASES

    facts = RELEASES.get(release_name)
    suite = facts.packaging.debian_suite if facts else None
    if suite is None:
        raise LabError(
            f"the lab runs Slurm from Debian's packages only ({', '.join(PROVEN)}); "
            f"no Debian suite carries Slurm {release_name}"
        )
    return suite


def image_exists(tag: str) -> bool:
    return run(["podman", "image", "exists", tag], env=podman_env(), check=False).returncode == 0


def _in_root(rootfs: Path, *cmd: str) -> None:
    if cmd[0] == "apt-get":
        cmd = (cmd[0], *APT_OPTIONS, *cmd[1:])
    run(
        ["chroot", str(rootfs), *cmd],
        env={**os.environ, "DEBIAN_FRONTEND": "noninteractive", "LC_ALL": "C"},
        timeout=1800,
    )


def _has_unit(rootfs: Path, unit: str) -> bool:
    return any((rootfs / d / unit).exists() for d in ("lib/systemd/system", "usr/lib/systemd/system"))


def build_image(tag: str, suite: str, progress: Progress) -> None:
    """debootstrap -> apt-get install the package list -> tidy -> podman import as `tag`."""
    work = state_dir() / f"image-build-{suite}"
    rootfs = work / "rootfs"
    if work.exists():
        shutil.rmtree(work)
    rootfs.mkdir(parents=True)
    try:
        progress(f"image: debootstrap {suite} (minbase)")
        script = [DEBOOTSTRAP_SCRIPTS[suite]] if suite in DEBOOTSTRAP_SCRIPTS else []
        run(["debootstrap", "--variant=minbase", suite, str(rootfs), MIRROR, *script], timeout=1800)
        policy = rootfs / "usr/sbin/policy-rc.d"
        # Packages must not start daemons inside the build root.
        policy.write_text("#!/bin/sh\nexit 101\n", encoding="utf-8")
        policy.chmod(0o755)
        packages = package_list(suite)
        progress(f"image: apt-get install {len(packages)} packages")
        # Maintainer scripts need /proc; it is unmounted before the tree is archived.
        proc = rootfs / "proc"
        run(["mount", "-t", "proc", "proc", str(proc)])
        try:
            _in_root(rootfs, "apt-get", "update", "-qq")
            _in_root(rootfs, "apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages)
            _in_root(rootfs, "apt-get", "clean")
            units = [f"{name}.service" for name in ROLE_SERVICES if _has_unit(rootfs, f"{name}.service")]
            _in_root(rootfs, "systemctl", "disable", *units)
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


def ensure_image(progress: Progress, suite: str = DEFAULT_SUITE, rebuild: bool = False) -> tuple[str, bool]:
    """The image tag of `suite`, building it unless cached; returns (tag, built)."""
    tag = image_tag(suite)
    with _build_lock():
        if image_exists(tag) and not rebuild:
            progress(f"image: {tag} (cached)")
            return tag, False
        build_image(tag, suite, progress)
    return tag, True


def main() -> None:
    """`python -m gpucluster.lab.image [--release YY.MM]`: build the image of the release's Debian
    suite unless cached, print its tag (--containers-conf: print the containers.conf podman must use)."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(prog="python -m gpucluster.lab.image")
    parser.add_argument("--release", default=None, help="Slurm release (default: 26.05, Debian forky)")
    parser.add_argument("--containers-conf", action="store_true")
    args = parser.parse_args()
    if args.containers_conf:
        print(podman_env()["CONTAINERS_CONF"])
        return
    suite = suite_of(args.release) if args.release else DEFAULT_SUITE
    tag, _ = ensure_image(lambda message: print(message, file=sys.stderr), suite)
    print(tag)


if __name__ == "__main__":
    main()
