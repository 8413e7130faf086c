"""Run gpucluster commands in this process with the gpucluster this Python imports (an installed
wheel, or the clone's editable install), and write what each printed and returned as JSON.

    python run_commands.py COMMANDS.json RESULTS.json     (COMMANDS: a list of argv lists)

Standard library only: it runs in the fresh virtualenv of tests/packaging/test_wheel.py too.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys


def run(argv: list[str]) -> dict[str, object]:
    from gpucluster.cli import main

    stdout, stderr = io.StringIO(), io.StringIO()
    code: object = None
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            main(argv)
        except SystemExit as exc:
            code = exc.code
    return {"argv": argv, "code": code, "stdout": stdout.getvalue(), "stderr": stderr.getvalue()}


def main() -> None:
    commands_file, results_file = sys.argv[1:3]
    with open(commands_file, encoding="utf-8") as handle:
        commands = json.load(handle)
    results = [run(argv) for argv in commands]
    import gpucluster

    doc = {"gpucluster": gpucluster.__file__, "results": results}
    with open(results_file, "w", encoding="utf-8") as handle:
        json.dump(doc, handle, indent=1)


if __name__ == "__main__":
    main()
