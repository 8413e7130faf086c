"""The `gpucluster` command line: validate, show, render, plan, apply, trial, import, verify, node repaired,
schema, completion (and `lab`).

Built on argparse and importing, for each command, only what that command uses: start-up is most
of the time of a command like `render` (see benchmarks/cli_startup.py). Exit codes are the same
for every command (EXIT_CODES, the README's table); `--json` documents are gpucluster.jsonout's.
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
from gpucluster.outputs import OUTPUT_PARTS

if TYPE_CHECKING:
    from gpucluster.changes.apply import ByHand, Run
    from gpucluster.model.cluster import Cluster

PROG = "gpucluster"
DESCRIPTION = "Declarative GPU clusters: Slurm and Kubernetes from one inventory."
INVENTORY_HELP = "Inventory directory (hosts.yml + group_vars/all/cluster.yml)."
LAB_HELP = "Local lab: a real Slurm cluster in podman containers."

Command = Callable[[argparse.Namespace], int]

# One meaning per exit code, whatever the command (the README's table is this one).
EXIT_CODES = {
    0: "success: valid, written, every check passed",
    1: "the command ran and found a failure (a check failed, the trial's daemon logged errors), "
    "or could not finish (ansible-playbook failed, the controller unreachable, an unexpected error)",
    2: "usage error or invalid inventory (every problem listed)",
    3: "not possible on this machine (trial: not root, no slurm-wlm, or another Slurm release installed)",
    4: "apply stopped before a step done by hand (its text printed): do it, then go on with --from-step",
    130: "interrupted (Ctrl-C)",
}
# An inventory directory argument: shell completion offers directories (shtab's DIRECTORY, spelt
# out so that building the parser does not import shtab).
DIRECTORY_COMPLETION = {"bash": "_shtab_compgen_dirs", "zsh": "_files -/"}


def _load(inventory: Path) -> Cluster:
    from gpucluster.layers import layer_warnings, load_cluster

    cluster = load_cluster(inventory)
    for problem in layer_warnings(cluster):
        err(f"warning: {problem}")
    return cluster


def validate(args: argparse.Namespace) -> int:
    """Check the inventory; exit 0 if it is valid, 2 with every problem listed if not."""
    cluster = _load(args.inventory)
    if args.as_json:
        from gpucluster.jsonout import write

        write(
            {
                "ok": True,
                "inventory": str(args.inventory),
                "cluster": cluster.name,
                "nodes": len(cluster.hosts),
                "gpus": cluster.total_gpus,
                "partitions": len(cluster.spec.partitions),
                "tenants": len(cluster.spec.tenants),
                "problems": [],
            }
        )
        return 0
    out(
        f"{args.inventory}: valid ({len(cluster.hosts)} nodes, {cluster.total_gpus} GPUs, "
        f"{len(cluster.spec.partitions)} partitions, {len(cluster.spec.tenants)} tenants)"
    )
    return 0


def show(args: argparse.Namespace) -> int:
    """Every section of the inventory as it resolves: the Slurm settings and the target release's facts
    (and the releases gpucluster knows, which real daemons prove), node types, partitions, fabric,
    the fleet (which scheduler owns which nodes), tenants, QOS, users, storage, Kubernetes, cloud."""
    from gpucluster.show import as_json
    from gpucluster.show import show as show_cluster

    cluster = _load(args.inventory)
    if args.as_json:
        sys.stdout.write(json.dumps(as_json(cluster), indent=2) + "\n")
    else:
        sys.stdout.write(show_cluster(cluster))
    return 0


def render(args: argparse.Namespace) -> int:
    """Write the generated files (slurm/, and the other layers the inventory enables)."""
    from gpucluster.render.files import sync_tree
    from gpucluster.rendering import render_files

    _check_output_directory(args)
    files = render_files(_load(args.inventory), only=args.only)
    changes = sync_tree(files, args.out_dir, parts=args.only)
    if args.as_json:
        _render_json(args, files, changes.written, changes.removed)
        return 0
    what = f" of {', '.join(args.only)}" if args.only else ""
    removed = f", {len(changes.removed)} removed" if changes.removed else ""
    out(f"{len(files)} files{what} in {args.out_dir} ({len(changes.written)} changed{removed})")
    for path in changes.written:
        out(f"  wrote {path}")
    for path in changes.removed:
        out(f"  removed {path} (no longer generated)")
    return 0


def _check_output_directory(args: argparse.Namespace) -> None:
    """`--out` names a directory, or a path where one can be made: a file there (or in its way) is
    a usage error before anything is rendered or written."""
    path: Path = args.out_dir
    for above in [path, *path.parents]:
        if above.exists():
            if not above.is_dir():
                where = "is a file" if above == path else f"is below {above}, a file"
                args.parser.error(f"--out {path} {where}: name a directory (made if missing)")
            return


def _render_json(
    args: argparse.Namespace, files: dict[str, str], written: list[Path], removed: list[Path]
) -> None:
    """Every file of the tree with its sha256 and size, whether this run wrote it, and the files
    it removed (generated before, no longer)."""
    import hashlib

    from gpucluster.jsonout import write

    changed = {str(path) for path in written}
    entries = []
    for rel, text in files.items():
        data = text.encode()
        entries.append(
            {
                "path": rel,
                "sha256": hashlib.sha256(data).hexdigest(),
                "bytes": len(data),
                "changed": str(args.out_dir / rel) in changed,
            }
        )
    write(
        {
            "inventory": str(args.inventory),
            "out": str(args.out_dir),
            "files": entries,
            "removed": [str(path) for path in removed],
        }
    )


def plan(args: argparse.Namespace) -> int:
    """List what changes between two inventories: what they resolve to (hosts, groups, owners,
    partitions, switches, blocks, tenants per scheduler, users, every setting) and the rendered
    files, each change with what applying it needs on the target release, then the ordered steps
    (moves of nodes between schedulers included)."""
    from gpucluster.changes.plan import make_plan, text_lines

    result = make_plan(_load(args.old), _load(args.new))
    # A change Slurm cannot make at all (a downgrade, a jump past the window): the plan is still
    # printed, with the refusal first, and the exit code is 2 like any inventory that cannot be applied.
    code = 2 if result.refused else 0
    if args.as_json:
        sys.stdout.write(json.dumps(result.as_dict(), indent=2) + "\n")
        return code
    for line in text_lines(result):
        out(line)
    for reason in result.refused:
        err(reason)
    return code


def apply(args: argparse.Namespace) -> int:
    """Apply what `plan OLD NEW` lists: its steps as ansible-playbook runs in its order, each limited
    to the hosts its step changes (localhost, where the playbooks render, and those). Prints the plan
    and the runs first and asks before running unless --yes; stops at the first failure, and before
    a step done by hand (a drain, a wait, kubectl) with its text."""
    from gpucluster.changes.apply import ByHand, apply_actions, from_step
    from gpucluster.changes.plan import make_plan, text_lines
    from gpucluster.rendering import render_files

    old, new = _load(args.old), _load(args.new)
    old_files, new_files = render_files(old), render_files(new)
    result = make_plan(old, new, old_files, new_files)
    for line in text_lines(result):
        out(line)
    if result.refused:
        for reason in result.refused:
            err(reason)
        return 2
    target: Path = args.inventory_dir or args.new
    if args.inventory_dir is not None and render_files(_load(target)) != new_files:
        args.parser.error(
            f"--inventory-dir {target} renders other files than {args.new}: the playbooks apply the "
            "inventory they run with, so it must be the one planned"
        )
    actions = from_step(apply_actions(old, new, result, new_files), args.from_step)
    if not actions:
        out("apply: nothing to run")
        return 0
    out(f"apply: {len(actions)} action(s), in order:")
    for action in actions:
        if isinstance(action, ByHand):
            out(f"  step {action.step}, by hand: {action.text}")
        else:
            out(f"  steps {', '.join(map(str, action.steps))}: {action.line(target)}")
    if args.dry_run:
        return 0
    if not args.yes and not _confirmed(args):
        return 2 if not sys.stdin.isatty() else 1
    return _run_actions(actions, target, args)


def _confirmed(args: argparse.Namespace) -> bool:
    """Whether the user answers yes; no terminal to ask on (and no --yes) is a refusal."""
    if not sys.stdin.isatty():
        err("apply: not confirmed: no terminal to ask on; run it with --yes (or --dry-run)")
        return False
    sys.stderr.write("Apply these? [y/N] ")
    sys.stderr.flush()
    answer = sys.stdin.readline().strip().lower()
    if answer not in ("y", "yes"):
        err("apply: nothing applied")
        return False
    return True


def _run_actions(actions: Sequence[Run | ByHand], target: Path, args: argparse.Namespace) -> int:
    """Each run in turn with the virtualenv's ansible-playbook, its output as it comes."""
    import subprocess

    from gpucluster.changes.apply import ByHand, playbook_path
    from gpucluster.tools import ToolMissing, venv_env, venv_tool

    try:
        program = venv_tool("ansible-playbook")
    except ToolMissing as exc:
        err(f"apply: {exc}")
        return 1
    for action in actions:
        if isinstance(action, ByHand):
            err(
                f"apply: stopped before step {action.step}, which is done by hand: {action.text}; once done, "
                f"run `gpucluster apply {args.old} {args.new} --from-step {action.step + 1}`"
            )
            return 4
        steps = ", ".join(map(str, action.steps))
        out(f"apply: steps {steps}: {action.line(target)}")
        sys.stdout.flush()  # before the playbook's own output
        proc = subprocess.run(
            action.argv(target, program, playbook_path(action.playbook)), env=venv_env(), check=False
        )
        if proc.returncode != 0:
            err(
                f"apply: the run of step(s) {steps} failed: {action.playbook} exited {proc.returncode}; fix "
                f"it, then run `gpucluster apply {args.old} {args.new} --from-step {action.steps[0]}`"
            )
            return 1
    out("apply: done")
    return 0


def trial(args: argparse.Namespace) -> int:
    """Start a throwaway real slurmctld (and slurmdbd) of the inventory's release on the rendered
    Slurm files (the host's own Slurm, or the lab image of the release's Debian suite); exit 1 if
    it logs errors or its topology differs from the inventory. Needs root."""
    from gpucluster.progress import Progress
    from gpucluster.rendering import render_files
    from gpucluster.trial.slurmctld import TrialUnavailable, run_trial, topology_matches

    cluster = _load(args.inventory)
    try:
        with Progress() as progress:
            progress(f"trial: slurmctld {cluster.release.name} on the Slurm files of {args.inventory}")
            result = run_trial(
                cluster,
                render_files(cluster, only=["slurm"]),
                seconds=args.seconds,
                progress=progress,
            )
            progress("trial: done")
    except TrialUnavailable as exc:
        if args.as_json:
            from gpucluster.jsonout import error, write

            write(error(f"trial not possible here: {exc}"))
        err(f"trial not possible here: {exc}")
        return 3
    for line in [*result.notes, *result.bad_lines]:
        err(line)
    topology_ok = topology_matches(cluster, result)
    if args.as_json:
        from gpucluster.jsonout import write
        from gpucluster.trial.report import trial_doc

        write(trial_doc(str(args.inventory), cluster, result))
        return 0 if result.ok and topology_ok else 1
    out(
        f"slurmctld {'started' if result.started else 'did NOT start'}; "
        f"{len(result.bad_lines)} error line(s); topology {'matches' if topology_ok else 'DIFFERS from'} the inventory"
    )
    return 0 if result.ok and topology_ok else 1


def import_site(args: argparse.Namespace) -> int:
    """Adopt an existing cluster: read its Slurm files (slurm.conf with its includes, gres.conf and
    per-host copies, topology.conf or topology.yaml, cgroup.conf) and write an inventory that
    renders the same cluster for the target release, printing where every setting went (model,
    extra, mapped from another release, dropped or refused with the reason). With --check, also
    compare what the inventory renders with the files (exit 1 on a difference)."""
    from gpucluster.slurm.view import SiteFiles
    from gpucluster.slurm_import.adopt import import_cluster, write_inventory
    from gpucluster.slurm_import.report import json_doc, text_lines

    gres: list[tuple[str | None, Path]] = []
    for item in args.gres_conf or []:
        hosts, sep, path = item.rpartition("=")
        gres.append((hosts if sep else None, Path(path)))
    source: Path = args.source
    if not source.exists():
        from gpucluster.errors import Problem

        raise InventoryError([Problem(str(source), "", "no such file or directory")])
    _check_output_directory(args)
    files = SiteFiles.in_directory(source, tuple(gres))
    result = write_inventory(import_cluster(files, args.slurm_version), args.out_dir, check=args.check)
    if args.as_json:
        from gpucluster.jsonout import write

        write(json_doc(result, str(source)))
    else:
        for line in text_lines(result, str(source)):
            out(line)
    return 0 if result.comparison is None or result.comparison.same else 1


def verify(args: argparse.Namespace) -> int:
    """Check the live cluster against the inventory, through the same Ansible inventory: nodes,
    jobs over every partition, GPUs in jobs, topology, accounts, drift (versions, munge key,
    config, users), nccl-tests. Exit 0 only when no check failed; 1 also when it cannot run."""
    from gpucluster.progress import Progress
    from gpucluster.tools import ToolMissing
    from gpucluster.verify.collect import ansible_runner, verify_cluster
    from gpucluster.verify.observed import VerifyError
    from gpucluster.verify.report import emit

    cluster = _load(args.inventory)
    try:
        with Progress() as progress:
            progress(f"verify: observing {cluster.name} through {args.inventory} (its verify playbook)")
            results = verify_cluster(cluster, ansible_runner(args.inventory))
            progress(f"verify: {len(results)} check(s) judged")
    except (VerifyError, ToolMissing) as exc:
        if args.as_json:
            from gpucluster.jsonout import error, write

            write(error(f"verify: {exc}"))
        err(f"verify: {exc}")
        return 1
    return emit(cluster, results, args.as_json)


def node_repaired(args: argparse.Namespace) -> int:
    """Declare nodes repaired: each enters the return-to-service gate (cluster.gate) and returns to
    service only when its burn-in (the `repaired` level, deep by default) passes. Bare-metal Slurm's
    nodes through playbooks/node-gate.yml; for Kubernetes' nodes it prints the taint to set."""
    from gpucluster.changes.gate import gate_request, send_to_gate
    from gpucluster.tools import ToolMissing
    from gpucluster.verify.collect import ansible_runner
    from gpucluster.verify.observed import VerifyError

    cluster = _load(args.inventory)
    request = gate_request(cluster, args.hosts)
    try:
        send_to_gate(request, ansible_runner(args.inventory))
    except (VerifyError, ToolMissing, FileNotFoundError) as exc:
        err(f"node repaired: {exc}")
        return 1
    from gpucluster.hostlists import compress

    if request.slurm:
        out(f"{compress(list(request.slurm))}: in the gate (repaired); `sinfo -R` shows where each stands")
    if request.kubernetes:
        out(f"Kubernetes' nodes: {request.kubectl()}")
    return 0


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


def completion(args: argparse.Namespace) -> int:
    """Print the completion script of bash or zsh for this command line (generated by shtab);
    the README says where to put it."""
    import shtab

    sys.stdout.write(shtab.complete(build_parser(with_lab_commands=True), shell=args.shell))
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
    action = parser.add_argument("inventory", type=Path, help=INVENTORY_HELP)
    action.complete = DIRECTORY_COMPLETION  # type: ignore[attr-defined]


def _json(parser: argparse.ArgumentParser, help_text: str) -> None:
    parser.add_argument("--json", dest="as_json", action="store_true", help=help_text)


def build_parser(with_lab_commands: bool = True) -> argparse.ArgumentParser:
    """The whole command line; the lab's subcommands only when asked for (they are never needed
    to run the others)."""
    parser = argparse.ArgumentParser(prog=PROG, description=DESCRIPTION, allow_abbrev=False)
    parser.set_defaults(run=None, parser=parser)
    parser.add_argument(
        "--version",
        action="store_true",
        help="Print the version; with --json also the Slurm releases and add-on versions it targets.",
    )
    parser.add_argument(
        "--json", dest="version_json", action="store_true", help="With --version: the version as JSON."
    )
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")

    parser_validate = add_command(commands, "validate", validate)
    _inventory(parser_validate)
    _json(parser_validate, "The result as JSON: ok, the counts, or every problem (file, line, key path).")

    parser_show = add_command(commands, "show", show)
    _inventory(parser_show)
    _json(
        parser_show, "The whole resolved model (hosts as lists), the release's facts and the fleet as JSON."
    )

    _add_render(commands)

    parser_plan = add_command(commands, "plan", plan)
    parser_plan.add_argument(
        "old", type=Path, help="The inventory as deployed (e.g. a checkout of the last release)."
    )
    parser_plan.add_argument("new", type=Path, help="The inventory to apply.")
    _json(parser_plan, "The plan as JSON, for automation (its schema: gpucluster.plan_schema, README).")

    _add_apply(commands)

    parser_trial = add_command(commands, "trial", trial)
    _inventory(parser_trial)
    parser_trial.add_argument(
        "--seconds",
        type=int,
        default=3,
        help="How long slurmctld runs before its state is read (default: 3).",
    )
    _json(parser_trial, "The result as JSON: started, error lines, notes, topology as seen and expected.")

    _add_import(commands)

    parser_verify = add_command(commands, "verify", verify)
    _inventory(parser_verify)
    _json(parser_verify, "The checks as JSON.")

    node = commands.add_parser(
        "node", help="Nodes of a live cluster: `node repaired`.", description="Nodes of a live cluster.",
        allow_abbrev=False,
    )  # fmt: skip
    node.set_defaults(run=None, parser=node)
    node_commands = node.add_subparsers(title="commands", metavar="COMMAND")
    parser_repaired = add_command(node_commands, "repaired", node_repaired)
    _inventory(parser_repaired)
    parser_repaired.add_argument("hosts", nargs="+", metavar="HOST", help="Nodes (names or hostlists).")

    parser_schema = add_command(commands, "schema", schema)
    parser_schema.add_argument(
        "--markdown", action="store_true", help="A Markdown reference of every key instead."
    )

    parser_completion = add_command(commands, "completion", completion)
    parser_completion.add_argument("shell", choices=["bash", "zsh"], help="The shell to complete in.")

    lab = commands.add_parser("lab", help=LAB_HELP, description=LAB_HELP, allow_abbrev=False)
    lab.set_defaults(run=None, parser=lab)
    if with_lab_commands:
        from gpucluster.lab.cli import add_lab_commands

        add_lab_commands(lab, add_command)
    return parser


def _add_apply(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`apply OLD NEW [--yes] [--dry-run] [--from-step N] [--inventory-dir DIR]`."""
    parser_apply = add_command(commands, "apply", apply)
    for name, help_text in (
        ("old", "The inventory as deployed (e.g. a checkout of the last release)."),
        ("new", "The inventory to apply."),
    ):
        action = parser_apply.add_argument(name, type=Path, help=help_text)
        action.complete = DIRECTORY_COMPLETION  # type: ignore[attr-defined]
    parser_apply.add_argument("--yes", "-y", action="store_true", help="Apply without asking.")
    parser_apply.add_argument(
        "--dry-run", action="store_true", help="Print the plan and the ansible-playbook runs only."
    )
    parser_apply.add_argument(
        "--from-step",
        type=int,
        default=1,
        metavar="N",
        help="Start at the plan's step N (after a step done by hand, or a failure fixed).",
    )
    inventory_dir = parser_apply.add_argument(
        "--inventory-dir",
        type=Path,
        default=None,
        help="The Ansible inventory the playbooks run with (default: NEW); it must render what NEW renders.",
    )
    inventory_dir.complete = DIRECTORY_COMPLETION  # type: ignore[attr-defined]


def _add_render(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`render INVENTORY [--out DIR] [--only PART]... [--json]`."""
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
        "--only",
        action="append",
        choices=list(OUTPUT_PARTS),
        metavar="PART",
        help="Render only this part, repeatable; the files of the other parts in the output directory are "
        "left as they are. Parts: "
        + "; ".join(f"{name} ({what})" for name, what in OUTPUT_PARTS.items())
        + ".",
    )
    _json(parser_render, "The files of the tree as JSON: path, sha256, size, whether this run wrote it.")


def _add_import(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`import SOURCE --slurm-version V --out DIR [--gres-conf [HOSTS=]FILE]... [--check] [--json]`."""
    parser_import = add_command(commands, "import", import_site)
    source = parser_import.add_argument(
        "source",
        type=Path,
        help="The cluster's Slurm directory (e.g. a copy of /etc/slurm) or its slurm.conf.",
    )
    source.complete = DIRECTORY_COMPLETION  # type: ignore[attr-defined]
    parser_import.add_argument(
        "--slurm-version",
        required=True,
        help="The Slurm release the inventory targets (YY.MM or YY.MM.P): settings of other releases are "
        "mapped to it where Slurm documents how.",
    )
    parser_import.add_argument(
        "--out",
        "-o",
        dest="out_dir",
        type=Path,
        required=True,
        help="The inventory directory to write (new or empty).",
    )
    parser_import.add_argument(
        "--gres-conf",
        action="append",
        metavar="[HOSTS=]FILE",
        help="Another gres.conf: a host's own copy (HOSTS a Slurm hostlist, e.g. gpu[01-04]=backup/gpu01/gres.conf), "
        "repeatable; the gres.conf beside slurm.conf is read anyway.",
    )
    parser_import.add_argument(
        "--check",
        action="store_true",
        help="Also render the inventory and compare it with the files as the target release reads both "
        "(exit 1 on a difference).",
    )
    _json(
        parser_import,
        "Where every setting went, the counts, the lines before and after and the check as JSON.",
    )


# Commands that run for minutes (playbooks, containers, daemons), for which main() turns the
# cyclic garbage collector back on.
LONG_RUNNING = (["lab"], ["verify"], ["trial"], ["apply"])


def run(argv: Sequence[str]) -> int:
    """Parse the command line and run its command; the exit code."""
    argv = list(argv)
    parser = build_parser(with_lab_commands=argv[:1] == ["lab"])
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        # Said by the command's own parser, with its usage line (exits 2).
        args.parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    if args.version or args.version_json:
        return _version(args, parser)
    if args.run is None:
        # A group without its command (`gpucluster`, `gpucluster lab`): its help, as a usage error.
        args.parser.print_help()
        return 2
    if argv[:1] in LONG_RUNNING:
        gc.enable()  # minutes of playbooks and daemons: garbage must not pile up
    try:
        code: int = args.run(args)
    except Exception as exc:
        if getattr(args, "as_json", False):
            # The document on stdout; main() still says it on stderr and picks the exit code.
            from gpucluster.jsonout import error, invalid, write

            if isinstance(exc, InventoryError):
                inventory = getattr(args, "inventory", None)
                write(invalid(exc.problems, None if inventory is None else str(inventory)))
            else:
                write(error(f"{type(exc).__name__}: {exc}"))
        raise
    return code


def _version(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """`gpucluster --version [--json]`; anything else on the line is a usage error."""
    if not args.version:
        parser.error("--json before a command is --version's: put a command's --json after it")
    if args.run is not None:
        parser.error("--version takes no command")
    from gpucluster import about

    if args.version_json:
        from gpucluster.jsonout import write

        write(about.version_doc())
    else:
        out(about.version_line())
    return 0


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


def _reader_gone() -> int:
    """The reader of stdout left (`gpucluster render ... | head -1`): no error message, the status a
    shell gives a writer SIGPIPE ended, and the rest of the output to /dev/null so that the
    interpreter's own flush at exit does not fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return 141


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
    except BrokenPipeError:
        code = _reader_gone()
    except Exception as exc:
        if os.environ.get("GPUCLUSTER_DEBUG"):
            raise
        err(f"error: {type(exc).__name__}: {exc} (set GPUCLUSTER_DEBUG=1 for a traceback)")
        code = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:
        code = _reader_gone()
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
