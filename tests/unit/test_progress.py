"""Progress on stderr: live on a terminal (a real pseudo-terminal here), plain lines under CI, in
a pipe or with TERM=dumb, and no colour with NO_COLOR."""

from __future__ import annotations

import io
import os
import pty
import re
import subprocess
import sys
import time

import pytest

from gpucluster.progress import CLEAR_LINE, DIM, Progress, is_live

# Two steps 0.35 s apart, as a long command would show them.
STEPS = """\
import time
from gpucluster.progress import Progress
with Progress(interval=0.05) as progress:
    progress("first step")
    time.sleep(0.35)
    progress("second step")
    time.sleep(0.2)
"""
ESCAPE = re.compile(r"\x1b\[")


def stderr_of_steps(env: dict[str, str], terminal: bool) -> str:
    """Run STEPS in a child whose stderr is a pseudo-terminal, or a pipe."""
    environ = {key: value for key, value in os.environ.items() if key not in ("CI", "NO_COLOR", "TERM")}
    environ.update(env)
    if not terminal:
        proc = subprocess.run(
            [sys.executable, "-c", STEPS], env=environ, capture_output=True, text=True, check=True
        )
        return proc.stderr
    leader, follower = pty.openpty()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-c", STEPS], env=environ, stderr=follower, stdout=subprocess.DEVNULL
        )
        os.close(follower)
        chunks = []
        while True:
            try:
                data = os.read(leader, 4096)
            except OSError:  # the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        assert proc.wait(timeout=30) == 0
    finally:
        os.close(leader)
    return b"".join(chunks).decode()


def test_plain_lines_in_a_pipe() -> None:
    text = stderr_of_steps({}, terminal=False)
    assert not ESCAPE.search(text) and "\r" not in text
    lines = text.splitlines()
    assert [line.split("s ", 1)[1] for line in lines] == ["first step", "second step"]
    assert 0.3 <= float(lines[1].split("s ", 1)[0]) < 5


def test_live_status_line_with_elapsed_seconds_on_a_terminal() -> None:
    text = stderr_of_steps({"TERM": "xterm"}, terminal=True)
    # The status line is redrawn while a step runs, and cleared at the end.
    assert text.count(CLEAR_LINE) > 4
    assert text.endswith(CLEAR_LINE)
    assert DIM in text
    assert "first step" in text and "second step" in text


def test_no_colour_with_no_color_but_still_live() -> None:
    text = stderr_of_steps({"TERM": "xterm", "NO_COLOR": "1"}, terminal=True)
    assert DIM not in text
    assert CLEAR_LINE in text


@pytest.mark.parametrize("env", [{"TERM": "xterm", "CI": "true"}, {"TERM": "dumb"}])
def test_plain_on_a_terminal_under_ci_or_dumb(env: dict[str, str]) -> None:
    text = stderr_of_steps(env, terminal=True)
    assert not ESCAPE.search(text)
    assert [line.split("s ", 1)[1] for line in text.splitlines()] == ["first step", "second step"]


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_is_live() -> None:
    assert is_live(FakeTerminal(), {"TERM": "xterm"})
    assert is_live(FakeTerminal(), {"TERM": "xterm", "CI": "false"})
    assert not is_live(FakeTerminal(), {"TERM": "xterm", "CI": "1"})
    assert not is_live(io.StringIO(), {"TERM": "xterm"})


def test_step_lines_keep_counting_from_the_start() -> None:
    stream = io.StringIO()
    with Progress(stream, live=False) as progress:
        progress.step("one")
        time.sleep(0.05)
        progress("two")
    first, second = (float(line.split("s ", 1)[0]) for line in stream.getvalue().splitlines())
    assert first < second
