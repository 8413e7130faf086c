"""Plain-text output for the command line: lines, tables and trees, with nothing to import.

Most commands print a line or two; a terminal library cost more to import than validating a
whole inventory. Lines are never wrapped (paths and hostlists stay whole, and stay greppable).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence


def out(text: str = "") -> None:
    """One line (or several) on stdout."""
    sys.stdout.write(f"{text}\n")


def err(text: str = "") -> None:
    """One line (or several) on stderr."""
    sys.stderr.write(f"{text}\n")


def table(title: str, columns: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A boxed table under its title, a column as wide as its widest cell; a cell may hold lines."""
    body = [[cell.split("\n") for cell in row] for row in rows]
    widths = [len(name) for name in columns]
    for row in body:
        for index, lines in enumerate(row):
            widths[index] = max(widths[index], *(len(line) for line in lines))

    def rule(left: str, fill: str, middle: str, right: str) -> str:
        return left + middle.join(fill * (width + 2) for width in widths) + right

    def line(cells: Sequence[str], edge: str, inner: str) -> str:
        padded = (f" {cell.ljust(width)} " for cell, width in zip(cells, widths, strict=True))
        return edge + inner.join(padded) + edge

    text = [title, rule("┏", "━", "┳", "┓"), line(columns, "┃", "┃"), rule("┡", "━", "╇", "┩")]
    for row in body:
        for number in range(max((len(lines) for lines in row), default=1)):
            text.append(line([lines[number] if number < len(lines) else "" for lines in row], "│", "│"))
    text.append(rule("└", "─", "┴", "┘"))
    return "\n".join(text)


class Tree:
    """A labelled tree drawn with guide lines (├── └── │)."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.children: list[Tree] = []

    def add(self, label: str) -> Tree:
        child = Tree(label)
        self.children.append(child)
        return child

    def render(self) -> str:
        lines = [self.label]
        self._branches(lines, "")
        return "\n".join(lines)

    def _branches(self, lines: list[str], prefix: str) -> None:
        for number, child in enumerate(self.children, 1):
            last = number == len(self.children)
            lines.append(prefix + ("└── " if last else "├── ") + child.label)
            child._branches(lines, prefix + ("    " if last else "│   "))
