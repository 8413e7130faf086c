"""What users install, built once per session: the wheel (in a fresh virtualenv outside the clone)
and the Ansible collection (installed into an empty collections path). tests/conftest.py keeps
this directory on one pytest-xdist worker, so each is built once."""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from gpucluster.tools import venv_tool
from tests.conftest import REPO

NAMESPACE, NAME = "gpucluster", "cluster"


def clone_files() -> list[Path]:
    """The clone's files as git sees them: tracked, and new ones not ignored (no build/ leftovers)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    return [Path(os.fsdecode(name)) for name in listed if name and (REPO / os.fsdecode(name)).exists()]


def copy_clone(target: Path) -> Path:
    for rel in clone_files():
        source = REPO / rel
        (target / rel).parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            (target / rel).symlink_to(os.readlink(source))
        else:
            shutil.copy2(source, target / rel)
    return target


@dataclass(frozen=True)
class Installed:
    wheel: Path
    venv: Path

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def program(self) -> Path:
        return self.venv / "bin" / "gpucluster"


def pinned_distributions() -> str:
    """Every distribution of the project's virtualenv at its version: the fresh virtualenv gets the
    same jinja2, pydantic, ... (a renderer's bytes must not differ because a dependency did)."""
    pins = {
        dist.metadata["Name"].lower(): dist.version
        for dist in importlib.metadata.distributions()
        if dist.metadata["Name"] and dist.metadata["Name"].lower() != "gpucluster"
    }
    return "".join(f"{name}=={version}\n" for name, version in sorted(pins.items()))


@pytest.fixture(scope="session")
def installed_wheel(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """`pip wheel` of a copy of the clone, installed with its dependencies (from the package index,
    at the project virtualenv's versions) into a new virtualenv that cannot see the clone."""
    work = tmp_path_factory.mktemp("wheel")
    source = copy_clone(work / "source")
    dist = work / "dist"
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"}
    env.pop("PYTHONPATH", None)
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-w",
            str(dist),
            str(source),
        ],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = dist.glob("gpucluster-*.whl")
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
    constraints = work / "constraints.txt"
    constraints.write_text(pinned_distributions())
    install = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-c", str(constraints), str(wheel)],
        capture_output=True,
        text=True,
        env=env,
        cwd=work,
        check=False,
    )
    assert install.returncode == 0, install.stdout[-3000:] + install.stderr[-3000:]
    return Installed(wheel, venv)


@dataclass(frozen=True)
class Collection:
    tarball: Path
    # The collections path it is installed in (holding ansible_collections/gpucluster/cluster).
    path: Path
    home: Path

    @property
    def root(self) -> Path:
        return self.path / "ansible_collections" / NAMESPACE / NAME

    def env(self) -> dict[str, str]:
        """Ansible sees this collections path only (and the `ansible` package's collections), no
        ansible.cfg of the clone, and a home of its own."""
        env = {key: value for key, value in os.environ.items() if not key.startswith("ANSIBLE_")}
        env.update(
            ANSIBLE_COLLECTIONS_PATH=str(self.path),
            HOME=str(self.home),
            XDG_CACHE_HOME=str(self.home / ".cache"),
            ANSIBLE_NOCOLOR="1",
            PATH=f"{Path(sys.executable).parent}:{env.get('PATH', '')}",
        )
        return env


@pytest.fixture(scope="session")
def installed_collection(tmp_path_factory: pytest.TempPathFactory) -> Collection:
    """`ansible-galaxy collection build` of the clone, installed into an empty collections path
    (--no-deps: Galaxy is not reachable here; the collections it depends on come with the
    `ansible` package, test_collection checks their versions)."""
    work = tmp_path_factory.mktemp("collection")
    built = subprocess.run(
        [venv_tool("ansible-galaxy"), "collection", "build", "--output-path", str(work / "dist"), str(REPO)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    (tarball,) = (work / "dist").glob(f"{NAMESPACE}-{NAME}-*.tar.gz")
    home = work / "home"
    home.mkdir()
    path = work / "collections"
    path.mkdir()
    collection = Collection(tarball, path, home)
    install = subprocess.run(
        [venv_tool("ansible-galaxy"), "collection", "install", "--no-deps", "-p", str(path), str(tarball)],
        capture_output=True,
        text=True,
        cwd=work,
        env=collection.env(),
        check=False,
    )
    assert install.returncode == 0, install.stdout + install.stderr
    assert (collection.root / "MANIFEST.json").is_file(), install.stdout
    return collection
