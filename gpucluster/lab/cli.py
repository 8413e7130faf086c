"""`gpucluster lab ...` subcommands."""

from __future__ import annotations

import typer

lab_app = typer.Typer(no_args_is_help=True)
