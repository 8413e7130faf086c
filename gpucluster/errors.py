"""Problems found in an inventory, reported as `<file>: <key path>: <what is wrong>`."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Problem:
    """One thing wrong with the inventory, located by file and key path."""

    file: str
    path: str
    message: str
    line: int | None = None

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.path}: {self.message}" if self.path else f"{where}: {self.message}"


class InventoryError(Exception):
    """Raised with every problem found; the CLI prints them and exits 2."""

    def __init__(self, problems: Iterable[Problem]) -> None:
        self.problems: list[Problem] = sorted(
            set(problems), key=lambda p: (p.file, p.line or 0, p.path, p.message)
        )
        super().__init__("\n".join(str(p) for p in self.problems))


def format_path(parts: Sequence[str | int]) -> str:
    """`("cluster", "partitions", 0, "name")` -> `cluster.partitions[0].name`."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out
