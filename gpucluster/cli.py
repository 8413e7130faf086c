"""The `gpucluster` command line: validate, show, render, schema (and `lab`)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from gpucluster.cluster import Cluster
from gpucluster.console import err, out
from gpucluster.errors import InventoryError
from gpucluster.layers import load_cluster

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Declarative GPU clusters: Slurm and Kubernetes from one inventory.",
)

InventoryArg = Annotated[
    Path, typer.Argument(help="Inventory directory (hosts.yml + group_vars/all/cluster.yml).")
]


def _load(inventory: Path) -> Cluster:
    return load_cluster(inventory)


@app.command()
def validate(inventory: InventoryArg) -> None:
    """Check the inventory; exit 0 if it is valid, 2 with every problem listed if not."""
    cluster = _load(inventory)
    out.print(
        f"{inventory}: valid ({len(cluster.hosts)} nodes, {cluster.total_gpus} GPUs, "
        f"{len(cluster.spec.partitions)} partitions, {len(cluster.spec.tenants)} tenants)"
    )


@app.command()
def show(
    inventory: InventoryArg,
    as_json: Annotated[bool, typer.Option("--json", help="The fleet (owners, tenants) as JSON.")] = False,
) -> None:
    """Tables of node types, partitions, fabric, the fleet (which scheduler owns which nodes) and tenants."""
    from gpucluster.show import fleet
    from gpucluster.show import show as show_cluster

    cluster = _load(inventory)
    if as_json:
        sys.stdout.write(json.dumps(fleet(cluster), indent=2) + "\n")
        return
    show_cluster(cluster, out.console)


@app.command()
def render(
    inventory: InventoryArg,
    out_dir: Annotated[Path, typer.Option("--out", "-o", help="Output directory.")] = Path("build"),
    only: Annotated[
        list[str] | None, typer.Option("--only", help="Render only these parts (e.g. slurm).")
    ] = None,
) -> None:
    """Write the generated files (slurm/, and the other layers the inventory enables)."""
    from gpucluster.render import render_files, write_tree

    files = render_files(_load(inventory), only=only)
    written = write_tree(files, out_dir)
    out.print(f"{len(files)} files in {out_dir} ({len(written)} changed)")
    for path in written:
        out.print(f"  wrote {path}")


@app.command()
def plan(
    old: Annotated[
        Path, typer.Argument(help="The inventory as deployed (e.g. a checkout of the last release).")
    ],
    new: Annotated[Path, typer.Argument(help="The inventory to apply.")],
    as_json: Annotated[
        bool, typer.Option("--json", help="Changes and steps as JSON, for automation.")
    ] = False,
) -> None:
    """List what changed between two inventories and what applying it needs on a live cluster;
    nodes that change scheduler get the ordered steps of their move."""
    from gpucluster.moves import move_steps
    from gpucluster.plan import plan as plan_changes
    from gpucluster.plan import required_action

    before, after = _load(old), _load(new)
    changes = plan_changes(before, after)
    steps = move_steps(before, after)
    action = required_action(changes)
    if as_json:
        doc = {
            "changes": [
                {"path": c.path, "old": c.old, "new": c.new, "update": c.update.name.lower()} for c in changes
            ],
            "steps": [step.as_dict() for step in steps],
            "overall": None if action is None else {"update": action.name.lower(), "means": action.value},
        }
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        return
    if not changes:
        out.print("no changes")
        return
    for change in changes:
        out.print(
            f"{change.path}: {change.old or '-'} -> {change.new or '-'}  [{change.update.name.lower()}]",
            markup=False,
        )
    if steps:
        out.print("steps (nodes change scheduler; never two owners, quotas within capacity at every step):")
        for number, step in enumerate(steps, 1):
            out.print(f"  {number:2d}. [{step.scheduler}] {step.action}: {step.text}", markup=False)
    if action is not None:
        out.print(f"overall: {action.name.lower()}: {action.value}", markup=False)


@app.command()
def trial(
    inventory: InventoryArg,
    seconds: Annotated[int, typer.Option(help="How long slurmctld runs before its state is read.")] = 3,
) -> None:
    """Start a throwaway real slurmctld (and slurmdbd) on the rendered Slurm files; exit 1 if it
    logs errors or its topology differs from the inventory. Needs root and Debian's slurm-wlm."""
    from gpucluster.render import render_files
    from gpucluster.trial.slurmctld import TrialUnavailable, expected_topology, run_trial

    cluster = _load(inventory)
    try:
        result = run_trial(cluster, render_files(cluster, only=["slurm"]), seconds=seconds)
    except TrialUnavailable as exc:
        err.print(f"trial not possible here: {exc}", markup=False)
        raise typer.Exit(3) from None
    for line in result.bad_lines:
        err.print(line, markup=False, highlight=False)
    topology_ok = result.topology == expected_topology(cluster)
    out.print(
        f"slurmctld {'started' if result.started else 'did NOT start'}; "
        f"{len(result.bad_lines)} error line(s); topology {'matches' if topology_ok else 'DIFFERS from'} the inventory"
    )
    if not (result.ok and topology_ok):
        raise typer.Exit(1)


@app.command()
def verify(
    inventory: InventoryArg,
    as_json: Annotated[bool, typer.Option("--json", help="The checks as JSON.")] = False,
) -> None:
    """Check the live cluster against the inventory, through the same Ansible inventory: nodes,
    jobs over every partition, GPUs in jobs, topology, accounts, drift (versions, munge key,
    config, users), nccl-tests. Exit 0 only when no check failed; 1 also when it cannot run."""
    from gpucluster.tools import ToolMissing
    from gpucluster.verify.collect import ansible_runner, verify_cluster
    from gpucluster.verify.observed import VerifyError
    from gpucluster.verify.report import emit

    cluster = _load(inventory)
    err.print(f"verify: observing {cluster.name} through {inventory} (playbooks/verify.yml)", highlight=False)
    try:
        results = verify_cluster(cluster, ansible_runner(inventory))
    except (VerifyError, ToolMissing) as exc:
        err.print(f"verify: {exc}", markup=False, highlight=False)
        raise typer.Exit(1) from None
    code = emit(cluster, results, as_json, out.console)
    if code:
        raise typer.Exit(code)


@app.command()
def schema(
    markdown: Annotated[
        bool, typer.Option("--markdown", help="A Markdown reference of every key instead.")
    ] = False,
) -> None:
    """Print the JSON Schema of the cluster file (for editor completion)."""
    if markdown:
        from gpucluster.reference import markdown as reference

        sys.stdout.write(reference())
        return
    from gpucluster.layers import full_model

    doc = full_model().model_json_schema()
    doc["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    doc["title"] = "gpucluster inventory: group_vars/all/cluster.yml"
    sys.stdout.write(json.dumps(doc, indent=2, sort_keys=True) + "\n")


def _register_subcommands() -> None:
    from gpucluster.lab.cli import lab_app

    app.add_typer(lab_app, name="lab", help="Local lab: a real Slurm cluster in podman containers.")


_register_subcommands()


def main() -> None:
    try:
        # standalone_mode=False returns the code of typer.Exit instead of exiting.
        code = app(standalone_mode=False)
        sys.exit(code if isinstance(code, int) else 0)
    except InventoryError as exc:
        for problem in exc.problems:
            err.print(str(problem), markup=False, highlight=False, soft_wrap=True)
        err.print(f"{len(exc.problems)} problem(s) found", style="bold red")
        sys.exit(2)
    except (typer.Abort, KeyboardInterrupt):
        err.print("aborted")
        sys.exit(130)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except Exception as exc:
        # Usage errors (typer ships its own click): let them print themselves.
        exit_code = getattr(exc, "exit_code", None)
        show_usage = getattr(exc, "show", None)
        if callable(show_usage) and isinstance(exit_code, int):
            if type(exc).__name__ != "NoArgsIsHelpError":
                show_usage()
            sys.exit(exit_code)
        if os.environ.get("GPUCLUSTER_DEBUG"):
            raise
        err.print(
            f"error: {type(exc).__name__}: {exc} (set GPUCLUSTER_DEBUG=1 for a traceback)", markup=False
        )
        sys.exit(1)


if __name__ == "__main__":
    main()
