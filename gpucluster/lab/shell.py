"""Running host commands with readable failures."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence


class LabError(RuntimeError):
    """A lab step failed; the message says which command and what it printed."""


def run(
    cmd: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    check: bool = True,
    input_text: str | None = None,
    timeout: float | None = None,
) -> subprocess.CompletedProcess[str]:
    try:
        proc = subprocess.run(
            list(cmd),
            env=dict(env) if env is not None else None,
            input=input_text,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except FileNotFoundError as exc:
        raise LabError(f"{cmd[0]}: not installed (run scripts/setup.sh)") from exc
    except subprocess.TimeoutExpired as exc:
        raise LabError(f"timed out after {timeout}s: {' '.join(cmd)}") from exc
    if check and proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip()
        raise LabError(f"command failed ({proc.returncode}): {' '.join(cmd)}\n{detail}")
    return proc
