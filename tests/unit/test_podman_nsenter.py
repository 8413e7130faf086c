"""The podman_nsenter connection's lookup of a container's init process: asked of podman once,
then taken from the per-user cache while that process lives, asked again once it is gone.
(The connection itself runs every task of the lab and of the Molecule scenarios.)"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

PLUGIN = Path(__file__).resolve().parents[2] / "plugins" / "connection" / "podman_nsenter.py"


def load_plugin() -> ModuleType:
    spec = importlib.util.spec_from_file_location("podman_nsenter_under_test", PLUGIN)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


plugin = load_plugin()


@pytest.fixture
def process() -> Iterator[subprocess.Popen[bytes]]:
    """A live process standing in for a container's init (any process has a PID and a start time)."""
    proc = subprocess.Popen(["sleep", "60"])
    yield proc
    proc.kill()
    proc.wait()


def connection(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, podman_prints: str) -> Any:
    """A connection whose `podman` is a script that logs each call and prints `podman_prints`."""
    calls = tmp_path / "calls"
    podman = tmp_path / "podman"
    podman.write_text(f'#!/bin/sh\necho "$@" >> {calls}\necho {podman_prints}\n')
    podman.chmod(0o755)
    monkeypatch.setattr(plugin.tempfile, "gettempdir", lambda: str(tmp_path))
    conn = plugin.Connection.__new__(plugin.Connection)
    options = {"remote_addr": "gclab-gpu01", "podman_executable": str(podman)}
    conn.get_option = options.__getitem__
    return conn


def podman_calls(tmp_path: Path) -> int:
    calls = tmp_path / "calls"
    return len(calls.read_text().splitlines()) if calls.exists() else 0


def test_start_time_reads_the_stat_line_past_the_command_name() -> None:
    fields = Path(f"/proc/{os.getpid()}/stat").read_text().rsplit(")", 1)[1].split()
    assert plugin._start_time(os.getpid()) == fields[19]
    assert plugin._start_time(2**22 + 1) is None  # above pid_max: no such process


def test_init_pid_is_cached_while_its_process_lives(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, process: subprocess.Popen[bytes]
) -> None:
    conn = connection(monkeypatch, tmp_path, str(process.pid))
    assert conn._container_pid() == process.pid
    assert conn._container_pid() == process.pid
    assert podman_calls(tmp_path) == 1
    cache = tmp_path / f"gpucluster-podman-pids-{os.getuid()}"
    assert cache.stat().st_mode & 0o777 == 0o700


def test_a_restarted_container_is_looked_up_again(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, process: subprocess.Popen[bytes]
) -> None:
    conn = connection(monkeypatch, tmp_path, str(process.pid))
    cached = tmp_path / f"gpucluster-podman-pids-{os.getuid()}" / "gclab-gpu01"
    cached.parent.mkdir(mode=0o700)
    # The same PID with another start time: a process that is not the container's old init.
    cached.write_text(f"{process.pid} 1\n")
    assert conn._container_pid() == process.pid
    assert podman_calls(tmp_path) == 1
    assert cached.read_text().split() == [str(process.pid), plugin._start_time(process.pid)]


def test_a_stopped_container_is_an_unreachable_host(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    conn = connection(monkeypatch, tmp_path, "0")  # podman's PID of a stopped container
    with pytest.raises(plugin.AnsibleConnectionFailure, match="gclab-gpu01 is not running"):
        conn._container_pid()
