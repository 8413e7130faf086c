"""`gpucluster lab ...` subcommands."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from gpucluster.console import err, out
from gpucluster.lab.paths import DEFAULT_INVENTORY, podman_env
from gpucluster.lab.shell import LabError
from gpucluster.tools import ToolMissing

lab_app = typer.Typer(no_args_is_help=True)


def _fail(exc: Exception) -> typer.Exit:
    err.print(f"lab: {exc}", markup=False, highlight=False)
    return typer.Exit(1)


def _progress(started: float) -> Callable[[str], None]:
    def show(message: str) -> None:
        out.print(f"[dim]{time.monotonic() - started:6.1f}s[/dim] {message}", highlight=False)

    return show


@lab_app.command()
def up(
    inventory: Annotated[Path, typer.Argument(help="Inventory to build the lab from.")] = DEFAULT_INVENTORY,
    rebuild_image: Annotated[bool, typer.Option(help="Rebuild the image even if cached.")] = False,
) -> None:
    """Build (or reuse) the lab: image, network, containers, playbooks/slurm.yml, smoke jobs."""
    started = time.monotonic()
    progress = _progress(started)
    from gpucluster.lab import lab

    try:
        result = lab.up(inventory, progress, rebuild_image=rebuild_image)
        progress(f"playbook: done in {result.seconds:.1f}s, changed={result.total_changed}")
        from gpucluster.layers import load_cluster

        failures = 0
        for check in lab.smoke(load_cluster(inventory)):
            style = "green" if check.ok else "red"
            out.print(f"[{style}]$ {check.command}[/{style}]", highlight=False)
            out.print(check.output, markup=False, highlight=False)
            failures += not check.ok
    except (LabError, ToolMissing) as exc:
        raise _fail(exc) from exc
    out.print(
        f"lab up in {time.monotonic() - started:.1f}s"
        + (f", {failures} smoke job(s) failed" if failures else "")
    )
    if failures:
        raise typer.Exit(1)


@lab_app.command()
def status() -> None:
    """Whether the lab is absent, partly built or up (exit 0 only when up); when up, its nodes,
    fabric tree and jobs, else one line per problem with the command that fixes it."""
    from gpucluster.lab.health import report

    try:
        found = report()
    except LabError as exc:
        raise _fail(exc) from exc
    out.print(found.summary, markup=False, highlight=False)
    for problem in found.problems:
        out.print(f"  {problem}", markup=False, highlight=False)
    for title, text in found.sections:
        out.print(f"[bold]{title}[/bold]")
        out.print(text, markup=False, highlight=False)
    if found.state != "up":
        raise typer.Exit(1)


@lab_app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def run(
    ctx: typer.Context,
    user: Annotated[str | None, typer.Option("--user", "-u", help="Run as this Unix user.")] = None,
) -> None:
    """Run a command on the lab's controller, e.g. `gpucluster lab run -- srun -N2 hostname`."""
    import subprocess

    command = list(ctx.args)
    if not command:
        err.print("lab run: give a command after --")
        raise typer.Exit(2)
    from gpucluster.lab import lab

    try:
        container = lab.controller_container()
    except LabError as exc:
        raise _fail(exc) from exc
    tty = ["-t"] if sys.stdin.isatty() and sys.stdout.isatty() else []
    # /tmp: a directory every user can write (sbatch writes slurm-<id>.out to the current one).
    args = [
        "podman",
        "exec",
        "-i",
        *tty,
        "--workdir=/tmp",
        *(["--user", user] if user else []),
        container,
        *command,
    ]
    raise typer.Exit(subprocess.run(args, env=podman_env(), check=False).returncode)


@lab_app.command()
def verify(
    as_json: Annotated[bool, typer.Option("--json", help="The checks as JSON.")] = False,
) -> None:
    """`gpucluster verify` against the lab (its generated inventory): a row per check, exit 0 only
    when none failed. Progress goes to stderr."""
    from gpucluster.lab.verify import verify as verify_lab
    from gpucluster.verify.observed import VerifyError
    from gpucluster.verify.report import emit

    started = time.monotonic()

    def progress(message: str) -> None:
        err.print(f"[dim]{time.monotonic() - started:6.1f}s[/dim] {message}", highlight=False)

    try:
        cluster, results = verify_lab(progress)
    except (LabError, ToolMissing, VerifyError) as exc:
        raise _fail(exc) from exc
    code = emit(cluster, results, as_json, out.console)
    if code:
        raise typer.Exit(code)


@lab_app.command()
def down(
    image: Annotated[bool, typer.Option("--image", help="Also remove the cached lab image.")] = False,
) -> None:
    """Remove everything the lab created (containers, namespaces, veths, bridge, state), nothing else."""
    from gpucluster.lab import lab

    try:
        lab.down(_progress(time.monotonic()), remove_image=image)
    except LabError as exc:
        raise _fail(exc) from exc
