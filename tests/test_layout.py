"""The house stays as docs/development.md draws it: rooms import only rooms on lower floors, no
module imports itself round a circle, and no file or function outgrows what a reader can hold."""

import ast
import graphlib
import re

import pytest
from conftest import REPO

PACKAGE = REPO / "finreflect_eval"
MAP = REPO / "docs" / "development.md"
MAX_PY_LINES, MAX_JS_LINES, MAX_FUNCTION_LINES, MAX_TOP_MODULES = 500, 400, 80, 8


def floors() -> dict[str, int]:
    """Room -> floor, from the map's table (`| 3 | \\`stats/\\` | ... |`)."""
    found = {}
    for floor, rooms in re.findall(r"^\| (\d+) \| ([^|]+) \|", MAP.read_text(), re.M):
        for room in re.findall(r"`([A-Za-z_]+)(?:/|\.py)`", rooms):
            found[room] = int(floor)
    return found


def modules() -> dict[str, ast.Module]:
    return {
        ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__"): ast.parse(
            path.read_text(encoding="utf-8")
        )
        for path in sorted(PACKAGE.rglob("*.py"))
    }


def imports(name: str, tree: ast.Module, known: set[str]) -> set[str]:
    """The package's modules `name` imports, wherever in the file (a deferred import, or one
    for type checking only, is an arrow too)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            base = node.module
            if node.level:  # relative
                base = ".".join([*name.split(".")[: -node.level], node.module])
            # `from package import module` imports the module; `from module import name`, the module
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                for alias in node.names
            ]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def room(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "__init__"
    return parts[1]


def test_every_room_is_on_the_map():
    on_map = floors()
    rooms = {room(name) for name in modules()}
    assert rooms <= set(on_map), f"rooms missing from docs/development.md: {rooms - set(on_map)}"
    assert not set(on_map) - rooms - {"__main__"}, "docs/development.md names rooms that are gone"


def test_arrows_only_go_down_and_never_round():
    on_map, trees = floors(), modules()
    graph = {name: imports(name, tree, set(trees)) for name, tree in trees.items()}
    up = [
        f"{name} -> {target}"
        for name, targets in graph.items()
        for target in targets
        if room(name) != room(target) and on_map[room(target)] >= on_map[room(name)]
    ]
    assert not up, "imports from a room to one on its own floor or above:\n" + "\n".join(up)
    # Inside a room, modules import each other, not their room's face (the face hands their names
    # on to other rooms): so a circle through a face shows as the circle it is.
    faces = [f"{n} -> {t}" for n, ts in graph.items() for t in ts if n.startswith(t + ".")]
    assert not faces, "a module imports its own room's face:\n" + "\n".join(faces)
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as circle:
        pytest.fail(f"an import circle: {' -> '.join(circle.args[1])}")


def test_few_modules_at_the_top():
    top = [path.name for path in PACKAGE.glob("*.py")]
    assert len(top) <= MAX_TOP_MODULES, top


def test_every_room_says_what_it_holds_and_what_it_may_import():
    for init in PACKAGE.glob("*/__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        assert "May import" in doc or "Imports nothing" in doc, f"{init}: say what it holds"


def test_no_file_outgrows_a_reader():
    too_long = [
        f"{path.relative_to(REPO)}: {lines} lines"
        for path in [*PACKAGE.rglob("*.py"), *PACKAGE.rglob("*.js")]
        if (lines := len(path.read_text(encoding="utf-8").splitlines()))
        > (MAX_PY_LINES if path.suffix == ".py" else MAX_JS_LINES)
    ]
    assert not too_long, "\n".join(too_long)


def test_no_function_outgrows_a_screen():
    """Counted without the docstring: the lines a reader must follow."""
    too_long = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                start = node.body[0].end_lineno + 1 if ast.get_docstring(node) else node.lineno
                if node.end_lineno - start + 1 > MAX_FUNCTION_LINES:
                    too_long.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name}")
    assert not too_long, "\n".join(too_long)
