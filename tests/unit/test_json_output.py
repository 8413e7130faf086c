"""Every `--json` document against its JSON Schema (gpucluster/output_schemas), the schemas and
docs/cli-json.md against the command line, and the exit codes against the README's table."""

from __future__ import annotations

import argparse
import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from gpucluster.cli import EXIT_CODES, build_parser
from gpucluster.k8s.model import Versions
from gpucluster.layers import load_cluster
from gpucluster.model.releases import RELEASES
from gpucluster.trial.report import trial_doc
from gpucluster.trial.slurmctld import TrialResult, expected_topology
from gpucluster.verify.checks import run_checks
from gpucluster.verify.report import as_json
from tests.conftest import INVENTORIES, REPO, InventoryFactory, example_inventories, run_cli
from tests.unit.test_moves import lab_pair
from tests.unit.verify_fixtures import healthy, small_plan

SCHEMAS = REPO / "gpucluster" / "output_schemas"
DOC = REPO / "docs" / "cli-json.md"
# Shared by every command: an invalid inventory is validate's document, a command that could not
# run is the error document.
SHARED = {"error"}


def schema(name: str) -> dict[str, Any]:
    return json.loads((SCHEMAS / f"{name}.schema.json").read_text())


def check(name: str, doc: Any) -> None:
    errors = sorted(Draft202012Validator(schema(name)).iter_errors(doc), key=str)
    assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors)


def output(proc: Any, name: str) -> Any:
    doc = json.loads(proc.stdout)
    check(name, doc)
    return doc


def as_text(problem: dict[str, Any]) -> str:
    """A problem as the text output says it (gpucluster.errors.Problem.__str__)."""
    where = f"{problem['file']}:{problem['line']}" if problem["line"] else problem["file"]
    return (
        f"{where}: {problem['path']}: {problem['message']}"
        if problem["path"]
        else f"{where}: {problem['message']}"
    )


def subcommands(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], Any]:
    found: dict[tuple[str, ...], Any] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found[(*prefix, name)] = sub
                found.update(subcommands(sub, (*prefix, name)))
    return found


def json_commands() -> dict[str, str]:
    """Command line -> its schema: every command that takes --json (`lab verify` is verify's)."""
    commands = {"--version --json": "version"}
    for path, sub in subcommands(build_parser(with_lab_commands=True)).items():
        if any("--json" in action.option_strings for action in sub._actions):
            commands[" ".join(path)] = path[-1]
    return commands


def test_the_schemas_are_valid_json_schemas() -> None:
    for path in sorted(SCHEMAS.glob("*.schema.json")):
        Draft202012Validator.check_schema(json.loads(path.read_text()))


def test_every_command_with_json_has_a_schema_and_a_section_in_the_doc() -> None:
    commands = json_commands()
    assert {"validate", "show", "render", "plan", "trial", "verify", "lab verify"} <= set(commands)
    names = {path.name.removesuffix(".schema.json") for path in SCHEMAS.glob("*.schema.json")}
    assert set(commands.values()) | SHARED == names, "a schema without its command, or the reverse"
    sections = set(re.findall(r"^## (\S+)$", DOC.read_text(), re.MULTILINE))
    assert set(commands.values()) <= sections, set(commands.values()) - sections


def test_version_json_says_what_the_tables_say() -> None:
    proc = run_cli("--version", "--json")
    assert proc.returncode == 0, proc.stderr
    doc = output(proc, "version")
    assert doc["slurm_releases"] == [{"name": r.name, "proven": r.proven} for r in RELEASES.values()]
    pins = Versions()
    assert doc["addons"] == {
        name: {
            "chart": getattr(pins, name).chart,
            "version": getattr(pins, name).version,
            "repo": getattr(pins, name).repo,
        }
        for name in Versions.model_fields
    }
    assert run_cli("--version").stdout == f"gpucluster {doc['version']}\n"


@pytest.mark.parametrize("args", [["--json", "validate", "inventories/lab"], ["--version", "validate", "x"]])
def test_version_flags_are_usage_errors_elsewhere(args: list[str]) -> None:
    proc = run_cli(*args)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr


def test_validate_json_of_every_example() -> None:
    for example in example_inventories():
        proc = run_cli("validate", "--json", f"inventories/{example}")
        assert proc.returncode == 0, proc.stderr
        doc = output(proc, "validate")
        cluster = load_cluster(INVENTORIES / example)
        assert (doc["cluster"], doc["nodes"], doc["gpus"]) == (
            cluster.name,
            len(cluster.hosts),
            cluster.total_gpus,
        )


def test_every_command_reports_an_invalid_inventory_as_validate_does(inventories: InventoryFactory) -> None:
    bad = inventories.copy_example("lab")
    cluster_file = bad / "group_vars" / "all" / "cluster.yml"
    text = cluster_file.read_text()
    text = text.replace('version: "26.05"', 'version: "21.08"').replace("fairshare: 60", "fairshare: -1")
    cluster_file.write_text(text)
    text_mode = run_cli("validate", str(bad))
    assert text_mode.returncode == 2
    listed = text_mode.stderr.splitlines()[:-1]
    assert len(listed) >= 2
    commands = [
        ["validate", "--json", str(bad)],
        ["show", "--json", str(bad)],
        ["render", "--json", str(bad), "--out", str(inventories.root / "out")],
        ["plan", "--json", "inventories/lab", str(bad)],
        ["trial", "--json", str(bad)],
        ["verify", "--json", str(bad)],
    ]
    for command in commands:
        proc = run_cli(*command)
        assert proc.returncode == 2, (command, proc.stderr)
        doc = output(proc, "validate")
        assert doc["ok"] is False
        # The same problems as the text output, in its order; and still said on stderr.
        assert [as_text(p) for p in doc["problems"]] == listed
        assert proc.stderr.splitlines()[:-1] == listed
    assert not (inventories.root / "out").exists()


def test_render_json_gives_the_digests_of_the_files_written(tmp_path: Path) -> None:
    out = tmp_path / "out"
    first = output(run_cli("render", "--json", "inventories/superpod", "--out", str(out)), "render")
    assert first["files"] and all(f["changed"] for f in first["files"])
    for entry in first["files"]:
        data = (out / entry["path"]).read_bytes()
        assert (entry["sha256"], entry["bytes"]) == (hashlib.sha256(data).hexdigest(), len(data))
    (out / first["files"][0]["path"]).write_text("edited by hand\n")
    second = output(run_cli("render", "--json", "inventories/superpod", "--out", str(out)), "render")
    assert [f["changed"] for f in second["files"]] == [True] + [False] * (len(first["files"]) - 1)
    assert [f["sha256"] for f in second["files"]] == [f["sha256"] for f in first["files"]]


def test_show_json_of_every_example() -> None:
    for example in example_inventories():
        proc = run_cli("show", "--json", f"inventories/{example}")
        assert proc.returncode == 0, proc.stderr
        output(proc, "show")


def test_plan_json_with_changes_and_moves(inventories: InventoryFactory) -> None:
    unchanged = output(run_cli("plan", "--json", "inventories/lab", "inventories/lab"), "plan")
    assert unchanged == {
        "release": "26.05",
        "refused": [],
        "upgrade": None,
        "ends_jobs": [],
        "changes": [],
        "files": [],
        "steps": [],
        "monitoring_targets": {"added": [], "removed": [], "relabelled": []},
        "overall": None,
    }
    old, new = lab_pair(inventories)  # gpu04 moves from Slurm to Kubernetes
    proc = run_cli("plan", "--json", str(old), str(new))
    assert proc.returncode == 0, proc.stderr
    doc = output(proc, "plan")
    assert doc["steps"] and doc["overall"]["update"] == "move"
    # Its node-exporter target stays, relabelled with its new owner.
    assert any(
        t.startswith("node gpu04:9100 (") and "owner: slurm -> kubernetes" in t
        for t in doc["monitoring_targets"]["relabelled"]
    ), doc["monitoring_targets"]


def test_trial_json_shape() -> None:
    """The document of a trial (the real run is tests/slurm/test_trial.py's, with the daemons)."""
    cluster = load_cluster(INVENTORIES / "lab")
    expected = expected_topology(cluster)
    good = TrialResult(
        started=True, log=["slurmctld version 26.05.5 started"], bad_lines=[], topology=expected
    )
    doc = trial_doc("inventories/lab", cluster, good)
    check("trial", doc)
    assert doc["ok"] and doc["topology"]["matches"] and doc["blocks"]["matches"] and doc["release"] == "26.05"
    bad = TrialResult(started=False, log=[], bad_lines=["fatal: bad"], notes=["no JWT plugin here"])
    doc = trial_doc("inventories/lab", cluster, bad)
    check("trial", doc)
    assert not doc["ok"] and doc["topology"]["seen"] == {} and doc["error_lines"] == ["fatal: bad"]
    nvl72 = load_cluster(INVENTORIES / "nvl72")
    blocks = TrialResult(started=True, log=[], bad_lines=[], topology=expected_topology(nvl72))
    doc = trial_doc("inventories/nvl72", nvl72, blocks)
    check("trial", doc)
    assert not doc["ok"] and not doc["blocks"]["matches"] and len(doc["blocks"]["expected"]) == 4


def test_trial_json_when_not_possible_here() -> None:
    # Refused before anything starts: bare-metal Slurm owns no host of azure-dev.
    proc = run_cli("trial", "--json", "inventories/azure-dev")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    doc = output(proc, "error")
    assert doc["error"] in proc.stderr


def test_verify_json_shape(inventories: InventoryFactory) -> None:
    plan = small_plan(inventories)
    doc = json.loads(as_json(plan.cluster, run_checks(plan, healthy(plan))))
    check("verify", doc)
    assert doc["ok"] and {c["status"] for c in doc["checks"]} <= {"pass", "skipped"}


def test_verify_json_when_the_cluster_cannot_be_reached(inventories: InventoryFactory) -> None:
    """A real ansible-playbook run of the verify playbook against hosts that do not resolve."""
    hosts = "all:\n  children:\n    ctl: {hosts: {head.invalid: {}}}\n    gpus: {hosts: {n01.invalid: {}}}\n"
    cluster = """\
        cluster:
          name: small
          slurm: {version: "22.05", controller: head.invalid}
          node_types:
            h100: {sockets: 2, cores_per_socket: 8, memory_mb: 64000}
          nodes:
            - {group: gpus, type: h100}
          partitions:
            - {name: batch, nodes: [gpus], default: true}
        """
    inventory = inventories.make(hosts, cluster)
    proc = run_cli("verify", "--json", str(inventory))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    doc = output(proc, "error")
    assert "cannot reach head.invalid, the primary controller" in doc["error"]


def test_the_readme_has_the_exit_code_table() -> None:
    readme = (REPO / "README.md").read_text()
    rows = dict(re.findall(r"^\| `(\d+)` \| (.+?) \|$", readme, re.MULTILINE))
    assert {int(code) for code in rows} == set(EXIT_CODES)
