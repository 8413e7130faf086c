"""`gpucluster lab ...` subcommands (gpucluster.cli adds them when the command line starts with `lab`)."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

from gpucluster.console import err, out
from gpucluster.lab.paths import DEFAULT_INVENTORY, podman_env
from gpucluster.lab.shell import LabError
from gpucluster.progress import Progress
from gpucluster.tools import ToolMissing

# The CLI's way to add a subcommand (gpucluster.cli.add_command), handed in so the lab imports nothing back.
AddCommand = Callable[
    ["argparse._SubParsersAction[argparse.ArgumentParser]", str, Callable[[argparse.Namespace], int]],
    argparse.ArgumentParser,
]


def _fail(exc: Exception) -> int:
    err(f"lab: {exc}")
    return 1


def up(args: argparse.Namespace) -> int:
    """Build (or reuse) the lab: image, network, containers, playbooks/slurm.yml, smoke jobs."""
    started = time.monotonic()
    from gpucluster.lab import lab

    try:
        # Progress on stderr; the results (the playbook's recap, the smoke jobs) on stdout.
        with Progress() as progress:
            result = lab.up(args.inventory, progress, rebuild_image=args.rebuild_image)
        out(f"playbook: done in {result.seconds:.1f}s, changed={result.total_changed}")
        from gpucluster.layers import load_cluster

        failures = 0
        for check in lab.smoke(load_cluster(args.inventory)):
            out(f"$ {check.command}")
            out(check.output)
            failures += not check.ok
    except (LabError, ToolMissing) as exc:
        return _fail(exc)
    out(
        f"lab up in {time.monotonic() - started:.1f}s"
        + (f", {failures} smoke job(s) failed" if failures else "")
    )
    return 1 if failures else 0


def status(args: argparse.Namespace) -> int:
    """Whether the lab is absent, partly built or up (exit 0 only when up); when up, its nodes,
    fabric tree and jobs, else one line per problem with the command that fixes it."""
    from gpucluster.lab.health import report

    try:
        found = report()
    except LabError as exc:
        return _fail(exc)
    out(found.summary)
    for problem in found.problems:
        out(f"  {problem}")
    for title, text in found.sections:
        out(title)
        out(text)
    return 0 if found.state == "up" else 1


def remote_command(args: argparse.Namespace) -> list[str]:
    """What `lab run` runs: everything after its own options (after `--`, which is not passed on)."""
    command: list[str] = args.command
    return command[1:] if command[:1] == ["--"] else list(command)


def run(args: argparse.Namespace) -> int:
    """Run a command on a lab host (default: the login node, else the first controller), e.g.
    `gpucluster lab run -- srun -N2 hostname`."""
    import subprocess

    command = remote_command(args)
    if not command:
        err("lab run: give a command after --")
        return 2
    from gpucluster.lab import lab

    try:
        container = lab.run_container(args.host)
    except LabError as exc:
        return _fail(exc)
    tty = ["-t"] if sys.stdin.isatty() and sys.stdout.isatty() else []
    # /tmp: a directory every user can write (sbatch writes slurm-<id>.out to the current one).
    podman = [
        "podman",
        "exec",
        "-i",
        *tty,
        "--workdir=/tmp",
        *(["--user", args.user] if args.user else []),
        container,
        *command,
    ]
    sys.stdout.flush()
    return subprocess.run(podman, env=podman_env(), check=False).returncode


def verify(args: argparse.Namespace) -> int:
    """`gpucluster verify` against the lab (its generated inventory): a row per check, exit 0 only
    when none failed. Progress goes to stderr."""
    from gpucluster.lab.verify import verify as verify_lab
    from gpucluster.verify.observed import VerifyError
    from gpucluster.verify.report import emit

    try:
        with Progress() as progress:
            cluster, results = verify_lab(progress)
    except (LabError, ToolMissing, VerifyError) as exc:
        if args.as_json:
            from gpucluster.jsonout import error, write

            write(error(f"lab: {exc}"))
        return _fail(exc)
    return emit(cluster, results, args.as_json)


def repaired(args: argparse.Namespace) -> int:
    """`gpucluster node repaired` against the lab: the nodes enter the return-to-service gate and
    come back only when their burn-in passes."""
    from gpucluster.changes.gate import gate_request, send_to_gate
    from gpucluster.lab.inventory import write_inventory
    from gpucluster.lab.playbook import run_playbook
    from gpucluster.lab.state import LabState
    from gpucluster.layers import load_cluster

    state = LabState.load()
    if state is None or not state.inventory:
        return _fail(LabError("no lab is up (run `gpucluster lab up`)"))
    cluster = load_cluster(Path(state.inventory))
    request = gate_request(cluster, args.hosts)
    target = write_inventory(Path(state.inventory), cluster)
    try:
        with Progress() as progress:

            def run(playbook: Path, extra: list[str]) -> None:
                run_playbook(target, progress, playbook, extra)

            send_to_gate(request, run)
    except (LabError, ToolMissing) as exc:
        return _fail(exc)
    out(
        f"{', '.join(request.slurm)}: in the gate (repaired); `gpucluster lab run -- sinfo -R` shows where each stands"
    )
    return 0


def down(args: argparse.Namespace) -> int:
    """Remove everything the lab created (containers, namespaces, veths, bridge, state), nothing else."""
    from gpucluster.lab import lab

    try:
        with Progress() as progress:
            lab.down(progress, remove_image=args.image, left=args.left_behind)
    except LabError as exc:
        return _fail(exc)
    return 0


def add_lab_commands(lab: argparse.ArgumentParser, add_command: AddCommand) -> None:
    """The subcommands of `gpucluster lab`, each added by the CLI's `add_command`."""
    commands = lab.add_subparsers(title="commands", metavar="COMMAND")

    parser_up = add_command(commands, "up", up)
    parser_up.add_argument(
        "inventory",
        type=Path,
        nargs="?",
        default=DEFAULT_INVENTORY,
        help=f"Inventory to build the lab from (default: {DEFAULT_INVENTORY}).",
    )
    parser_up.add_argument(
        "--rebuild-image",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="Rebuild the image even if cached.",
    )

    add_command(commands, "status", status)

    parser_run = add_command(commands, "run", run)
    parser_run.add_argument(
        "--host",
        help="Lab host to run on (default: the first login node of the inventory, else the first controller).",
    )
    parser_run.add_argument("--user", "-u", help="Run as this Unix user.")
    parser_run.add_argument(
        "command", nargs=argparse.REMAINDER, help="The command and its arguments, after `--`."
    )

    parser_verify = add_command(commands, "verify", verify)
    parser_verify.add_argument("--json", dest="as_json", action="store_true", help="The checks as JSON.")

    parser_repaired = add_command(commands, "repaired", repaired)
    parser_repaired.add_argument("hosts", nargs="+", metavar="HOST", help="Lab nodes (names or hostlists).")

    parser_down = add_command(commands, "down", down)
    parser_down.add_argument("--image", action="store_true", help="Also remove the cached lab image.")
    parser_down.add_argument(
        "--left-behind",
        action="store_true",
        help="Without a state file here, remove the lab of this prefix found on the host (its labelled "
        "containers, its namespaces and its bridge), as a killed run leaves it.",
    )
