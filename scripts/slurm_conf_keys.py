#!/usr/bin/env python3
"""Regenerate gpucluster/slurm/conf_keys.py: the slurm.conf keys of every Slurm release gpucluster knows
(the global parameters, and those of NodeName and PartitionName lines), and the cgroup.conf keys.

Reads a git clone of SchedMD's Slurm (https://github.com/SchedMD/slurm), at the newest final tag of
each release (`slurm-YY-MM-P-1`):

- doc/man/man5/slurm.conf.5: the keys documented in its PARAMETERS section (a `.TP` entry whose
  name is a CamelCase word), the ones `cluster.slurm.extra` may set;
- src/common/read_config.c: `slurm_conf_options[]`, what slurmctld parses (case-insensitively). It only filters the
  man page: values of a parameter (`Contain` of PrologFlags, `Cores` of TaskPluginParam) are
  written the same way, and the nesting macros of the page are not balanced in every release;
  keys the parser calls defunct are left out.
- the NodeName and PartitionName option tables of read_config.c (`_nodename_options[]`,
  `_partition_options[]`): every option a node or partition line may carry, old spellings the
  parser still takes included (Procs, Shared), spelt as the man page's NODE and PARTITION
  CONFIGURATION sections spell them where they name them;
- the option table of cgroup.conf's parser (src/common/cgroup.c, src/interfaces/cgroup.c from
  23.02), defunct options left out, spelt as cgroup.conf(5) spells them.

Usage: python scripts/slurm_conf_keys.py PATH_TO_SLURM_GIT [--check]
(--check: exit 1 when the module differs from what the clone gives, change nothing.)
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from gpucluster.model.releases import RELEASES  # noqa: E402

TARGET = REPO / "gpucluster" / "slurm" / "conf_keys.py"
MAN_PAGE = "doc/man/man5/slurm.conf.5"
READ_CONFIG = "src/common/read_config.c"
KEY_RE = re.compile(r"\\fB([A-Z][A-Za-z0-9]*[a-z][A-Za-z0-9]*)\\fR")
OPTION_RE = re.compile(r'\{\s*"([A-Za-z0-9]+)"\s*,\s*S_P_[A-Z0-9_]+(\s*,\s*_defunct_option)?')
CGROUP_SOURCES = ("src/interfaces/cgroup.c", "src/common/cgroup.c")
CGROUP_PAGE = "doc/man/man5/cgroup.conf.5"
ANY_KEY_RE = re.compile(r"\\fB([A-Z][A-Za-z0-9]*[a-z][A-Za-z0-9]*)\\f[RP]")


def git_show(repo: Path, tag: str, path: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "show", f"{tag}:{path}"], capture_output=True, text=True, check=True
    ).stdout


def newest_tag(repo: Path, release: str) -> str:
    prefix = "slurm-" + release.replace(".", "-") + "-"
    tags = subprocess.run(
        ["git", "-C", str(repo), "tag", "--list", f"{prefix}*"], capture_output=True, text=True, check=True
    ).stdout.split()
    finals = [t for t in tags if re.fullmatch(re.escape(prefix) + r"\d+-1", t)]
    if not finals:
        raise SystemExit(f"no final tag of Slurm {release} ({prefix}<patch>-1) in {repo}")
    return max(finals, key=lambda t: int(t[len(prefix) :].split("-")[0]))


def documented(man_page: str) -> set[str]:
    """Names of the `.TP` entries of the PARAMETERS section."""
    keys: set[str] = set()
    section = ""
    previous = ""
    for line in man_page.splitlines():
        if line.startswith(".SH"):
            section = line[3:].strip().strip('"')
        elif section == "PARAMETERS" and previous.startswith(".TP"):
            match = KEY_RE.match(line)
            if match:
                keys.add(match.group(1))
        previous = line
    return keys


def parsed(read_config: str, table_start: str = "s_p_options_t slurm_conf_options[] = {") -> set[str]:
    """Keys of an option table of the parser that it still takes (not defunct)."""
    table = read_config.split(table_start, 1)[1].split("};", 1)[0]
    return {name for name, defunct in OPTION_RE.findall(table) if not defunct}


def section_names(man_page: str, section: str) -> dict[str, str]:
    """Lower-case name -> spelling of the CamelCase words a man page section writes in bold."""
    names: dict[str, str] = {}
    current = ""
    for line in man_page.splitlines():
        if line.startswith(".SH"):
            current = line[3:].strip().strip('"')
        elif current == section:
            for name in ANY_KEY_RE.findall(line):
                names.setdefault(name.lower(), name)
    return names


def spelt(options: set[str], documented: dict[str, str]) -> list[str]:
    return sorted({documented.get(name.lower(), name) for name in options})


def line_keys(repo: Path, tag: str) -> tuple[list[str], list[str]]:
    """(NodeName keys, PartitionName keys) of a release."""
    source = git_show(repo, tag, READ_CONFIG)
    page = git_show(repo, tag, MAN_PAGE)
    nodes = parsed(source, "_nodename_options[] = {")
    partitions = parsed(source, "_partition_options[] = {")
    return (
        spelt(nodes, section_names(page, "NODE CONFIGURATION")),
        spelt(partitions, section_names(page, "PARTITION CONFIGURATION")),
    )


def cgroup_keys(repo: Path, tag: str) -> list[str]:
    for path in CGROUP_SOURCES:
        try:
            source = git_show(repo, tag, path)
        except subprocess.CalledProcessError:
            continue
        if "s_p_options_t options[] = {" in source:
            page = git_show(repo, tag, CGROUP_PAGE)
            documented = {name.lower(): name for name in ANY_KEY_RE.findall(page)}
            return spelt(parsed(source, "s_p_options_t options[] = {"), documented)
    raise SystemExit(f"no cgroup.conf option table at {tag}")


def module_text(tables: dict[str, dict[str, list[str]]], tags: dict[str, str]) -> str:
    lines = [
        '"""slurm.conf keys per Slurm release: the parameters slurm.conf(5) documents at the release that',
        "its slurmctld parses (src/common/read_config.c). `cluster.slurm.extra` may set only these.",
        "NODE_KEYS and PARTITION_KEYS: every option of a NodeName and a PartitionName line the parser",
        "takes; CGROUP_KEYS: those of cgroup.conf.",
        "",
        "Generated by scripts/slurm_conf_keys.py from a clone of SchedMD's Slurm; do not edit by hand.",
        '"""',
        "",
        "# The tag each list was read at.",
        "SOURCES: dict[str, str] = {",
        *(f'    "{release}": "{tag}",' for release, tag in tags.items()),
        "}",
    ]
    for table, keys in tables.items():
        lines += ["", f"{table}: dict[str, frozenset[str]] = {{"]
        for release, names in keys.items():
            lines.append(f'    "{release}": frozenset(')
            lines.append("        (")
            lines += [f'            "{name}",' for name in names]
            lines.append("        )")
            lines.append("    ),")
        lines.append("}")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("slurm_git", type=Path, help="a git clone of SchedMD/slurm with its tags")
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 when it differs")
    args = parser.parse_args()
    keys: dict[str, list[str]] = {}
    node_keys: dict[str, list[str]] = {}
    partition_keys: dict[str, list[str]] = {}
    cgroups: dict[str, list[str]] = {}
    tags: dict[str, str] = {}
    for release in sorted(RELEASES, key=lambda name: RELEASES[name].version):
        tag = newest_tag(args.slurm_git, release)
        # Slurm reads keys case-insensitively (its parser has DefCPUPerGPU, its page DefCpuPerGPU):
        # the page's spelling is kept.
        known = {name.lower() for name in parsed(git_show(args.slurm_git, tag, READ_CONFIG))}
        names = {
            name for name in documented(git_show(args.slurm_git, tag, MAN_PAGE)) if name.lower() in known
        }
        keys[release] = sorted(names)
        node_keys[release], partition_keys[release] = line_keys(args.slurm_git, tag)
        cgroups[release] = cgroup_keys(args.slurm_git, tag)
        tags[release] = tag
        print(
            f"{release}: {len(names)} keys, {len(node_keys[release])} node keys, "
            f"{len(partition_keys[release])} partition keys, {len(cgroups[release])} cgroup.conf keys ({tag})",
            file=sys.stderr,
        )
    text = module_text(
        {"KEYS": keys, "NODE_KEYS": node_keys, "PARTITION_KEYS": partition_keys, "CGROUP_KEYS": cgroups}, tags
    )
    if args.check:
        same = TARGET.read_text(encoding="utf-8") == text
        print(f"{TARGET.relative_to(REPO)}: {'up to date' if same else 'differs'}", file=sys.stderr)
        return 0 if same else 1
    TARGET.write_text(text, encoding="utf-8")
    print(f"wrote {TARGET.relative_to(REPO)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
