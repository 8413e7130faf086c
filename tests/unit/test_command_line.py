"""The command line itself: what a command loads, its usage errors and help, and the cache of
compiled templates (start-up is most of the time of a command like `render`; the figures are
benchmarks/cli_startup.py's, these tests check behaviour only)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.cli_startup import MODULES_AT_EXIT
from gpucluster.cli import build_parser
from gpucluster.render.files import MANIFEST
from tests.conftest import REPO, run_cli

# importlib.metadata: pydantic's plugin loader would import it (see cli.skip_plugin_discovery).
NEVER_ON_RENDER = (
    "typer",
    "click",
    "rich",
    "gpucluster.cloud",
    "pulumi",
    "gpucluster.lab",
    "importlib.metadata",
    # Shell completion is a script generated once (`gpucluster completion`), never work at start-up.
    "shtab",
)
PROGRAM = Path(sys.executable).parent / "gpucluster"


def modules_of(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    modules_file = tmp_path / "modules.json"
    proc = subprocess.run(
        [sys.executable, "-c", MODULES_AT_EXIT, str(modules_file), *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), **(env or {})},
        check=False,
    )
    return proc, set(json.loads(modules_file.read_text()))


def loaded(modules: set[str], package: str) -> list[str]:
    return sorted(m for m in modules if m == package or m.startswith(f"{package}."))


def test_render_loads_no_cli_framework_terminal_library_or_unused_layer(tmp_path: Path) -> None:
    proc, modules = modules_of(tmp_path, "render", "inventories/superpod", "--out", str(tmp_path / "out"))
    assert proc.returncode == 0, proc.stderr
    # The Kubernetes layer was used (its files were written) ...
    assert (tmp_path / "out" / "kubernetes" / "manifest.yaml").is_file()
    assert "gpucluster.k8s.render" in modules
    # ... and nothing the command does not need was imported.
    for package in NEVER_ON_RENDER:
        assert not loaded(modules, package), loaded(modules, package)


def test_validate_of_a_core_inventory_loads_no_layer(tmp_path: Path) -> None:
    proc, modules = modules_of(tmp_path, "validate", "inventories/lab")
    assert proc.returncode == 0, proc.stderr
    for package in (*NEVER_ON_RENDER, "gpucluster.k8s", "jinja2"):
        assert not loaded(modules, package), loaded(modules, package)


def test_pydantic_plugins_are_looked_for_when_the_user_enables_them(tmp_path: Path) -> None:
    """The stand-in loader is only used when PYDANTIC_DISABLE_PLUGINS disables every plugin (the
    command line's default); a user who clears the variable gets pydantic's own loader."""
    proc, modules = modules_of(tmp_path, "validate", "inventories/lab", env={"PYDANTIC_DISABLE_PLUGINS": ""})
    assert proc.returncode == 0, proc.stderr
    assert "importlib.metadata" in modules


def test_pydantic_own_loader_finds_no_plugin_when_they_are_disabled(monkeypatch: pytest.MonkeyPatch) -> None:
    """What cli.skip_plugin_discovery stands in for: pydantic's get_plugins, which with the
    variable set returns no plugin (if pydantic renamed or moved it, this fails first)."""
    from pydantic.plugin._loader import get_plugins

    monkeypatch.setenv("PYDANTIC_DISABLE_PLUGINS", "__all__")
    assert tuple(get_plugins()) == ()


def test_the_program_flushes_its_whole_output_before_it_exits(tmp_path: Path) -> None:
    """`gpucluster` (the installed program) ends a short command with os._exit: everything it
    printed and wrote must be complete, to a pipe as to a terminal, and its exit codes the same."""
    out_dir = tmp_path / "out"
    proc = subprocess.run(
        [str(PROGRAM), "render", "inventories/superpod", "--out", str(out_dir)],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    count = int(lines[0].split()[0])
    written = [line.split()[-1] for line in lines[1:]]
    listed = (out_dir / MANIFEST).read_text().split()
    assert len(written) == count == len(listed)
    assert sorted(written) == sorted(str(out_dir / rel) for rel in listed)
    assert all(Path(path).is_file() for path in written)
    shown = subprocess.run(
        [str(PROGRAM), "show", "--json", "inventories/superpod"],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)  # all of a long JSON document, not a truncated one
    bad = subprocess.run(
        [str(PROGRAM), "validate", str(tmp_path / "missing")], capture_output=True, text=True, check=False
    )
    assert bad.returncode == 2
    assert bad.stderr.endswith("1 problem(s) found\n"), bad.stderr


def test_rendered_files_are_the_same_with_a_cold_warm_or_unusable_template_cache(tmp_path: Path) -> None:
    """The compiled templates' cache changes how fast, never what is written."""
    cache = tmp_path / "cache"
    unusable = tmp_path / "not-a-directory"
    unusable.write_text("")

    def render(name: str, cache_home: Path) -> dict[str, str]:
        out = tmp_path / name
        proc = subprocess.run(
            [sys.executable, "-m", "gpucluster.cli", "render", "inventories/superpod", "--out", str(out)],
            capture_output=True,
            text=True,
            cwd=REPO,
            env={**os.environ, "XDG_CACHE_HOME": str(cache_home)},
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        return {str(p.relative_to(out)): p.read_text() for p in sorted(out.rglob("*")) if p.is_file()}

    cold = render("cold", cache)
    entries = sorted((cache / "gpucluster" / "jinja").iterdir())
    assert entries, "the first render keeps the compiled templates"
    assert all(oct(entry.stat().st_mode & 0o777) == "0o600" for entry in entries)
    assert oct((cache / "gpucluster" / "jinja").stat().st_mode & 0o777) == "0o700"
    warm = render("warm", cache)
    without = render("without", unusable)
    assert cold == warm == without
    assert any(name.startswith("slurm/") for name in cold)


def test_a_cache_entry_from_other_template_source_is_not_used(tmp_path: Path) -> None:
    from gpucluster.render import templating

    source = tmp_path / "templates"
    source.mkdir()
    (source / "t.j2").write_text("one {{ x }}\n")
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)

    def render() -> str:
        import jinja2

        env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(source)), **templating.SETTINGS)
        env.bytecode_cache = templating.CompiledTemplates(cache, templating._fingerprint(env))
        return env.get_template("t.j2").render(x=1)

    assert render() == "one 1\n"
    (source / "t.j2").write_text("two {{ x }}\n")
    assert render() == "two 1\n"


@pytest.mark.parametrize(
    "command",
    [
        [],
        ["validate"],
        ["show"],
        ["render"],
        ["plan"],
        ["trial"],
        ["verify"],
        ["schema"],
        ["lab"],
        ["lab", "up"],
        ["lab", "status"],
        ["lab", "run"],
        ["lab", "verify"],
        ["lab", "down"],
    ],
)
def test_every_command_has_help(command: list[str]) -> None:
    proc = run_cli(*command, "--help")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"usage: {' '.join(['gpucluster', *command])}")
    assert proc.stderr == ""


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ([], "usage: gpucluster"),
        (["lab"], "usage: gpucluster lab"),
        (["render"], "the following arguments are required: inventory"),
        (["bogus"], "invalid choice: 'bogus'"),
        (
            ["render", "inventories/lab", "--bogus"],
            "gpucluster render: error: unrecognized arguments: --bogus",
        ),
        (["validate", "inventories/lab", "extra"], "unrecognized arguments: extra"),
        (["trial", "inventories/lab", "--seconds", "x"], "argument --seconds: invalid int value: 'x'"),
        (["lab", "run"], "lab run: give a command after --"),
        (["lab", "run", "--"], "lab run: give a command after --"),
    ],
)
def test_usage_errors_exit_2_without_a_traceback(args: list[str], says: str) -> None:
    proc = run_cli(*args)
    assert proc.returncode == 2, proc
    assert says in proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr


def test_lab_run_passes_everything_after_the_double_dash() -> None:
    from gpucluster.lab.cli import remote_command

    parser = build_parser(with_lab_commands=True)
    args = parser.parse_args(["lab", "run", "--user", "bob", "--", "srun", "-N2", "--user", "x", "--", "id"])
    assert (args.user, remote_command(args)) == ("bob", ["srun", "-N2", "--user", "x", "--", "id"])
    args = parser.parse_args(["lab", "run", "--", "sh", "-c", "exit 7"])
    assert (args.user, remote_command(args)) == (None, ["sh", "-c", "exit 7"])
    args = parser.parse_args(["lab", "run", "-u", "bob", "sinfo", "-N"])
    assert (args.user, remote_command(args)) == ("bob", ["sinfo", "-N"])


def test_render_options() -> None:
    parser = build_parser(with_lab_commands=False)
    args = parser.parse_args(["render", "inv", "-o", "out", "--only", "slurm", "--only", "helm"])
    assert (args.inventory, args.out_dir, args.only) == (Path("inv"), Path("out"), ["slurm", "helm"])
    args = parser.parse_args(["render", "inv"])
    assert (args.out_dir, args.only) == (Path("build"), None)


def test_a_reader_that_leaves_early_gets_no_error(tmp_path: Path) -> None:
    """`gpucluster render ... | head -1`: the reader closes the pipe after one line; the program
    says nothing on stderr and ends as a writer SIGPIPE ended (141), or 0 if it had finished."""
    reader, writer = os.pipe()
    proc = subprocess.Popen(
        [str(PROGRAM), "render", "inventories/superpod", "--out", str(tmp_path / "out")],
        stdout=writer,
        stderr=subprocess.PIPE,
        cwd=REPO,
    )
    os.close(writer)
    os.close(reader)  # before the program writes anything: its first write fails
    _, stderr = proc.communicate(timeout=60)
    assert stderr.decode() == ""
    assert proc.returncode in (0, 141)
