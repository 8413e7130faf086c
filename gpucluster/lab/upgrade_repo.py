"""An apt repository of a newer Slurm release's packages, for upgrading a lab in place.

The lab's nodes have no route to a package mirror (their image carries everything), so an upgrade
(24.11 on trixie -> 26.05 from forky) needs the new packages somewhere the nodes can read: a
copy of the older image's root filesystem, with the newer suite's sources added, downloads the
Slurm packages the image has and whatever they need on top of it (`apt-get install
--download-only -t forky`); they are indexed (dpkg-scanpackages) and signed with a key of the
repository's own into a Debian repository on the host, cached by what it was made from. A real
site points `cluster.slurm.packages.repository` at SchedMD-built or its own packages instead.

`python -m gpucluster.lab.upgrade_repo --from 24.11 --to 26.05` builds it (unless cached) and
prints its directory (the key is `key.asc` there, the suite `gpucluster-slurm-<release>`).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from gpucluster.lab import image
from gpucluster.lab.paths import podman_env
from gpucluster.lab.shell import LabError, run
from gpucluster.model.releases import release

# Binary packages of Slurm's source package; the versioned libraries come through the dependencies.
SLURM_PACKAGE_PATTERNS = ("slurm*", "sackd", "libpam-slurm*", "libslurm-dev", "libpmi*-dev")
VERSIONED_LIBRARY_PREFIXES = ("libslurm", "libpmi")


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gpucluster" / "lab-repos"


def suite_name(target: str) -> str:
    return f"gpucluster-slurm-{target}"


def _chroot(rootfs: Path, *cmd: str) -> subprocess.CompletedProcess[str]:
    return run(
        ["chroot", str(rootfs), *cmd],
        env={**os.environ, "DEBIAN_FRONTEND": "noninteractive", "LC_ALL": "C"},
        timeout=1800,
    )


def _installed_slurm_packages(rootfs: Path) -> list[str]:
    proc = _chroot(rootfs, "dpkg-query", "-W", "-f", "${Package} ${Status}\\n", *SLURM_PACKAGE_PATTERNS)
    names = [line.split()[0] for line in proc.stdout.splitlines() if line.endswith("installed")]
    return sorted(
        n for n in names if not (n.startswith(VERSIONED_LIBRARY_PREFIXES) and not n.endswith("-dev"))
    )


def _release_file(directory: Path, suite: str) -> str:
    lines = [
        "Origin: gpucluster-lab",
        "Label: gpucluster-lab",
        f"Suite: {suite}",
        f"Codename: {suite}",
        f"Date: {time.strftime('%a, %d %b %Y %H:%M:%S UTC', time.gmtime())}",
        "Architectures: amd64",
        "Components: main",
        "SHA256:",
    ]
    for path in sorted((directory / "main").rglob("*")):
        if path.is_file():
            data = path.read_bytes()
            lines.append(f" {hashlib.sha256(data).hexdigest()} {len(data)} {path.relative_to(directory)}")
    return "\n".join(lines) + "\n"


def _sign(repo: Path, release_path: Path) -> None:
    """A key of the repository's own (no passphrase: it signs this repository only, once)."""
    home = Path(tempfile.mkdtemp(prefix="gpucluster-repo-gpg-"))
    try:
        env = {**os.environ, "GNUPGHOME": str(home)}
        home.chmod(0o700)
        gpg = ["gpg", "--batch", "--pinentry-mode", "loopback", "--passphrase", ""]
        run([*gpg, "--quick-gen-key", "gpucluster lab repository", "ed25519", "sign", "never"], env=env)
        (repo / "key.asc").write_text(run([*gpg, "--armor", "--export"], env=env).stdout, encoding="utf-8")
        run([*gpg, "--clearsign", "-o", str(release_path.parent / "InRelease"), str(release_path)], env=env)
    finally:
        shutil.rmtree(home, ignore_errors=True)


def ensure_repo(source: str, target: str, progress: image.Progress = print) -> Path:
    """The repository of `target`'s packages for hosts of `source`'s image (built unless cached)."""
    from_suite, to_suite = image.suite_of(source), image.suite_of(target)
    tag, _ = image.ensure_image(progress, from_suite)
    key = hashlib.sha256(f"{tag} {to_suite} {image.MIRROR} {SLURM_PACKAGE_PATTERNS}".encode()).hexdigest()[
        :12
    ]
    repo = cache_root() / f"{from_suite}-{to_suite}-{key}"
    if (repo / "dists" / suite_name(target) / "InRelease").exists():
        progress(f"repository: {repo} (cached)")
        return repo
    work = cache_root() / f"build-{key}"
    shutil.rmtree(work, ignore_errors=True)
    rootfs = work / "rootfs"
    rootfs.mkdir(parents=True)
    try:
        progress(f"repository: a copy of {tag}'s root filesystem")
        mounted = run(["podman", "image", "mount", tag], env=podman_env()).stdout.strip()
        try:
            run(["cp", "-a", f"{mounted}/.", str(rootfs)], timeout=1800)
        finally:
            run(["podman", "image", "unmount", tag], env=podman_env(), check=False)
        packages = _installed_slurm_packages(rootfs)
        shutil.copy("/etc/resolv.conf", rootfs / "etc/resolv.conf")
        (rootfs / "etc/apt/sources.list.d" / f"{to_suite}.sources").write_text(
            f"Types: deb\nURIs: {image.MIRROR}\nSuites: {to_suite}\nComponents: main\n", encoding="utf-8"
        )
        archives = rootfs / "var/cache/apt/archives"
        for old in archives.glob("*.deb"):
            old.unlink()
        progress(f"repository: apt-get install --download-only -t {to_suite} {' '.join(packages)}")
        proc_dir = rootfs / "proc"
        run(["mount", "-t", "proc", "proc", str(proc_dir)])
        try:
            opts = ("-o", "Acquire::Check-Valid-Until=false", "-q")
            _chroot(rootfs, "apt-get", *opts, "update")
            _chroot(rootfs, "apt-get", *opts, "install", "-y", "--download-only", "--no-install-recommends",
                    "-t", to_suite, *packages)  # fmt: skip
        finally:
            run(["umount", str(proc_dir)], check=False)
        debs = sorted(archives.glob("*.deb"))
        if not debs:
            raise LabError(f"no package of {to_suite} was downloaded for {', '.join(packages)}")
        building = work / "repo"
        pool = building / "pool"
        pool.mkdir(parents=True)
        for deb in debs:
            shutil.copy2(deb, pool / deb.name)
        dist = building / "dists" / suite_name(target)
        binary = dist / "main" / "binary-amd64"
        binary.mkdir(parents=True)
        index = subprocess.run(
            ["dpkg-scanpackages", "--multiversion", "pool", "/dev/null"],
            cwd=building, capture_output=True, text=True, check=True, timeout=600,
        ).stdout  # fmt: skip
        (binary / "Packages").write_text(index, encoding="utf-8")
        release_path = dist / "Release"
        release_path.write_text(_release_file(dist, suite_name(target)), encoding="utf-8")
        _sign(building, release_path)
        shutil.rmtree(repo, ignore_errors=True)
        building.rename(repo)
        progress(f"repository: {len(debs)} packages of {to_suite} in {repo}")
        return repo
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    import argparse
    import sys

    parser = argparse.ArgumentParser(prog="python -m gpucluster.lab.upgrade_repo")
    parser.add_argument("--from", dest="source", required=True, help="release the lab runs (e.g. 24.11)")
    parser.add_argument("--to", dest="target", required=True, help="release to upgrade to (e.g. 26.05)")
    args = parser.parse_args()
    release(args.target)  # a release gpucluster knows
    print(ensure_repo(args.source, args.target, lambda message: print(message, file=sys.stderr)))


if __name__ == "__main__":
    main()
