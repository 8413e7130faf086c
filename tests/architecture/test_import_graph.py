"""The package's floors: no import circle, and no import that runs upward (a lower floor importing a
higher one). Read from the code's own import statements (module level, in functions and under
TYPE_CHECKING alike), so a new module needs no entry here unless it opens a new top-level package.

The floors, lowest first (gpucluster/README.md draws the same):
0 helpers       the package root (its version), errors, inventory, yamlfile, hostlists, ... and programs/
                (installed on hosts, standalone), pool/ (the shared pools' steps and policy, standalone)
1 model         the ground floor: the typed model, the release table, the resolved Cluster
2 core          the resolver, the core checks, the core renderers (render/)
3 layers        slurm, nodesoftware (4: k8s, monitoring, which read Slurm's and the node software's;
                5: cloud, which builds on the Kubernetes layer)
6 composition   layers.py (every check, every layer), rendering.py (every renderer)
7 features      changes/ (plan), slurm_import/, verify/, trial/, lab/, show, resolved, reference, about
8 commands      cli, __main__
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "gpucluster"

HELPERS = 0
FLOORS: dict[str, int] = {
    "model": 1,
    "resolve": 2,
    "checks": 2,
    "render": 2,
    "slurm": 3,
    "nodesoftware": 3,
    "k8s": 4,
    "monitoring": 4,
    "cloud": 5,
    # The Pulumi program the stacks run: an entry point like the CLI, above every layer it composes.
    "cloud.program": 7,
    "layers": 6,
    "rendering": 6,
    "changes": 7,
    "slurm_import": 7,
    "verify": 7,
    "trial": 7,
    "lab": 7,
    "show": 7,
    "resolved": 7,
    "reference": 7,
    "about": 7,
    "cli": 8,
    "__main__": 8,
}


def modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def floor(module: str) -> int:
    """The floor of a module: its longest named prefix's, else a helper's."""
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        prefix = ".".join(parts[:n])
        if prefix in FLOORS:
            return FLOORS[prefix]
    return HELPERS  # the package root (its version only) and the helpers


def imports(module: str, path: Path, known: dict[str, Path]) -> Iterator[tuple[str, int]]:
    """(imported module of the package, line) for every import statement of a module."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ["gpucluster", *module.split(".")] if module else ["gpucluster"]
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            names = [f"{source}.{alias.name}" for alias in node.names]
        for name in names:
            if name != "gpucluster" and not name.startswith("gpucluster."):
                continue
            target = name.removeprefix("gpucluster").removeprefix(".")
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target != module and (target in known or target == ""):
                yield target, node.lineno


def graph() -> tuple[dict[str, set[str]], list[str]]:
    known = modules()
    edges: dict[str, set[str]] = {m: set() for m in known}
    upward = []
    for module, path in sorted(known.items()):
        for target, line in imports(module, path, known):
            edges[module].add(target)
            if floor(target) > floor(module):
                upward.append(
                    f"gpucluster/{path.relative_to(PACKAGE)}:{line}: {module or 'gpucluster'} (floor "
                    f"{floor(module)}) imports {target} (floor {floor(target)})"
                )
    return edges, upward


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_circle() -> None:
    edges, _ = graph()
    assert circles(edges) == [], "modules that import each other, directly or around a circle"


def test_no_import_runs_upward() -> None:
    _, upward = graph()
    assert upward == [], "\n".join(upward)


def test_the_check_finds_a_circle_and_an_upward_import() -> None:
    # The detector itself, on a made-up graph: a -> b -> c -> a is one circle; d alone is none.
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c"]]
    assert floor("model.spec") < floor("slurm.render") < floor("layers") < floor("cli")
    assert floor("cloud.program") > floor("cloud.pools")
    assert floor("errors") == HELPERS
