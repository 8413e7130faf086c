"""Progress of a long command (lab up, verify, trial) on stderr, with the elapsed time.

On a terminal: each step as a line, and below it a status line that keeps counting the seconds of
the step under way (rewritten in place, cleared at the end). In CI, into a pipe or a file, or on
TERM=dumb: the same step lines and nothing else, no escape codes. Colour (the elapsed time dimmed)
only on a terminal and never when NO_COLOR is set (https://no-color.org). stdout stays for results.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Mapping
from types import TracebackType
from typing import TextIO

DIM = "\033[2m"
RESET = "\033[0m"
CLEAR_LINE = "\r\033[K"
SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


def is_live(stream: TextIO, environ: Mapping[str, str] | None = None) -> bool:
    """Whether `stream` is a terminal a person watches: not under CI, not TERM=dumb."""
    env = os.environ if environ is None else environ
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        return False
    under_ci = env.get("CI", "").lower() not in ("", "0", "false")
    return tty and not under_ci and env.get("TERM") != "dumb"


def wants_colour(stream: TextIO, environ: Mapping[str, str] | None = None) -> bool:
    env = os.environ if environ is None else environ
    return is_live(stream, env) and not env.get("NO_COLOR")


class Progress:
    """`step(message)` as a command goes on; `with Progress(...)` clears the live line at the end.

    Also a callable (`progress("message")`), the form the lab's functions take."""

    def __init__(
        self,
        stream: TextIO | None = None,
        *,
        live: bool | None = None,
        colour: bool | None = None,
        interval: float = 0.1,
    ) -> None:
        self.stream = sys.stderr if stream is None else stream
        self.live = is_live(self.stream) if live is None else live
        self.colour = (wants_colour(self.stream) if colour is None else colour) and self.live
        self.started = time.monotonic()
        self.interval = interval
        self._current = ""
        self._step_started = self.started
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def _stamp(self, seconds: float) -> str:
        text = f"{seconds:6.1f}s"
        return f"{DIM}{text}{RESET}" if self.colour else text

    def step(self, message: str) -> None:
        """A new step: its line (elapsed time since the start), and on a terminal the live status."""
        with self._lock:
            now = time.monotonic()
            prefix = CLEAR_LINE if self.live and self._current else ""
            self.stream.write(f"{prefix}{self._stamp(now - self.started)} {message}\n")
            self._current, self._step_started = message, now
            if self.live:
                self._draw(now)
            self.stream.flush()
        if self.live and self._ticker is None:
            self._ticker = threading.Thread(target=self._tick, name="gpucluster-progress", daemon=True)
            self._ticker.start()

    __call__ = step

    def _draw(self, now: float) -> None:
        frame = SPINNER[int((now - self.started) / self.interval) % len(SPINNER)]
        self.stream.write(
            f"{CLEAR_LINE}{frame} {self._stamp(now - self.started)} {self._current} "
            f"({now - self._step_started:.0f}s)"
        )

    def _tick(self) -> None:
        while not self._stop.wait(self.interval):
            with self._lock:
                if self._current:
                    self._draw(time.monotonic())
                    self.stream.flush()

    def close(self) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()
            self._ticker = None
        with self._lock:
            if self.live and self._current:
                self.stream.write(CLEAR_LINE)
                self.stream.flush()
            self._current = ""

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
