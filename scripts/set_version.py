"""Set the project's version: gpucluster/__init__.py (the one place the package, its wheel and
`gpucluster --version` read) and the two files that cannot read it, galaxy.yml (the collection's
version) and requirements.txt (the collection's gpucluster pin). With --release, CHANGELOG.md's
`[Unreleased]` section becomes the version's, dated today, under a new empty `[Unreleased]`.

    python scripts/set_version.py 0.2.0 [--release]
    python scripts/set_version.py --check     # exit 1 if the three files disagree

tests/packaging checks that the wheel, the built collection and `gpucluster --version` agree.
"""

from __future__ import annotations

import argparse
import datetime
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
INIT = REPO / "gpucluster" / "__init__.py"
GALAXY = REPO / "galaxy.yml"
REQUIREMENTS = REPO / "requirements.txt"
CHANGELOG = REPO / "CHANGELOG.md"
VERSION = re.compile(r"\d+\.\d+\.\d+")
# (file, pattern whose group 2 is the version)
PLACES = (
    (INIT, re.compile(r'^(__version__ = ")([^"]+)(")$', re.MULTILINE)),
    (GALAXY, re.compile(r"^(version: )(\S+)()$", re.MULTILINE)),
    (REQUIREMENTS, re.compile(r"^(gpucluster==)(\S+)()$", re.MULTILINE)),
)


def versions() -> dict[Path, str]:
    found: dict[Path, str] = {}
    for path, pattern in PLACES:
        match = pattern.search(path.read_text(encoding="utf-8"))
        if match is None:
            raise SystemExit(f"set_version: no version line in {path.relative_to(REPO)}")
        found[path] = match.group(2)
    return found


def set_version(version: str) -> None:
    for path, pattern in PLACES:
        text = path.read_text(encoding="utf-8")
        path.write_text(pattern.sub(lambda m: f"{m.group(1)}{version}{m.group(3)}", text, count=1), "utf-8")


def release(version: str) -> None:
    text = CHANGELOG.read_text(encoding="utf-8")
    if "## [Unreleased]" not in text:
        raise SystemExit("set_version: CHANGELOG.md has no [Unreleased] section")
    today = datetime.date.today().isoformat()
    text = text.replace("## [Unreleased]", f"## [Unreleased]\n\n## [{version}] - {today}", 1)
    CHANGELOG.write_text(text, encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("version", nargs="?", help="The new version, MAJOR.MINOR.PATCH.")
    parser.add_argument("--release", action="store_true", help="Also date the CHANGELOG section.")
    parser.add_argument("--check", action="store_true", help="Only check that the files agree.")
    args = parser.parse_args()
    if args.check:
        found = versions()
        if len(set(found.values())) != 1:
            listing = ", ".join(f"{p.relative_to(REPO)}: {v}" for p, v in found.items())
            print(f"set_version: the versions disagree ({listing})", file=sys.stderr)
            sys.exit(1)
        print(next(iter(found.values())))
        return
    if not args.version or not VERSION.fullmatch(args.version):
        parser.error("give the new version as MAJOR.MINOR.PATCH")
    set_version(args.version)
    if args.release:
        release(args.version)
    print(f"version {args.version}: " + ", ".join(str(p.relative_to(REPO)) for p, _ in PLACES))


if __name__ == "__main__":
    main()
