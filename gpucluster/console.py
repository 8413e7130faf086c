"""Console output for the command line, with rich loaded on first use: most commands print a
line or two, and importing rich costs more than validating a whole inventory."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console


PIPED_WIDTH = 200


class LazyConsole:
    """A rich Console made when something is first printed (soft wrap: paths and hostlists stay whole)."""

    def __init__(self, *, stderr: bool = False) -> None:
        self._stderr = stderr
        self._console: Console | None = None

    @property
    def console(self) -> Console:
        if self._console is None:
            from rich.console import Console

            stream = sys.stderr if self._stderr else sys.stdout
            # Piped or redirected output has no terminal width; 80 columns would cut table cells.
            width = None if stream.isatty() else PIPED_WIDTH
            self._console = Console(stderr=self._stderr, soft_wrap=True, width=width)
        return self._console

    def print(self, *objects: Any, **options: Any) -> None:
        self.console.print(*objects, **options)


out = LazyConsole()
err = LazyConsole(stderr=True)
