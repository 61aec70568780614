"""The shape of `kppo/`: imports flow one way (no cycle, counting imports inside functions too), no module imports
another module's private names, and no module grows past 400 lines."""

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "kppo"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in PACKAGE.rglob("*.py")}


def _imports(path: Path) -> list[tuple[str, list[str]]]:
    """(module, imported names) of every `import kppo...` / `from kppo... import` in the file, at any depth."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "kppo" and node.level == 0:
            found.append((node.module, [alias.name for alias in node.names]))
        elif isinstance(node, ast.Import):
            found += [(alias.name, []) for alias in node.names if alias.name.split(".")[0] == "kppo"]
    return found


def _graph() -> dict[str, set[str]]:
    """module -> the kppo modules it imports (`from kppo.x import y` counts kppo.x.y when y is a module)."""
    graph = {}
    for name, path in MODULES.items():
        edges = set()
        for module, names in _imports(path):
            submodules = {f"{module}.{n}" for n in names if f"{module}.{n}" in MODULES}
            edges |= submodules
            if len(submodules) < max(len(names), 1):  # some name (or the whole module) comes from `module` itself
                edges.add(module)
        graph[name] = {e for e in edges if e in MODULES and e != name}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a list of modules, or None (depth-first search with colours)."""
    colour, stack = {}, []

    def visit(node):
        colour[node] = "grey"
        stack.append(node)
        for nxt in sorted(graph[node]):
            if colour.get(nxt) == "grey":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in colour and (found := visit(nxt)):
                return found
        stack.pop()
        colour[node] = "black"
        return None

    for node in sorted(graph):
        if node not in colour and (found := visit(node)):
            return found
    return None


def test_the_cycle_finder_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_kppo_has_no_import_cycle():
    assert _cycle(_graph()) is None


def test_no_module_imports_another_modules_private_names():
    offenders = [
        f"{name} imports {module}.{imported}"
        for name, path in MODULES.items()
        for module, names in _imports(path)
        for imported in names
        if imported.startswith("_") and not imported.startswith("__") and module != name
    ]
    assert offenders == []


@pytest.mark.parametrize("name", sorted(MODULES))
def test_modules_stay_under_400_lines(name):
    assert len(MODULES[name].read_text().splitlines()) <= 400


def test_the_runners_import_one_way():
    """native <- replicated <- host <- the dispatch in runners/__init__; the loop sees runners, never the reverse."""
    graph = _graph()
    assert "kppo.runners.replicated" not in graph["kppo.runners.native"]
    assert "kppo.runners.host" not in graph["kppo.runners.replicated"] | graph["kppo.runners.native"]
    assert not {"kppo.loop", "kppo.training", "kppo.ppo"} & set().union(
        *(graph[m] for m in MODULES if m.startswith("kppo.runners")))
    assert not {m for m in graph["kppo.exporter"] | graph["kppo.checkpoint"] if m.startswith("kppo.runners")}


def _documented_imports() -> dict[str, set[str]]:
    """module -> the kppo modules docs/architecture.md's map says it imports."""
    doc = (PACKAGE.parent / "docs" / "architecture.md").read_text()
    rows = {}
    for line in doc.splitlines():
        cells = [cell.strip() for cell in line.split(" | ")]
        if len(cells) < 4 or not cells[1].startswith("`") or not cells[1].endswith(".py`"):
            continue
        path = cells[1].strip("`")[:-3]
        name = "kppo." + path.replace("/", ".").removesuffix(".__init__").removesuffix("__init__").rstrip(".")
        names = re.findall(r"`([^`]+)`", cells[-1].removesuffix("|"))
        rows[name.rstrip(".")] = {"kppo" if n == "kppo" else f"kppo.{n}" for n in names}
    return rows


def test_the_architecture_map_lists_every_module_with_its_imports():
    """docs/architecture.md stays true: every module has a row, and its imports column is what the code imports."""
    documented, graph = _documented_imports(), _graph()
    assert sorted(set(graph) - set(documented)) == [] and sorted(set(documented) - set(graph)) == []
    wrong = {name: {"doc": sorted(documented[name] - graph[name]), "code": sorted(graph[name] - documented[name])}
             for name in graph if documented[name] != graph[name]}
    assert wrong == {}
