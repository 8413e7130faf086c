"""The package as users install it: a wheel built from the clone and installed into a fresh
virtualenv outside it validates, shows, renders and plans every example inventory, copied
elsewhere, byte-identical to the clone's editable install, and carries all its package data."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

from gpucluster import __version__
from gpucluster.layers import load_cluster
from gpucluster.model.base import Owner
from tests.conftest import INVENTORIES, REPO, example_inventories
from tests.packaging.conftest import Installed, clone_files

DRIVER = Path(__file__).with_name("run_commands.py")
# Files of the package directory that are documentation, not read at run time.
NOT_PACKAGE_DATA = {".md"}


def commands() -> list[list[str]]:
    """Every example (copied under inv/): validate, show, render (twice: the second writes
    nothing), plan against itself and against the lab, each as text and as JSON."""
    argv: list[list[str]] = [["--version", "--json"], ["schema"], ["schema", "--markdown"]]
    for example in example_inventories():
        inv, out = f"inv/{example}", f"out/{example}"
        argv += [
            ["validate", inv],
            ["validate", "--json", inv],
            ["show", inv],
            ["show", "--json", inv],
            ["render", inv, "--out", out],
            ["render", "--json", inv, "--out", out],
            ["plan", inv, inv],
            ["plan", "--json", "inv/lab", inv],
        ]
    return argv


def run_examples(python: Path, workdir: Path) -> dict[str, Any]:
    """The examples copied to workdir/inv, every command run there by `python`'s gpucluster."""
    shutil.copytree(INVENTORIES, workdir / "inv")
    (workdir / "commands.json").write_text(json.dumps(commands()))
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env["XDG_CACHE_HOME"] = str(workdir / "cache")
    proc = subprocess.run(
        [str(python), str(DRIVER), "commands.json", "results.json"],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc: dict[str, Any] = json.loads((workdir / "results.json").read_text())
    return doc


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_every_example_works_from_the_wheel_byte_identical_to_the_clone(
    installed_wheel: Installed, tmp_path: Path
) -> None:
    wheel = run_examples(installed_wheel.python, tmp_path / "wheel")
    clone = run_examples(Path(sys.executable), tmp_path / "clone")
    # Each ran its own gpucluster: the fresh virtualenv's, and the clone's editable install.
    assert Path(wheel["gpucluster"]).is_relative_to(installed_wheel.venv)
    assert Path(clone["gpucluster"]).is_relative_to(REPO)
    for from_wheel, from_clone in zip(wheel["results"], clone["results"], strict=True):
        # Planned from the lab (26.05), an example at an older release is a downgrade: refused, exit 2.
        refused = from_wheel["argv"][:2] == ["plan", "--json"] and json.loads(
            from_wheel["stdout"] or "{}"
        ).get("refused")
        assert from_wheel["code"] == (2 if refused else 0), from_wheel
        assert from_wheel == from_clone
    wheel_tree, clone_tree = tree(tmp_path / "wheel" / "out"), tree(tmp_path / "clone" / "out")
    assert wheel_tree == clone_tree
    # What the issue saw fail (TemplateNotFound): every example with bare-metal Slurm has its files.
    slurm = {name.split("/")[0] for name in wheel_tree if name.endswith("/slurm/slurm.conf")}
    assert slurm == {
        example
        for example in example_inventories()
        if load_cluster(INVENTORIES / example).hosts_owned_by(Owner.SLURM)
    }
    assert {"lab", "superpod", "nvl72"} <= slurm


def test_the_wheel_holds_every_file_the_package_reads(installed_wheel: Installed) -> None:
    with zipfile.ZipFile(installed_wheel.wheel) as wheel:
        names = set(wheel.namelist())
    package = [
        rel.as_posix()
        for rel in clone_files()
        if rel.parts[0] == "gpucluster" and rel.suffix not in NOT_PACKAGE_DATA
    ]
    missing = sorted(set(package) - names)
    assert not missing, missing
    # Nothing else of the clone: no tests, roles or inventories in the wheel.
    assert not [n for n in names if not n.startswith(("gpucluster/", "gpucluster-"))]


def test_the_installed_program(installed_wheel: Installed, tmp_path: Path) -> None:
    """The `gpucluster` program of the fresh virtualenv, from a directory outside the clone."""
    shutil.copytree(INVENTORIES / "lab", tmp_path / "lab")

    def program(*args: str) -> subprocess.CompletedProcess[str]:
        env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
        env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
        return subprocess.run(
            [str(installed_wheel.program), *args],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )

    assert program("--version").stdout == f"gpucluster {__version__}\n"
    rendered = program("render", "lab", "--out", "out")
    assert rendered.returncode == 0, rendered.stderr
    assert (tmp_path / "out" / "slurm" / "slurm.conf").is_file()
    invalid = program("validate", "missing")
    assert invalid.returncode == 2 and invalid.stderr.endswith("1 problem(s) found\n")
    completion = program("completion", "bash")
    assert completion.returncode == 0 and "_shtab_gpucluster" in completion.stdout
    # verify's playbook and the health check program, from the installed package.
    paths = subprocess.run(
        [
            str(installed_wheel.python),
            "-c",
            "from gpucluster.verify.collect import VERIFY_PLAYBOOK; from gpucluster.render.health import program_path;"
            "print(VERIFY_PLAYBOOK); print(program_path())",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert all(Path(p).is_file() and Path(p).is_relative_to(installed_wheel.venv) for p in paths), paths


def test_the_wheel_carries_the_project_version(installed_wheel: Installed) -> None:
    assert installed_wheel.wheel.name.startswith(f"gpucluster-{__version__}-")
    with zipfile.ZipFile(installed_wheel.wheel) as wheel:
        metadata = wheel.read(f"gpucluster-{__version__}.dist-info/METADATA").decode()
    assert f"\nVersion: {__version__}\n" in metadata
