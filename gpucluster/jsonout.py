"""The JSON documents of the command line (`--json`): written on stdout, one document per run.

Each command's document has a JSON Schema, gpucluster/output_schemas/<command>.schema.json
(package data), described in docs/cli-json.md; tests/unit/test_json_output.py checks every
command that takes --json against its schema. Two documents are shared by every command:

- an invalid inventory (exit 2) gives validate's document with `ok: false` and the problems;
- a command that could not run (exit 1 or 3, e.g. verify without its controller, trial on a
  machine without Slurm) gives `{"ok": false, "error": "..."}` (error.schema.json).

A new command with --json (e.g. `gpucluster import`) adds its schema file and its section in
docs/cli-json.md; the test finds the command in the parser and fails until both exist.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from typing import Any

from gpucluster.errors import Problem


def write(doc: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(doc, indent=2) + "\n")


def problem(item: Problem) -> dict[str, Any]:
    return {"file": item.file, "line": item.line, "path": item.path, "message": item.message}


def invalid(problems: Iterable[Problem], inventory: str | None = None) -> dict[str, Any]:
    """validate's document for an inventory that is not valid (any command, exit 2)."""
    doc: dict[str, Any] = {"ok": False}
    if inventory is not None:
        doc["inventory"] = inventory
    doc["problems"] = [problem(p) for p in problems]
    return doc


def error(message: str) -> dict[str, Any]:
    """A command that could not run (exit 1 or 3): one line saying why."""
    return {"ok": False, "error": message}
