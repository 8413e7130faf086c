"""A flat apt repository of a few Debian packages and what they need beyond a given system,
fetched on this host from the Debian archive and cached by content.

Containers of the lab and of Molecule have no network, and the lab images must not carry every
package a role might install (driver userspace on a lab GPU node would give it an `nvidia-smi`
that fails). A scenario that installs such packages takes them from one of these repositories:
its closure is resolved against the container's own dpkg status, so the repository holds exactly
what that system lacks. The host's apt runs with a private configuration (its own sources, state,
cache; Debian's archive keyring), never the host's, and nothing is installed on the host.

    python -m gpucluster.lab.debrepo --suite trixie --status STATUS [--out DIR] nvidia-smi ...

prints the repository's directory (`deb [trusted=yes] file:DIR ./` in the container).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from gpucluster.lab.image import MIRROR
from gpucluster.lab.paths import state_dir

COMPONENTS = "main contrib non-free non-free-firmware"
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
# Bump when the steps below change.
RECIPE_VERSION = "1"


def repo_key(suite: str, packages: list[str], status: bytes) -> str:
    digest = hashlib.sha256()
    for part in (RECIPE_VERSION, suite, MIRROR, *sorted(packages)):
        digest.update(part.encode() + b"\n")
    digest.update(status)
    return f"{suite}-{digest.hexdigest()[:16]}"


def _apt(root: Path, status: Path, *args: str) -> None:
    options = {
        "Dir::Etc::SourceList": str(root / "sources.list"),
        "Dir::Etc::SourceParts": str(root / "none"),
        "Dir::Etc::Preferences": str(root / "none"),
        "Dir::Etc::PreferencesParts": str(root / "none"),
        "Dir::State": str(root / "state"),
        "Dir::State::status": str(status),
        "Dir::Cache": str(root / "cache"),
        "Dir::Log": str(root / "log"),
        "APT::Architecture": "amd64",
        "APT::Architectures": "amd64",
        "APT::Install-Recommends": "false",
        # The archive is a stored snapshot: testing's Release files expire quickly.
        "Acquire::Check-Valid-Until": "false",
        "Debug::NoLocking": "true",
        # Private directories root made: the _apt sandbox user could not write them.
        "APT::Sandbox::User": "root",
    }
    argv = ["apt-get", "-q", "-y"]
    for key, value in options.items():
        argv += ["-o", f"{key}={value}"]
    subprocess.run(
        [*argv, *args],
        check=True,
        env={**os.environ, "LC_ALL": "C", "DEBIAN_FRONTEND": "noninteractive"},
        stdout=subprocess.DEVNULL,
        timeout=1800,
    )


def build(suite: str, packages: list[str], status_file: Path, cache_dir: Path) -> Path:
    """The repository of `packages` for a system whose dpkg status is `status_file` (cached)."""
    status = status_file.read_bytes()
    target = cache_dir / repo_key(suite, packages, status)
    if (target / "Packages").is_file():
        return target
    cache_dir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".debrepo-", dir=cache_dir))
    try:
        for sub in ("state/lists/partial", "cache/archives/partial", "log", "none"):
            (work / sub).mkdir(parents=True, exist_ok=True)
        (work / "sources.list").write_text(
            f"deb [signed-by={KEYRING}] {MIRROR} {suite} {COMPONENTS}\n", encoding="utf-8"
        )
        status_copy = work / "status"
        status_copy.write_bytes(status)
        _apt(work, status_copy, "update")
        _apt(work, status_copy, "install", "--download-only", *packages)
        repo = work / "repo"
        repo.mkdir()
        debs = sorted((work / "cache/archives").glob("*.deb"))
        if not debs:
            raise RuntimeError(
                f"nothing to download: {' '.join(packages)} already installed per the status file"
            )
        for deb in debs:
            shutil.copy2(deb, repo / deb.name)
        scanned = subprocess.run(
            ["dpkg-scanpackages", "--multiversion", "."], cwd=repo, check=True, capture_output=True
        )
        (repo / "Packages").write_bytes(scanned.stdout)
        # Whole or not at all: the rename makes the cached repository appear complete.
        os.replace(repo, target)
        return target
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--suite", required=True)
    parser.add_argument("--status", required=True, type=Path, help="the target system's /var/lib/dpkg/status")
    parser.add_argument(
        "--out", type=Path, default=None, help="cache directory holding the repositories (default: the lab's)"
    )
    parser.add_argument("packages", nargs="+")
    args = parser.parse_args()
    print(build(args.suite, args.packages, args.status, args.out or state_dir() / "debrepo"))


if __name__ == "__main__":
    main()
