"""mkdocs hook: the reference pages generated from the code at every build, so they follow the package tree.

- `reference/api/`: one page per module found by walking `kppo/` (mkdocstrings renders its docstrings), an overview
  of the public names (`kppo.__all__`, read from `kppo/__init__.py`'s `_EXPORTS` table, and the public subpackages);
- `reference/config.md`: every `kppo.Config` field with its type, default, rex and SB3 spellings and meaning;
- `reference/metrics.md`: every entry of `kppo.training.metrics.METRICS` (read from the source, without TensorFlow);
- `reference/errors.md`: below its hand-written guide, every error message a test checks (`pytest.raises(...,
  match="...")` in `tests/`), read from the tests' source, so the list cannot drift from what is tested;
- `repo/<path>.md`: a page for each repository file outside `docs/` that a page links to (`../configs/x.yaml`), so
  relative links work both on a forge and on the site, and a link to a file that does not exist still fails.

The functions below are plain (no mkdocs objects) so that `tests/docs` can call them.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import posixpath
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "kppo"
#: Public subpackages besides the names of `kppo.__all__` (kppo/__init__.py's docstring names them).
PUBLIC_SUBPACKAGES = ("kppo.envs", "kppo.callbacks", "kppo.config")
API_DIR = "reference/api"
NAV_PLACEHOLDER = "reference/api/index.md"
#: rex's and SB3/RL-Zoo's keys that `kppo.config.spellings.translate` handles by a rule rather than a table; each
#: is probed with a sample value to show which fields it sets (tests/docs checks that translate still takes them).
RULE_SPELLINGS = {"ANNEAL_LR": True, "NORMALIZE_ENV": True, "normalize": True, "CLIP_EPS": 0.2, "batch_size": 64}


# --- the package tree -------------------------------------------------------------------------------------------


def _literal(path: Path, name: str) -> Any:
    """The literal value assigned to module-level `name` in `path` (read, not imported)."""
    for node in ast.parse(path.read_text()).body:
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        if any(getattr(t, "id", None) == name for t in targets) and node.value is not None:
            return ast.literal_eval(node.value)
    raise LookupError(f"{path.relative_to(ROOT)}: no literal {name} = ...")


def public_exports() -> dict[str, str]:
    """`kppo.__all__`'s names (without `__version__`) -> the module that defines each (kppo/__init__.py's table)."""
    init = PACKAGE / "__init__.py"
    exports = _literal(init, "_EXPORTS")
    names = [n for n in _literal(init, "__all__") if n != "__version__"]
    missing = [n for n in names if n not in exports]
    if missing:
        raise LookupError(f"kppo/__init__.py: {missing} in __all__ but not in _EXPORTS")
    return {n: exports[n] for n in sorted(names, key=str.lower)}


def modules() -> list[str]:
    """Every module and package of kppo/ (walked, not listed), private modules (`_name.py`) and `__main__` left out."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        if any(p.startswith("_") for p in parts):
            continue
        found.append(".".join(parts))
    return sorted(found)


def api_uri(module: str) -> str:
    return f"{API_DIR}/{module}.md"


def api_pages() -> dict[str, str]:
    """src_uri -> Markdown of every API page."""
    pages = {}
    for module in modules():
        options = "    options:\n      show_root_heading: false\n      show_submodules: false\n"
        pages[api_uri(module)] = f"# `{module}`\n\n::: {module}\n{options}"
    pages[f"{API_DIR}/index.md"] = _api_index()
    return pages


@functools.cache
def _griffe_package():
    import griffe

    return griffe.load("kppo", search_paths=[str(ROOT)], resolve_aliases=False)


def _summary(module: str, name: str | None = None) -> str:
    """The first paragraph of a docstring, read statically (griffe), for the overview tables."""
    obj = _griffe_package()
    for part in [*module.split(".")[1:], *([name] if name else [])]:
        obj = obj.members[part]
    doc = obj.docstring.value if obj.docstring else ""
    return " ".join(doc.split("\n\n")[0].split()).replace("|", "\\|")


def _api_index() -> str:
    lines = [
        "# API reference",
        "",
        "Generated from the code at every build (`docs/hooks/reference.py`): the public names of `import kppo`, the",
        "public subpackages, and one page per module of `kppo/` (the folders are the layers: "
        "[architecture](../../architecture.md)).",
        "",
        "## `import kppo`",
        "",
        "| name | defined in | what it is |",
        "|---|---|---|",
    ]
    for name, module in public_exports().items():
        summary = _summary(module, name) or "(see [METRICS](../metrics.md))"
        lines.append(f"| `kppo.{name}` | [`{module}`]({module}.md#{module}.{name}) | {summary} |")
    lines += ["", "## Public subpackages", "", "| package | what it holds |", "|---|---|"]
    for package in PUBLIC_SUBPACKAGES:
        lines.append(f"| [`{package}`]({package}.md) | {_summary(package)} |")
    lines += ["", "## Every module", ""]
    for module in modules():
        depth = module.count(".") - 1
        lines.append(f"{'    ' * max(depth, 0)}- [`{module}`]({module}.md)")
    return "\n".join(lines) + "\n"


def api_nav() -> list:
    """The API section of the navigation: the overview, then each package with its modules."""
    nav: list = [{"Overview": f"{API_DIR}/index.md"}]
    groups: dict[str, list] = {}
    for module in modules():
        parts = module.split(".")
        top = ".".join(parts[:2]) if len(parts) > 1 else module
        groups.setdefault(top, []).append(module)
    for top, members in groups.items():
        if members == [top]:
            nav.append({top: api_uri(top)})
        else:
            nav.append({top: [{m: api_uri(m)} for m in members]})
    return nav


# --- Config ----------------------------------------------------------------------------------------------------


def _config_module():
    sys.path.insert(0, str(ROOT))
    try:
        from kppo.config import options, spellings  # plain Python and YAML: no TensorFlow
    finally:
        sys.path.remove(str(ROOT))
    return options, spellings


def _sb3_parameters() -> set[str]:
    """The parameter names of `kppo.PPO.__init__` (SB3 2.9's signature), read statically."""
    init = _griffe_package()["sb3.ppo.PPO"].members["__init__"]
    return {p.name for p in init.parameters} - {"self"}


def config_rows(config_cls: Any = None) -> list[dict[str, str]]:
    """One row per Config field: name, type, default, rex and SB3 spellings, meaning.

    Raises:
        ValueError: a field without documentation (`metadata["doc"]`, given by `_f(default, doc)`).
    """
    options, spellings = _config_module()
    cls = config_cls or options.Config
    fields = {f.name: f for f in dataclasses.fields(cls)}
    rex: dict[str, list[str]] = {}
    sb3: dict[str, list[str]] = {}
    for key, name in spellings._REX_NAMES.items():
        rex.setdefault(name, []).append(f"`{key}`")
    for key, name in spellings._SB3_NAMES.items():
        sb3.setdefault(name, []).append(f"`{key}`")
    sb3_params = _sb3_parameters()
    for key, sample in RULE_SPELLINGS.items():
        column = rex if key.isupper() else sb3
        for name in spellings.translate({key: sample}, options.Config.__dataclass_fields__):
            if f"`{key}`" not in column.get(name, []):
                column.setdefault(name, []).append(f"`{key}` (rule)")
    rows = []
    missing = []
    for name, f in fields.items():
        doc = (f.metadata or {}).get("doc", "")
        if not isinstance(doc, str) or not doc.strip():
            missing.append(name)
            continue
        sb3_names = sb3.get(name, [])
        if name in sb3_params:
            sb3_names = [f"`{name}`", *sb3_names]
        default = f.default if f.default is not dataclasses.MISSING else "(required)"
        rows.append(
            {
                "name": name,
                "type": str(f.type),
                "default": repr(default),
                "rex": ", ".join(rex.get(name, [])) or "—",
                "sb3": ", ".join(sb3_names) or "—",
                "doc": " ".join(doc.split()),
            }
        )
    if missing:
        raise ValueError(f"Config fields without documentation (give them _f(default, doc)): {', '.join(missing)}")
    return rows


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


MESSAGES_MARKER = "<!-- checked messages -->"


def _parametrized(function: ast.FunctionDef) -> dict[str, list[str]]:
    """{argument: its literal string values} of the test's `pytest.mark.parametrize("a, b", [(..., ...), ...])`."""
    values: dict[str, list[str]] = {}
    for decorator in function.decorator_list:
        if not (isinstance(decorator, ast.Call) and ast.unparse(decorator.func).endswith("mark.parametrize")):
            continue
        names, cases = [*decorator.args, None, None][:2]
        if not isinstance(names, ast.Constant) or not isinstance(cases, (ast.List, ast.Tuple)):
            continue
        argnames = [n.strip() for n in str(names.value).split(",")]
        for case in cases.elts:
            items = case.elts if isinstance(case, ast.Tuple) and len(argnames) > 1 else [case]
            for name, item in zip(argnames, items):
                if isinstance(item, ast.Constant) and isinstance(item.value, str):
                    values.setdefault(name, []).append(item.value)
    return values


def _raises(node: ast.Call, params: dict[str, list[str]]) -> list[tuple[str, str]]:
    """[(exception, pattern)] of a `pytest.raises(Exception, match=...)` call: a literal pattern, or each literal
    value of the parametrized argument it names."""
    func = node.func
    if not (isinstance(func, ast.Attribute) and func.attr == "raises" and ast.unparse(func.value) == "pytest"):
        return []
    match = next((k.value for k in node.keywords if k.arg == "match"), None)
    if not node.args or match is None:
        return []
    if isinstance(match, ast.Constant) and isinstance(match.value, str):
        return [(ast.unparse(node.args[0]), match.value)]
    if isinstance(match, ast.Name):
        return [(ast.unparse(node.args[0]), value) for value in params.get(match.id, [])]
    return []


def checked_messages(tests: Path | None = None) -> list[dict[str, str]]:
    """Every literal message pattern the tests check, with its exception and test: [{file, test, exception,
    pattern}], in file and line order (tests/docs and the fixtures' recorders excluded)."""
    tests = ROOT / "tests" if tests is None else tests
    rows = []
    for path in sorted(tests.rglob("test_*.py")):
        relative = path.relative_to(tests).as_posix()
        if relative.startswith(("docs/", "fixtures/")):
            continue
        for function in ast.walk(ast.parse(path.read_text())):
            if not isinstance(function, ast.FunctionDef) or not function.name.startswith("test_"):
                continue
            params = _parametrized(function)
            for node in ast.walk(function):
                for exception, pattern in _raises(node, params) if isinstance(node, ast.Call) else []:
                    rows.append({"file": relative, "test": function.name, "exception": exception, "pattern": pattern})
    return rows


def _code(text: str) -> str:
    """`text` as a table cell's inline code (pipes escaped; double backticks when it holds one)."""
    fence = "``" if "`" in text else "`"
    return f"{fence} {_cell(text)} {fence}" if fence == "``" else f"`{_cell(text)}`"


def messages_table(rows: list[dict[str, str]] | None = None) -> str:
    rows = checked_messages() if rows is None else rows
    lines = [
        f"## Every message the tests check ({len(rows)})",
        "",
        "Generated at every build from `pytest.raises(..., match=...)` in `tests/` (a literal pattern, or each literal",
        "value of the `pytest.mark.parametrize` argument it names): a regular expression searched for in the message.",
        "",
        "| message (pattern) | exception | test |",
        "|---|---|---|",
    ]
    lines += [f"| {_code(r['pattern'])} | `{r['exception']}` | {r['file']}::{r['test']} |" for r in rows]
    return "\n".join(lines) + "\n"


def config_page() -> str:
    options, _ = _config_module()
    lines = [
        "# Config fields",
        "",
        "Generated from `kppo.Config`'s dataclass fields (`kppo/config/fields.py`: each field's one-line `doc`) and",
        "the spellings `Config.from_dict` / `from_yaml` / `--set` accept (`kppo/config/spellings.py`). An SB3 name",
        'is listed where `kppo.PPO` takes an argument of that name or `Config` translates one; "(rule)" marks a key',
        "translated by a rule rather than a renaming: rex's `ANNEAL_LR` sets `lr_schedule`, `NORMALIZE_ENV` /",
        "SB3's `normalize` set both normalizations, rex's `CLIP_EPS` also sets `clip_range_vf` unless it is given,",
        "SB3's `batch_size` (a minibatch size) becomes `num_minibatches`. `kppo train --help` prints the same",
        "meanings; the [CLI guide](../guides/cli.md) shows how to set them.",
        "",
        "| field | type | default | rex | SB3 | meaning |",
        "|---|---|---|---|---|---|",
    ]
    for r in config_rows():
        lines.append(
            f"| `{r['name']}` | `{_cell(r['type'])}` | `{_cell(r['default'])}` | {r['rex']} | {r['sb3']} | "
            f"{_cell(r['doc'])} |"
        )
    lines += ["", "## Derived values", "", "Properties computed from the fields (never set):", ""]
    for klass in reversed(options.Config.__mro__):
        for name, value in vars(klass).items():
            if isinstance(value, property) and value.__doc__:
                lines.append(f"- `{name}`: {' '.join(value.__doc__.split())}")
    from kppo.config import validation

    lines += [
        "",
        "## Upper bounds",
        "",
        "Every integer field has an upper bound, checked when the Config is made "
        "(`kppo.config.validation.INT_BOUNDS`): past it a counter, an index or a random key would overflow.",
        "",
        "| field | at most |",
        "|---|---|",
        *[f"| `{name}` | {bound:,} |" for name, bound in validation.INT_BOUNDS.items()],
        *[f"| `{_cell(name)}` | {bound:,} |" for name, _, bound in validation.DERIVED_BOUNDS],
    ]
    lines += [
        "",
        "## Sweepable fields",
        "",
        "A population's members may differ in `seed` and these (`kppo.config.options.SWEEPABLE`): "
        + ", ".join(f"`{n}`" for n in options.SWEEPABLE)
        + ". See [populations and sweeps](../guides/populations.md).",
    ]
    return "\n".join(lines) + "\n"


# --- METRICS ---------------------------------------------------------------------------------------------------


def metric_rows() -> list[dict[str, Any]]:
    """`METRICS` read from kppo/training/metrics.py's source: name, meaning, SB3 key, SB3 sign."""
    path = PACKAGE / "training" / "metrics.py"
    for node in ast.parse(path.read_text()).body:
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        if getattr(target, "id", None) == "METRICS" and isinstance(node.value, ast.Dict):
            rows = []
            for key, call in zip(node.value.keys, node.value.values):
                if not isinstance(call, ast.Call):
                    raise ValueError(f"METRICS[{ast.unparse(key)}]: expected Metric(...), got {ast.unparse(call)}")
                args = [ast.literal_eval(a) for a in call.args]
                kwargs = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
                values = dict(zip(("meaning", "sb3", "sb3_sign"), args), **kwargs)
                rows.append({"name": ast.literal_eval(key), "sb3": None, "sb3_sign": 1.0, **values})
            return rows
    raise LookupError("kppo/training/metrics.py: no METRICS = {...}")


def metrics_page() -> str:
    lines = [
        "# Metrics",
        "",
        "Generated from `kppo.METRICS` (`kppo/training/metrics.py`). `kppo.train` returns one value per evaluation",
        "round for each name in `PPOResult.metrics` (numpy; a population: `[rounds, members]`); `kppo train` writes",
        "them to `metrics.csv` and TensorBoard; `kppo.PPO` logs them under SB3's logger keys (third column).",
        "",
        "| metric | meaning | SB3 logger key |",
        "|---|---|---|",
    ]
    for r in metric_rows():
        if not r["meaning"].strip():
            raise ValueError(f"METRICS[{r['name']!r}]: no meaning")
        sb3 = f"`{r['sb3']}`" if r["sb3"] else "—"
        if r["sb3_sign"] != 1.0:
            sb3 += f" (× {r['sb3_sign']:g})"
        lines.append(f"| `{r['name']}` | {_cell(r['meaning'])} | {sb3} |")
    return "\n".join(lines) + "\n"


# --- repository files linked from the docs ----------------------------------------------------------------------

_LINK = re.compile(r"(\]\()([^)\s#]+)(#[^)\s]*)?(\))")


def outside_links(src_uri: str, markdown: str) -> dict[str, str]:
    """Relative link target -> repository path, for links of a docs page that leave docs/ (`../configs/x.yaml`)."""
    found = {}
    for match in _LINK.finditer(markdown):
        target = match.group(2)
        if "://" in target or target.startswith(("/", "mailto:")):
            continue
        path = posixpath.normpath(posixpath.join("docs", posixpath.dirname(src_uri), target))
        if not path.startswith("docs/") and not path.startswith(".."):
            found[target] = path
    return found


def repo_uri(path: str) -> str:
    return f"repo/{path}.md"


def repo_page(path: str) -> str:
    file = ROOT / path
    if file.is_dir():
        entries = sorted(p.name + ("/" if p.is_dir() else "") for p in file.iterdir() if not p.name.startswith("."))
        return f"# `{path}/`\n\nA folder of the repository:\n\n" + "\n".join(f"- `{e}`" for e in entries) + "\n"
    lang = {".py": "python", ".yaml": "yaml", ".yml": "yaml", ".toml": "toml", ".sh": "sh"}.get(file.suffix, "")
    if file.suffix == ".md":
        return f"# `{path}`\n\nA file of the repository, shown as written:\n\n````markdown\n{file.read_text()}\n````\n"
    return f"# `{path}`\n\nA file of the repository:\n\n```{lang}\n{file.read_text()}\n```\n"


# --- mkdocs events ------------------------------------------------------------------------------------------------


def _replace_placeholder(nav: list, api: list) -> bool:
    for i, entry in enumerate(nav):
        if isinstance(entry, dict):
            for title, value in entry.items():
                if value == NAV_PLACEHOLDER:
                    nav[i] = {title: api}
                    return True
                if isinstance(value, list) and _replace_placeholder(value, api):
                    return True
    return False


def on_config(config):
    if config.nav and not _replace_placeholder(config.nav, api_nav()):
        raise ValueError(f"mkdocs.yml: the nav has no entry {NAV_PLACEHOLDER!r} for the generated API pages")
    return config


def on_files(files, config):
    from mkdocs.structure.files import File

    generated = {**api_pages(), "reference/config.md": config_page(), "reference/metrics.md": metrics_page()}
    linked: set[str] = set()
    for file in list(files):
        if file.src_uri.endswith(".md") and file.abs_src_path:
            linked.update(outside_links(file.src_uri, Path(file.abs_src_path).read_text()).values())
    for path in sorted(linked):
        if (ROOT / path).exists():
            generated[repo_uri(path)] = repo_page(path)
    for uri, content in generated.items():
        files.append(File.generated(config, uri, content=content))
    return files


def on_page_markdown(markdown, page, config, files):
    if page.file.src_uri == "reference/errors.md":
        if MESSAGES_MARKER not in markdown:
            raise ValueError(f"docs/reference/errors.md: expected the marker {MESSAGES_MARKER!r} for the message list")
        markdown = markdown.replace(MESSAGES_MARKER, messages_table())
    links = outside_links(page.file.src_uri, markdown)
    if not links:
        return markdown

    def rewrite(match: re.Match) -> str:
        target = match.group(2)
        path = links.get(target)
        if path is None or not (ROOT / path).exists():
            return match.group(0)  # left for mkdocs to report as a broken link
        new = posixpath.relpath(repo_uri(path), posixpath.dirname(page.file.src_uri) or ".")
        return f"{match.group(1)}{new}{match.group(3) or ''}{match.group(4)}"

    return _LINK.sub(rewrite, markdown)
