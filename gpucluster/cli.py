"""The `gpucluster` command line: validate, show, render, plan, trial, verify, schema (and `lab`).

Built on argparse and importing, for each command, only what that command uses: start-up is most
of the time of a command like `render` (see benchmarks/cli_startup.py). Usage errors exit 2.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from gpucluster.console import err, out
from gpucluster.errors import InventoryError

if TYPE_CHECKING:
    from gpucluster.cluster import Cluster

PROG = "gpucluster"
DESCRIPTION = "Declarative GPU clusters: Slurm and Kubernetes from one inventory."
INVENTORY_HELP = "Inventory directory (hosts.yml + group_vars/all/cluster.yml)."
LAB_HELP = "Local lab: a real Slurm cluster in podman containers."

Command = Callable[[argparse.Namespace], int]


def _load(inventory: Path) -> Cluster:
    from gpucluster.layers import layer_warnings, load_cluster

    cluster = load_cluster(inventory)
    for problem in layer_warnings(cluster):
        err(f"warning: {problem}")
    return cluster


def validate(args: argparse.Namespace) -> int:
    """Check the inventory; exit 0 if it is valid, 2 with every problem listed if not."""
    cluster = _load(args.inventory)
    out(
        f"{args.inventory}: valid ({len(cluster.hosts)} nodes, {cluster.total_gpus} GPUs, "
        f"{len(cluster.spec.partitions)} partitions, {len(cluster.spec.tenants)} tenants)"
    )
    return 0


def show(args: argparse.Namespace) -> int:
    """Tables of node types, partitions, fabric, the fleet (which scheduler owns which nodes) and tenants."""
    from gpucluster.show import fleet
    from gpucluster.show import show as show_cluster

    cluster = _load(args.inventory)
    if args.as_json:
        sys.stdout.write(json.dumps(fleet(cluster), indent=2) + "\n")
    else:
        sys.stdout.write(show_cluster(cluster))
    return 0


def render(args: argparse.Namespace) -> int:
    """Write the generated files (slurm/, and the other layers the inventory enables)."""
    from gpucluster.render import render_files, write_tree

    files = render_files(_load(args.inventory), only=args.only)
    written = write_tree(files, args.out_dir)
    out(f"{len(files)} files in {args.out_dir} ({len(written)} changed)")
    for path in written:
        out(f"  wrote {path}")
    return 0


def plan(args: argparse.Namespace) -> int:
    """List what changed between two inventories and what applying it needs on a live cluster;
    nodes that change scheduler get the ordered steps of their move."""
    from gpucluster.moves import move_steps
    from gpucluster.plan import plan as plan_changes
    from gpucluster.plan import required_action

    before, after = _load(args.old), _load(args.new)
    changes = plan_changes(before, after)
    steps = move_steps(before, after)
    action = required_action(changes)
    if args.as_json:
        doc = {
            "changes": [
                {"path": c.path, "old": c.old, "new": c.new, "update": c.update.name.lower()} for c in changes
            ],
            "steps": [step.as_dict() for step in steps],
            "overall": None if action is None else {"update": action.name.lower(), "means": action.value},
        }
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        return 0
    if not changes:
        out("no changes")
        return 0
    for change in changes:
        out(f"{change.path}: {change.old or '-'} -> {change.new or '-'}  [{change.update.name.lower()}]")
    if steps:
        out("steps (nodes change scheduler; never two owners, quotas within capacity at every step):")
        for number, step in enumerate(steps, 1):
            out(f"  {number:2d}. [{step.scheduler}] {step.action}: {step.text}")
    if action is not None:
        out(f"overall: {action.name.lower()}: {action.value}")
    return 0


def trial(args: argparse.Namespace) -> int:
    """Start a throwaway real slurmctld (and slurmdbd) on the rendered Slurm files; exit 1 if it
    logs errors or its topology differs from the inventory. Needs root and Debian's slurm-wlm."""
    from gpucluster.render import render_files
    from gpucluster.trial.slurmctld import TrialUnavailable, expected_topology, run_trial

    cluster = _load(args.inventory)
    try:
        result = run_trial(cluster, render_files(cluster, only=["slurm"]), seconds=args.seconds)
    except TrialUnavailable as exc:
        err(f"trial not possible here: {exc}")
        return 3
    for line in [*result.notes, *result.bad_lines]:
        err(line)
    topology_ok = result.topology == expected_topology(cluster)
    out(
        f"slurmctld {'started' if result.started else 'did NOT start'}; "
        f"{len(result.bad_lines)} error line(s); topology {'matches' if topology_ok else 'DIFFERS from'} the inventory"
    )
    return 0 if result.ok and topology_ok else 1


def verify(args: argparse.Namespace) -> int:
    """Check the live cluster against the inventory, through the same Ansible inventory: nodes,
    jobs over every partition, GPUs in jobs, topology, accounts, drift (versions, munge key,
    config, users), nccl-tests. Exit 0 only when no check failed; 1 also when it cannot run."""
    from gpucluster.tools import ToolMissing
    from gpucluster.verify.collect import ansible_runner, verify_cluster
    from gpucluster.verify.observed import VerifyError
    from gpucluster.verify.report import emit

    cluster = _load(args.inventory)
    err(f"verify: observing {cluster.name} through {args.inventory} (playbooks/verify.yml)")
    try:
        results = verify_cluster(cluster, ansible_runner(args.inventory))
    except (VerifyError, ToolMissing) as exc:
        err(f"verify: {exc}")
        return 1
    return emit(cluster, results, args.as_json)


def schema(args: argparse.Namespace) -> int:
    """Print the JSON Schema of the cluster file (for editor completion)."""
    if args.markdown:
        from gpucluster.reference import markdown as reference

        sys.stdout.write(reference())
        return 0
    from gpucluster.layers import full_model

    doc = full_model().model_json_schema()
    doc["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    doc["title"] = "gpucluster inventory: group_vars/all/cluster.yml"
    sys.stdout.write(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    return 0


def summary(command: Callable[..., object]) -> str:
    """A command's docstring as one paragraph (its line in the list of commands, and its --help)."""
    return " ".join((command.__doc__ or "").split())


def add_command(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], name: str, run: Command
) -> argparse.ArgumentParser:
    """A subcommand whose help is the docstring of `run`, which gets the parsed arguments."""
    text = summary(run)
    parser = commands.add_parser(name, help=text, description=text, allow_abbrev=False)
    parser.set_defaults(run=run, parser=parser)
    return parser


def _inventory(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("inventory", type=Path, help=INVENTORY_HELP)


def _json(parser: argparse.ArgumentParser, help_text: str) -> None:
    parser.add_argument("--json", dest="as_json", action="store_true", help=help_text)


def build_parser(with_lab_commands: bool = True) -> argparse.ArgumentParser:
    """The whole command line; the lab's subcommands only when asked for (they are never needed
    to run the others)."""
    parser = argparse.ArgumentParser(prog=PROG, description=DESCRIPTION, allow_abbrev=False)
    parser.set_defaults(run=None, parser=parser)
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")

    _inventory(add_command(commands, "validate", validate))

    parser_show = add_command(commands, "show", show)
    _inventory(parser_show)
    _json(parser_show, "The fleet (owners, tenants) as JSON.")

    parser_render = add_command(commands, "render", render)
    _inventory(parser_render)
    parser_render.add_argument(
        "--out",
        "-o",
        dest="out_dir",
        type=Path,
        default=Path("build"),
        help="Output directory (default: build).",
    )
    parser_render.add_argument(
        "--only", action="append", metavar="PART", help="Render only these parts (e.g. slurm); repeatable."
    )

    parser_plan = add_command(commands, "plan", plan)
    parser_plan.add_argument(
        "old", type=Path, help="The inventory as deployed (e.g. a checkout of the last release)."
    )
    parser_plan.add_argument("new", type=Path, help="The inventory to apply.")
    _json(parser_plan, "Changes and steps as JSON, for automation.")

    parser_trial = add_command(commands, "trial", trial)
    _inventory(parser_trial)
    parser_trial.add_argument(
        "--seconds",
        type=int,
        default=3,
        help="How long slurmctld runs before its state is read (default: 3).",
    )

    parser_verify = add_command(commands, "verify", verify)
    _inventory(parser_verify)
    _json(parser_verify, "The checks as JSON.")

    parser_schema = add_command(commands, "schema", schema)
    parser_schema.add_argument(
        "--markdown", action="store_true", help="A Markdown reference of every key instead."
    )

    lab = commands.add_parser("lab", help=LAB_HELP, description=LAB_HELP, allow_abbrev=False)
    lab.set_defaults(run=None, parser=lab)
    if with_lab_commands:
        from gpucluster.lab.cli import add_lab_commands

        add_lab_commands(lab)
    return parser


# Commands that run for minutes (playbooks, containers, daemons), for which main() turns the
# cyclic garbage collector back on.
LONG_RUNNING = (["lab"], ["verify"], ["trial"])


def run(argv: Sequence[str]) -> int:
    """Parse the command line and run its command; the exit code."""
    argv = list(argv)
    parser = build_parser(with_lab_commands=argv[:1] == ["lab"])
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        # Said by the command's own parser, with its usage line (exits 2).
        args.parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    if args.run is None:
        # A group without its command (`gpucluster`, `gpucluster lab`): its help, as a usage error.
        args.parser.print_help()
        return 2
    if argv[:1] in LONG_RUNNING:
        gc.enable()  # minutes of playbooks and daemons: garbage must not pile up
    code: int = args.run(args)
    return code


def _no_plugins() -> tuple[()]:
    return ()


def skip_plugin_discovery() -> None:
    """With PYDANTIC_DISABLE_PLUGINS set to disable them all, stand in for pydantic's plugin
    loader with one that finds none, as pydantic's own then does.

    Why: pydantic imports its loader when it builds its first validator, and the loader imports
    importlib.metadata (with the email package it parses metadata with) at the top, even when the
    variable tells it to look for nothing: about a tenth of a short command's time.
    tests/unit/test_command_line.py checks that pydantic's loader still answers the same.
    """
    if os.environ.get("PYDANTIC_DISABLE_PLUGINS") not in ("__all__", "1", "true"):
        return
    if "pydantic.plugin._loader" in sys.modules:
        return
    loader = ModuleType("pydantic.plugin._loader")
    loader.get_plugins = _no_plugins  # type: ignore[attr-defined]
    sys.modules["pydantic.plugin._loader"] = loader


def main(argv: Sequence[str] | None = None, *, exit_at_once: bool = False) -> None:
    # Most commands are one short process whose objects mostly live until it exits: the cyclic
    # collector would only rescan them while the modules and models are built (load_cluster
    # pauses it for the same reason). run() turns it back on for LONG_RUNNING commands.
    gc.disable()
    # pydantic looks up its plugins (every installed package's entry points) when it builds the
    # first validator; this command line has no use for them.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    skip_plugin_discovery()
    args = sys.argv[1:] if argv is None else list(argv)
    try:
        code = run(args)
    except InventoryError as exc:
        for problem in exc.problems:
            err(str(problem))
        err(f"{len(exc.problems)} problem(s) found")
        code = 2
    except KeyboardInterrupt:
        err("aborted")
        code = 130
    except Exception as exc:
        if os.environ.get("GPUCLUSTER_DEBUG"):
            raise
        err(f"error: {type(exc).__name__}: {exc} (set GPUCLUSTER_DEBUG=1 for a traceback)")
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    if exit_at_once and args[:1] not in LONG_RUNNING:
        # Tearing the interpreter down (freeing every module, model and validator one at a time)
        # costs a short command a tenth of its time, and leaves nothing to do: files are written
        # and renamed, the output is flushed, no child runs. Long-running commands exit normally.
        os._exit(code)
    sys.exit(code)


def console() -> None:
    """The `gpucluster` program (main() as a process of its own, which it may end at once)."""
    main(exit_at_once=True)


if __name__ == "__main__":
    main()
