#!/usr/bin/python
# ruff: noqa: E402  (Ansible modules keep DOCUMENTATION above the imports)
"""Ansible module: which Slurm release a host's package sources offer, and which it runs."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: slurm_packages_check
short_description: Compare the Slurm a host offers and runs with the release the inventory targets
description:
  - Reads apt's view of O(package) (every version the host's sources offer) and of every
    installed package of Slurm's source package, and compares their Slurm release (YY.MM) with
    O(release). Runs before the role pins the packages, so it asks whether the target release is
    offered at all, whatever else the sources hold.
  - Changes nothing. Fails, naming the host, the wanted and the offered release, when the
    sources offer another release (or none), and when an installed Slurm package belongs to
    another release (an upgrade or a downgrade, which is never done as a side effect).
options:
  host:
    description: The host's inventory name, for the messages.
    type: str
    required: true
  release:
    description: Target release, YY.MM.
    type: str
    required: true
  minimum:
    description: Lowest maintenance version wanted (YY.MM.P), when the inventory names one.
    type: str
    required: false
  package:
    description: The package whose candidate tells the offered release.
    type: str
    default: slurm-client
  suite_hint:
    description: Debian suite that carries O(release), for the message; empty when none does.
    type: str
    default: ""
  upgrading_from:
    description: >-
      Releases whose installed packages are accepted because the caller upgrades them to
      O(release) (playbooks/slurm-upgrade.yml: the releases O(release) reads); empty elsewhere.
    type: list
    elements: str
    default: []
author: gpucluster maintainers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Refuse a host whose sources offer another Slurm release
  gpucluster.cluster.slurm_packages_check:
    host: "{{ inventory_hostname }}"
    release: "26.05"
    suite_hint: forky
"""

RETURN = r"""
offered:
  description: >-
    The newest version of O(package) of the target release the sources offer, else the newest
    they offer (empty when no source offers it).
  type: str
  returned: always
installed:
  description: Installed Slurm packages -> version.
  type: dict
  returned: always
targets:
  description: >-
    Installed Slurm packages -> the newest version of O(release) the sources offer for it (empty
    when they offer none): what an upgrade installs.
  type: dict
  returned: always
"""

import re
from typing import Any

from ansible.module_utils.basic import AnsibleModule

# Binary packages built from Debian's slurm-wlm source (and sackd, libpam-slurm-adopt).
SLURM_PACKAGE_RE = re.compile(r"^(slurm.*|libslurm.*|libpmi0|libpmi2-0|libpam-slurm.*|sackd)$")
VERSION_RE = re.compile(r"^(?:\d+:)?(\d{2})\.(\d{2})\.(\d+)")


def release_of(version: str) -> str | None:
    match = VERSION_RE.match(version)
    return f"{match.group(1)}.{match.group(2)}" if match else None


def patch_of(version: str) -> tuple[int, int, int] | None:
    match = VERSION_RE.match(version)
    return tuple(int(g) for g in match.groups()) if match else None  # type: ignore[return-value]


def problems(
    host: str,
    release: str,
    minimum: str | None,
    offered: str,
    installed: dict[str, str],
    suite: str,
    upgrading_from: tuple[str, ...] = (),
) -> list[str]:
    """What keeps this host from getting Slurm `release`, in words an operator acts on."""
    found: list[str] = []
    where = (
        f"Debian carries {release} in {suite}: run {suite} on the host or name a repository that "
        "carries it in cluster.slurm.packages.repository"
        if suite
        else f"no Debian suite carries {release}: name a repository that does in cluster.slurm.packages.repository"
    )
    if not offered:
        found.append(f"{host}: its package sources offer no Slurm; the inventory targets {release} ({where})")
    elif release_of(offered) != release:
        found.append(
            f"{host}: its package sources offer Slurm {offered}; the inventory targets {release} ({where})"
        )
    elif minimum and (patch_of(offered) or (0, 0, 0)) < (patch_of(minimum) or (0, 0, 0)):
        found.append(
            f"{host}: its package sources offer Slurm {offered}; the inventory needs {minimum} or later"
        )
    accepted = {release, *upgrading_from}
    others = {name: version for name, version in installed.items() if release_of(version) not in accepted}
    if others:
        listed = ", ".join(f"{name} {version}" for name, version in sorted(others.items()))
        running = release_of(next(iter(others.values()))) or "another release"
        verb = "an upgrade" if running < release else "a downgrade, which Slurm does not support"
        found.append(
            f"{host}: runs Slurm {running} ({listed}); going to {release} is {verb}, never done as a side "
            "effect of applying the inventory (`gpucluster plan OLD NEW` gives the upgrade's steps); "
            "nothing was changed"
        )
    return found


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "host": {"type": "str", "required": True},
            "release": {"type": "str", "required": True},
            "minimum": {"type": "str", "required": False},
            "package": {"type": "str", "default": "slurm-client"},
            "suite_hint": {"type": "str", "default": ""},
            "upgrading_from": {"type": "list", "elements": "str", "default": []},
        },
        supports_check_mode=True,
    )
    try:
        import apt  # python3-apt, which ansible.builtin.apt needs as well
    except ImportError:
        module.fail_json(msg="python3-apt is not installed on this host")
    cache: Any = apt.Cache()
    package = module.params["package"]
    offered = ""
    if package in cache:
        versions = [version.version for version in cache[package].versions]
        wanted = [v for v in versions if release_of(v) == module.params["release"]]
        # python-apt lists them newest first.
        offered = (wanted or versions or [""])[0]
    installed = {
        pkg.name: pkg.installed.version
        for pkg in cache
        if pkg.installed is not None and SLURM_PACKAGE_RE.match(pkg.shortname)
    }
    targets = {
        name: next(
            (v.version for v in cache[name].versions if release_of(v.version) == module.params["release"]), ""
        )
        for name in installed
    }
    found = problems(
        module.params["host"],
        module.params["release"],
        module.params["minimum"],
        offered,
        installed,
        module.params["suite_hint"],
        tuple(module.params["upgrading_from"]),
    )
    if found:
        module.fail_json(msg="\n".join(found), offered=offered, installed=installed, targets=targets)
    module.exit_json(changed=False, offered=offered, installed=installed, targets=targets)


if __name__ == "__main__":
    main()
