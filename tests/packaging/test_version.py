"""One version: gpucluster/__init__.py's, which the wheel, `gpucluster --version` and the built
collection carry; scripts/set_version.py writes it where it cannot be read from; the CHANGELOG
keeps the Keep a Changelog format."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import yaml

from gpucluster import __version__
from tests.conftest import REPO
from tests.packaging.conftest import Collection, Installed, copy_clone

SECTIONS = {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}


def test_the_wheel_the_collection_and_the_program_agree(
    installed_wheel: Installed, installed_collection: Collection
) -> None:
    with zipfile.ZipFile(installed_wheel.wheel) as wheel:
        (metadata,) = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
        wheel_version = re.search(r"^Version: (\S+)$", wheel.read(metadata).decode(), re.MULTILINE)
    assert wheel_version
    program = subprocess.run(
        [str(installed_wheel.program), "--version"], capture_output=True, text=True, check=True
    )
    manifest = json.loads((installed_collection.root / "MANIFEST.json").read_text())
    versions = {
        "wheel": wheel_version.group(1),
        "gpucluster --version": program.stdout.removeprefix("gpucluster ").strip(),
        "collection": manifest["collection_info"]["version"],
        "collection's requirements.txt": re.findall(
            r"^gpucluster==(\S+)$", (installed_collection.root / "requirements.txt").read_text(), re.MULTILINE
        )[0],
        "gpucluster/__init__.py": __version__,
    }
    assert set(versions.values()) == {__version__}, versions


def test_set_version_writes_every_place_and_checks_them(tmp_path: Path) -> None:
    check = subprocess.run(
        [sys.executable, "scripts/set_version.py", "--check"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert (check.returncode, check.stdout) == (0, f"{__version__}\n"), check.stderr
    copy = copy_clone(tmp_path / "clone")
    script = [sys.executable, str(copy / "scripts" / "set_version.py")]
    subprocess.run([*script, "9.8.7", "--release"], capture_output=True, check=True)
    assert '__version__ = "9.8.7"' in (copy / "gpucluster" / "__init__.py").read_text()
    assert yaml.safe_load((copy / "galaxy.yml").read_text())["version"] == "9.8.7"
    assert "\ngpucluster==9.8.7\n" in (copy / "requirements.txt").read_text()
    released = changelog_versions((copy / "CHANGELOG.md").read_text())
    assert released[:2] == ["Unreleased", "9.8.7"]
    assert (
        subprocess.run([*script, "--check"], capture_output=True, text=True, check=True).stdout == "9.8.7\n"
    )
    (copy / "requirements.txt").write_text("gpucluster==1.0.0\n")
    assert subprocess.run([*script, "--check"], capture_output=True, check=False).returncode == 1


def changelog_versions(text: str) -> list[str]:
    return re.findall(r"^## \[([^\]]+)\]", text, re.MULTILINE)


def test_the_changelog_keeps_its_format() -> None:
    text = (REPO / "CHANGELOG.md").read_text()
    assert text.startswith("# Changelog\n")
    versions = changelog_versions(text)
    assert versions[0] == "Unreleased"
    released = re.findall(r"^## \[(\d+\.\d+\.\d+)\] - (\d{4}-\d{2}-\d{2})$", text, re.MULTILINE)
    assert [v for v, _ in released] == versions[1:], "a released section without its date"
    keys = [tuple(int(n) for n in v.split(".")) for v, _ in released]
    assert keys == sorted(keys, reverse=True), "newest first"
    assert set(re.findall(r"^### (.+)$", text, re.MULTILINE)) <= SECTIONS
    # The version the package carries is not older than a released one (release bumps it first).
    current = tuple(int(n) for n in __version__.split("."))
    assert all(current >= key for key in keys)
