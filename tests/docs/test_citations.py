"""What the pages cite exists: every repository path (`tests/sb3/test_ppo.py`, `configs/pendulum.yaml`, a test's
`file.py::test_name`), every dotted name of kppo or the kit (`kppo.PPO`, `kppo.core.losses.policy_loss`,
`Config.clip_obs`, `module:function`) and every relative link of README.md and the pages under docs/.

Names are resolved from the source (read, not imported, so this test starts no TensorFlow and follows the tree as it
moves): a module is a file under `kppo/` or `export/kppo_runtime/`; a name is what a module defines, imports or lists
in kppo/__init__.py's `_EXPORTS`; an attribute is what a class defines, assigns on `self` or inherits from a class
of kppo. A name that leaves kppo (a base class from Keras or gymnasium) is taken as resolved there.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

from tests.docs.helpers import FENCED, ROOT, load_hook

PACKAGES = {"kppo": ROOT / "kppo", "kppo_runtime": ROOT / "export" / "kppo_runtime"}
#: The folders of the repository a cited path may start with.
TOP = ("kppo", "tests", "benchmarks", "configs", "export", "examples", "docs", ".ci")
#: Paths that exist in the installed package only, and where they come from in the checkout (pyproject.toml's
#: `package-dir`).
INSTALLED = {"kppo/configs": "configs"}
PAGES = [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").rglob("*.md") if "hooks" not in p.parts)]
CODE_SPAN = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
LINK = re.compile(r"\]\(([^)\s]+)\)")
PATH = re.compile(rf"^(?:\.\./)*((?:{'|'.join(re.escape(t) for t in TOP)})/[\w./-]*\w/?)(?:::(\w+))?$")
NAME = re.compile(r"^((?:kppo|kppo_runtime)(?:\.\w+)+(?::\w+)?)")
#: The public names of kppo (`Config`, `PPO`, ...): a span that starts with one (`Config.clip_obs`,
#: `PPO.load`) is resolved as `kppo.<name>`.
PUBLIC = set(load_hook().public_exports())
PUBLIC_NAME = re.compile(rf"^((?:{'|'.join(sorted(PUBLIC, key=len, reverse=True))})\.\w+(?:\.\w+)*)\b")


def _prose(text: str) -> str:
    """The page without its fenced blocks (a block's code is run by the guides' tests, not cited)."""
    return FENCED.sub("", text)


#: Words before a span that make it SB3's or sb3-contrib's name, not kppo's (`sb3-contrib's RecurrentPPO.train()`).
THEIRS = re.compile(r"(?:SB3|sb3-contrib|Stable-Baselines3|torch|Keras|gymnasium)(?:'s)?\s*$")


def cited(page: Path) -> list[str]:
    """The code spans of a page's prose and tables (a span named as SB3's, sb3-contrib's, ... marked `theirs:`)."""
    prose = _prose(page.read_text())
    return [
        f"theirs:{m.group(1)}" if THEIRS.search(prose[max(0, m.start() - 20) : m.start()]) else m.group(1)
        for m in CODE_SPAN.finditer(prose)
    ]


# --- modules and names, from the source ---------------------------------------------------------------------------


def _module_file(dotted: str) -> Path | None:
    top, *rest = dotted.split(".")
    base = PACKAGES.get(top)
    if base is None:
        return None
    path = base.joinpath(*rest)
    for candidate in (path / "__init__.py", path.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


@functools.cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text())


def _package_of(path: Path) -> str:
    for top, base in PACKAGES.items():
        if path.is_relative_to(base):
            parts = [top, *path.relative_to(base).with_suffix("").parts]
            return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    raise LookupError(path)


def _absolute(module_path: Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = _package_of(module_path).split(".")
    if module_path.name != "__init__.py":
        package = package[:-1]
    package = package[: len(package) - node.level + 1]
    return ".".join([*package, node.module] if node.module else package)


def _lazy_exports(path: Path) -> dict[str, str]:
    """kppo/__init__.py's `_EXPORTS` table (name -> module), the names it loads on first use."""
    for node in _tree(path).body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(getattr(t, "id", None) == "_EXPORTS" for t in targets) and node.value is not None:
                return ast.literal_eval(node.value)
    return {}


def _defined(path: Path, name: str):
    """What module `path` binds to `name`: ('node', ClassDef|FunctionDef|...), ('module', dotted) or None."""
    for node in _tree(path).body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            return ("node", node)
        targets = []
        if isinstance(node, ast.Assign):
            targets = [t for target in node.targets for t in ast.walk(target) if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            targets = [node.target]
        if any(t.id == name for t in targets):
            return ("node", node)
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    source = _absolute(path, node)
                    if _module_file(f"{source}.{alias.name}"):
                        return ("module", f"{source}.{alias.name}")
                    return ("from", (source, alias.name))
        if isinstance(node, ast.Import):
            for alias in node.names:
                if (alias.asname or alias.name.split(".")[0]) == name:
                    return ("module", alias.name if alias.asname else name)
    if path.name == "__init__.py" and name in _lazy_exports(path):
        return ("from", (_lazy_exports(path)[name], name))
    sub = f"{_package_of(path)}.{name}"
    if path.name == "__init__.py" and _module_file(sub):
        return ("module", sub)
    return None


def _class_has(path: Path, cls: ast.ClassDef, attribute: str, depth: int = 0) -> bool:
    """`attribute` is defined in `cls` (a method, a class-level or `self.` assignment) or a base class of it."""
    for node in ast.walk(cls):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == attribute:
            return True
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", None) == attribute:
            return True
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if getattr(target, "id", None) == attribute or getattr(target, "attr", None) == attribute:
                    return True
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "attr", None) == attribute:
            return True
    if depth > 8:
        return False
    for base in cls.bases:
        name = base.id if isinstance(base, ast.Name) else None
        if name is None:
            return True  # `keras.layers.Layer`, `gym.Env`, a subscripted generic: outside kppo, not checked
        found = _lookup_in(path, name)
        if found is None or found == "outside":
            return True
        base_path, base_node = found
        if isinstance(base_node, ast.ClassDef) and _class_has(base_path, base_node, attribute, depth + 1):
            return True
    return False


def _lookup_in(path: Path, name: str, depth: int = 0):
    """(path, node) of what `name` is in module `path`, following imports; "outside" for a name from elsewhere."""
    found = _defined(path, name)
    if found is None or depth > 8:
        return None
    kind, value = found
    if kind == "node":
        return path, value
    if kind == "module":
        module_path = _module_file(value)
        return (module_path, None) if module_path else "outside"
    source, original = value
    source_path = _module_file(source)
    if source_path is None:
        return "outside" if source.split(".")[0] not in PACKAGES else None
    return _lookup_in(source_path, original, depth + 1)


def resolves(dotted: str) -> bool:
    """`kppo.a.b.name.attr` or `kppo.a.b:name`: a module, then names and attributes found in the source."""
    dotted = dotted.replace(":", ".")
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        path = _module_file(".".join(parts[:cut]))
        if path is not None:
            break
    else:
        return False
    rest = parts[cut:]
    node = None
    while rest:
        name, *rest = rest
        if node is None:  # a name of module `path`
            found = _lookup_in(path, name)
            if found is None:
                return False
            if found == "outside":
                return True
            path, node = found
            if node is None:
                continue  # a submodule
        elif isinstance(node, ast.ClassDef):
            return _class_has(path, node, name)
        else:
            return True  # an attribute of a value (`METRICS["..."]`, a dict's key): not checked further
    return True


def names_in(span: str) -> list[str]:
    """The dotted names a span cites: `kppo.train(...)` -> kppo.train, `Config.clip_obs` -> kppo.Config.clip_obs."""
    theirs = span.startswith("theirs:")
    span = span.removeprefix("theirs:").strip()
    match = NAME.match(span)
    if match:
        placeholder = any(len(part) == 1 for part in re.split(r"[.:]", match.group(1)))  # `kppo.x.y`
        return [] if placeholder else [match.group(1)]
    if theirs:
        return []
    match = PUBLIC_NAME.match(span)
    if match and not span.startswith(tuple(f"{n}(" for n in PUBLIC)):
        return [f"kppo.{match.group(1)}"]
    return []


def paths_in(span: str) -> list[tuple[str, str | None]]:
    """The repository paths a code span cites: (path, test name or None); globs and placeholders are left out."""
    found = []
    for word in span.split():
        word = word.removeprefix("theirs:").strip(",;()'\"")
        if any(c in word for c in "*<>{}$[]") or "://" in word:
            continue
        match = PATH.match(word)
        if match:
            found.append((match.group(1), match.group(2)))
    return found


# --- the tests ------------------------------------------------------------------------------------------------------


def test_the_resolver_finds_what_exists_and_nothing_else():
    assert resolves("kppo.train") and resolves("kppo.PPO.load") and resolves("kppo.Config.clip_obs")
    assert resolves("kppo.envs.Task") and resolves("kppo.envs.make")
    assert not resolves("kppo.no_such_name") and not resolves("kppo.PPO.no_such_method")
    assert not resolves("kppo.no_such_module.train") and not resolves("kppo.Config.no_such_field")
    assert names_in("Config.clip_obs") == ["kppo.Config.clip_obs"] and names_in("kppo.train(env, config)") == [
        "kppo.train"
    ]
    assert names_in("theirs:RecurrentPPO.train()") == [] and names_in("kppo.x.y") == []
    assert names_in("model.policy") == [] and paths_in("tests/sb3/test_ppo.py::test_x, configs/*.yaml") == [
        ("tests/sb3/test_ppo.py", "test_x")
    ]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_cited_path_exists(page):
    missing = []
    for span in cited(page):
        for path, test in paths_in(span):
            for installed, checkout in INSTALLED.items():
                path = re.sub(rf"^{installed}(?=/|$)", checkout, path)
            target = ROOT / path
            if not target.exists():
                missing.append(path)
            elif test and not re.search(rf"^\s*(?:async )?(?:def|class) {test}\b", target.read_text(), re.M):
                missing.append(f"{path}::{test}")
    assert not missing, f"{page.relative_to(ROOT)} cites what does not exist: {sorted(set(missing))}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_cited_name_resolves(page):
    text = page.read_text()
    names = [name for span in cited(page) for name in names_in(span)]
    names += re.findall(r"^::: ([\w.]+)", text, re.M)  # mkdocstrings' directives
    missing = sorted({name for name in names if not resolves(name)})
    assert not missing, f"{page.relative_to(ROOT)} cites names that are not in the source: {missing}"


@functools.cache
def _generated_pages() -> frozenset[str]:
    hook = load_hook()
    return frozenset({*hook.api_pages(), "reference/config.md", "reference/metrics.md", "reference/capabilities.md"})


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    generated = _generated_pages()
    docs = ROOT / "docs"
    broken = []
    for target in LINK.findall(_prose(page.read_text())):
        target = target.split("#")[0]
        if not target or "://" in target or target.startswith("mailto:"):
            continue
        resolved = (page.parent / target).resolve()
        if resolved.exists():
            continue
        if resolved.is_relative_to(docs) and resolved.relative_to(docs).as_posix() in generated:
            continue
        broken.append(target)
    assert not broken, f"{page.relative_to(ROOT)} links to what does not exist: {broken}"


def test_no_reference_to_a_design_file_outside_the_project():
    """pyproject.toml and the code point at pages that exist (a DESIGN.md is not part of the project)."""
    sources = [ROOT / "pyproject.toml", *sorted((ROOT / "kppo").rglob("*.py"))]
    if not (ROOT / "DESIGN.md").exists():
        offenders = [str(p.relative_to(ROOT)) for p in sources if "DESIGN.md" in p.read_text()]
        assert not offenders, f"these point to a DESIGN.md that is not in the project: {offenders}"
