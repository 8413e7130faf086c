"""Programs gpucluster starts from its own virtualenv (ansible-playbook, ansible-vault, molecule, ...).

They are installed next to the interpreter running gpucluster (`.venv/bin`), and the README runs
`.venv/bin/gpucluster` without activating the venv, so PATH is never consulted for them: a PATH
that lacks `.venv/bin`, or holds another Ansible first, would run the wrong program or none.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


class ToolMissing(RuntimeError):
    """A program of the project's virtualenv is not installed beside the running interpreter."""


def bin_dir() -> Path:
    # Not resolved: .venv/bin/python is a symlink to the base interpreter, whose directory has no tools.
    return Path(sys.executable).parent


def venv_tool(name: str) -> str:
    """Absolute path of `name` beside the running interpreter, or ToolMissing saying how to get it."""
    path = bin_dir() / name
    if not os.access(path, os.X_OK):
        raise ToolMissing(
            f"{name}: not installed beside {sys.executable} (run scripts/setup.sh, then use .venv/bin/gpucluster)"
        )
    return str(path)


def venv_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """An environment whose PATH starts with the venv's bin directory, for the programs those tools
    start in turn (ansible-playbook runs ansible-galaxy, molecule runs ansible-playbook)."""
    env = dict(os.environ if base is None else base)
    first = str(bin_dir())
    rest = [p for p in env.get("PATH", os.defpath).split(os.pathsep) if p and p != first]
    env["PATH"] = os.pathsep.join([first, *rest])
    return env
