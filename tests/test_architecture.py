"""The import contract (docs/architecture.md): arrows point down only, and no module circles.

Every module of the ``mathsearch`` namespace is read with :mod:`ast`; its imports (at module level
and inside functions, ``import_module`` strings included; not the ``if TYPE_CHECKING:`` imports
of annotations, which never run) are its arrows. A module's floor is its
room's; an arrow may point to the same room or a lower floor, never up or sideways into another
room of the same floor, and the modules' graph has no cycle.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

#: room -> (floor, folder). Lowest first; rooms on one floor do not import each other.
ROOMS: dict[str, tuple[int, Path]] = {
    "core": (0, REPO / "mathsearch" / "core"),
    "indexer": (1, REPO / "indexer"),
    "runtime": (2, REPO / "mathsearch" / "runtime"),
    "encoders": (2, REPO / "encoders"),
    "export": (3, REPO / "export"),
    "opensearch": (4, REPO / "opensearch"),
    "workers": (5, REPO / "workers"),
    "serve": (6, REPO / "mathsearch" / "serve"),
    "evaluation": (6, REPO / "mathsearch" / "evaluation"),
    "stack": (6, REPO / "mathsearch" / "stack"),
    "bench": (7, REPO / "mathsearch" / "bench"),
    "cli": (8, REPO / "mathsearch" / "cli"),
}
#: ``mathsearch/__init__.py`` (lazy re-exports for library users) and ``__main__``.
TOP_FLOOR = 9


def _modules() -> dict[str, Path]:
    found = {"mathsearch": REPO / "mathsearch" / "__init__.py"}
    found["mathsearch.__main__"] = REPO / "mathsearch" / "__main__.py"
    for room, (_, folder) in ROOMS.items():
        for path in folder.rglob("*.py"):
            parts = [p for p in path.relative_to(folder).with_suffix("").parts if p != "__init__"]
            found[".".join(["mathsearch", room, *parts])] = path
    return found


MODULES = _modules()


def _targets(name: str, tree: ast.AST) -> Iterator[str]:
    def known(candidate: str) -> str | None:
        while candidate and candidate not in MODULES:
            candidate = candidate.rpartition(".")[0]
        return candidate or None

    typing_only = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for stmt in node.body
        for inner in ast.walk(stmt)
    }
    for node in ast.walk(tree):
        if id(node) in typing_only:  # annotations only: no import at run time
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                target = known(f"{node.module}.{alias.name}")
                if target:
                    yield target
        elif isinstance(node, ast.Import):
            for alias in node.names:
                target = known(alias.name)
                if target:
                    yield target
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value.split(":")[0]
            if text.startswith("mathsearch.") and text in MODULES:
                yield text


def _graph() -> dict[str, set[str]]:
    graph = {}
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        graph[name] = {t for t in _targets(name, tree) if t != name}
    return graph


GRAPH = _graph()


def _room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in ROOMS else "mathsearch"


def _floor(module: str) -> int:
    room = _room(module)
    return ROOMS[room][0] if room in ROOMS else TOP_FLOOR


def _is_package_init(module: str) -> bool:
    return MODULES[module].name == "__init__.py"


def test_every_room_is_found() -> None:
    for room in ROOMS:
        assert any(_room(m) == room for m in MODULES), room
    assert len(MODULES) > 200


def test_arrows_point_down_only() -> None:
    upward = []
    for source, targets in GRAPH.items():
        for target in targets:
            # a package's own __init__ may be imported from inside it (relative plumbing)
            if _room(source) == _room(target):
                continue
            if _floor(target) >= _floor(source):
                upward.append(f"{source} -> {target}")
    assert not upward, "arrows that do not point down:\n" + "\n".join(sorted(upward))


def test_torch_is_imported_only_in_encoders_and_export() -> None:
    """docs/architecture.md, rule 1: torch in training and export, never on the inference path."""
    found = []
    for name, path in MODULES.items():
        if _room(name) in {"encoders", "export"}:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            modules = []
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                modules = [node.module or ""]
            if any(m == "torch" or m.startswith(("torch.", "torch_geometric")) for m in modules):
                found.append(f"{name}:{node.lineno}")
    assert not found, "torch outside encoders/ and export/: " + ", ".join(found)


def test_nothing_imports_the_command_line() -> None:
    callers = sorted(
        f"{source} -> {target}"
        for source, targets in GRAPH.items()
        for target in targets
        if _room(target) == "cli" and _room(source) != "cli" and source != "mathsearch.__main__"
    )
    assert not callers, "\n".join(callers)


def _cycles() -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), package
    ``__init__`` modules left out (their lazy re-exports point at their own modules)."""
    nodes = [m for m in GRAPH if not _is_package_init(m)]
    edges = {m: [t for t in GRAPH[m] if t in GRAPH and not _is_package_init(t)] for m in nodes}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(start: str) -> None:
        nonlocal counter
        work = [(start, iter(edges[start]))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(edges[child])))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
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

    for node in nodes:
        if node not in index:
            visit(node)
    return found


def test_no_module_circles() -> None:
    circles = _cycles()
    assert not circles, "circles:\n" + "\n".join(" <-> ".join(c) for c in circles)


@pytest.mark.parametrize(
    ("graph", "expected"),
    [
        ({"a": {"b"}, "b": {"a"}}, [["a", "b"]]),
        ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
    ],
)
def test_the_cycle_finder_finds_cycles(
    graph: dict[str, set[str]], expected: list[list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = {f"mathsearch.core.{k}": {f"mathsearch.core.{t}" for t in v} for k, v in graph.items()}
    monkeypatch.setattr(__import__(__name__, fromlist=["GRAPH"]), "GRAPH", fake)
    paths = {m: REPO / "x.py" for m in fake}
    monkeypatch.setattr(__import__(__name__, fromlist=["MODULES"]), "MODULES", paths)
    assert _cycles() == [[f"mathsearch.core.{m}" for m in c] for c in expected]
