"""`gpucluster completion bash|zsh`: scripts generated from the command line by shtab, which a
real bash completes with and a real zsh loads; normal runs never import shtab."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import shtab

from gpucluster.cli import DIRECTORY_COMPLETION
from tests.conftest import REPO, run_cli


@pytest.fixture(scope="module")
def bash_script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    proc = run_cli("completion", "bash")
    assert proc.returncode == 0, proc.stderr
    path = tmp_path_factory.mktemp("completion") / "gpucluster.bash"
    path.write_text(proc.stdout)
    return path


def complete(script: Path, line: str) -> list[str]:
    """What bash offers for `line` (the cursor at its end), as a user's TAB would."""
    words = line.split(" ")
    program = f"""
        source {shlex.quote(str(script))}
        COMP_LINE={shlex.quote(line)}; COMP_POINT=${{#COMP_LINE}}
        COMP_WORDS=({" ".join(shlex.quote(w) for w in words)}); COMP_CWORD={len(words) - 1}
        _shtab_gpucluster
        printf '%s\\n' "${{COMPREPLY[@]}}"
    """
    proc = subprocess.run(["bash", "-c", program], capture_output=True, text=True, cwd=REPO, check=True)
    return [word for word in proc.stdout.splitlines() if word]


def test_bash_completes_commands_options_and_inventory_directories(bash_script: Path) -> None:
    assert complete(bash_script, "gpucluster va") == ["validate"]
    assert set(complete(bash_script, "gpucluster ")) >= {"validate", "render", "plan", "lab", "completion"}
    assert complete(bash_script, "gpucluster lab ") == ["up", "status", "run", "verify", "repaired", "down"]
    assert "--json" in complete(bash_script, "gpucluster render --")
    assert complete(bash_script, "gpucluster validate inventories/su") == ["inventories/superpod"]
    assert complete(bash_script, "gpucluster completion ") == ["bash", "zsh"]
    assert complete(bash_script, "gpucluster app") == ["apply"]
    assert {"--yes", "--dry-run", "--from-step", "--inventory-dir"} <= set(
        complete(bash_script, "gpucluster apply --")
    )
    assert complete(bash_script, "gpucluster apply inventories/su") == ["inventories/superpod"]


def test_zsh_loads_its_script(tmp_path: Path) -> None:
    zsh = shutil.which("zsh")
    assert zsh, "zsh is missing (scripts/debian-packages.txt installs it)"
    proc = run_cli("completion", "zsh")
    assert proc.returncode == 0, proc.stderr
    functions = tmp_path / "functions"
    functions.mkdir()
    (functions / "_gpucluster").write_text(proc.stdout)
    program = f"""
        fpath=({shlex.quote(str(functions))} $fpath)
        autoload -Uz compinit && compinit -u -d {shlex.quote(str(tmp_path / "zcompdump"))}
        autoload -Uz _gpucluster && whence -w _gpucluster && print -r -- $_comps[gpucluster]
    """
    loaded = subprocess.run([zsh, "-f", "-c", program], capture_output=True, text=True, check=False)
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.splitlines() == ["_gpucluster: function", "_gpucluster"]
    assert "validate:" in proc.stdout and "_files -/" in proc.stdout


def test_the_directory_completion_is_shtab_own() -> None:
    # Spelt out in gpucluster.cli so that building the parser does not import shtab.
    assert {shell: shtab.DIRECTORY[shell] for shell in ("bash", "zsh")} == DIRECTORY_COMPLETION
