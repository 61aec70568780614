"""The shape of `kppo/`: its folders are layers and imports flow one way, from the bottom layer up (imports inside
functions count); no cycle; no module imports another module's private names; no function over McCabe complexity 15;
docs/architecture.md lists every module with what it imports; the wheel lists every folder."""

from __future__ import annotations

import ast
import dataclasses
import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "kppo"

#: folder -> layer. A module may import modules of its own folder and of folders in lower layers; two folders of one
#: layer do not import each other. `kppo` is the package's own `__init__.py` (the public names).
LAYERS = {
    "_tf": 0,
    "version": 0,
    "config": 1,
    "core": 2,
    "envs": 3,
    "gym_envs": 3,
    "vec_envs": 4,  # SB3's env API over gymnasium vector envs, below everything that takes an env
    "agent": 5,
    "rollout": 6,
    "update": 7,
    "callbacks": 7,
    "training": 8,
    "sb3": 9,
    "exporter": 9,
    "tuning": 10,  # above sb3/: it reads RL-Zoo's hyperparameter files through SB3's arguments
    "kppo": 11,
    "cli": 12,
}
MAX_COMPLEXITY = 15


def module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules(package: Path = PACKAGE) -> dict[str, Path]:
    return {module_name(p, package): p for p in package.rglob("*.py")}


MODULES = modules()


def imports(path: Path) -> list[tuple[str, list[str]]]:
    """(module, imported names) of every `import kppo...` / `from kppo... import` in the file, at any depth."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "kppo" and node.level == 0:
            found.append((node.module, [alias.name for alias in node.names]))
        elif isinstance(node, ast.Import):
            found += [(alias.name, []) for alias in node.names if alias.name.split(".")[0] == "kppo"]
    return found


def import_graph(found: dict[str, Path] = MODULES) -> dict[str, set[str]]:
    """module -> the kppo modules it imports (`from kppo.x import y` counts kppo.x.y when y is a module)."""
    graph = {}
    for name, path in found.items():
        edges = set()
        for module, names in imports(path):
            submodules = {f"{module}.{n}" for n in names if f"{module}.{n}" in found}
            edges |= submodules
            if len(submodules) < max(len(names), 1):  # some name (or the whole module) comes from `module` itself
                edges.add(module)
        graph[name] = {e for e in edges if e in found and e != name}
    return graph


def cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a list of modules, or None (depth-first search with colours)."""
    colour: dict[str, str] = {}
    stack: list[str] = []

    def visit(node):
        colour[node] = "grey"
        stack.append(node)
        for nxt in sorted(graph[node]):
            if colour.get(nxt) == "grey":
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in colour and (found := visit(nxt)):
                return found
        stack.pop()
        colour[node] = "black"
        return None

    for node in sorted(graph):
        if node not in colour and (found := visit(node)):
            return found
    return None


def folder(module: str) -> str:
    """kppo.core.gae -> core; kppo.training.runners.host -> training; kppo._tf -> _tf; kppo -> kppo. Layers are keyed
    by top folder, so a folder nested in another shares its layer and cannot hide an import that runs up."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "kppo"


def layer_violations(graph: dict[str, set[str]], layers: dict[str, int] = LAYERS) -> list[str]:
    """The imports that do not flow down: into a higher layer, or across two folders of one layer."""
    bad = []
    for source, targets in sorted(graph.items()):
        for target in sorted(targets):
            a, b = folder(source), folder(target)
            if a != b and layers[b] >= layers[a]:
                bad.append(f"{source} ({a}, layer {layers[a]}) imports {target} ({b}, layer {layers[b]})")
    return bad


def private_imports(found: dict[str, Path] = MODULES) -> list[str]:
    return [
        f"{name} imports {module}.{imported}"
        for name, path in found.items()
        for module, names in imports(path)
        for imported in names
        if imported.startswith("_") and not imported.startswith("__") and module != name
    ]


def too_complex(paths: list[Path]) -> list[str]:
    """`path:line function complexity` for every function over MAX_COMPLEXITY (ruff's C901, mccabe's count)."""
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    assert ruff, "ruff is in the test extra"
    out = subprocess.run(
        [
            ruff,
            "check",
            "--isolated",
            "--select",
            "C901",
            "--output-format",
            "json",
            "--config",
            f"lint.mccabe.max-complexity = {MAX_COMPLEXITY}",
            *map(str, paths),
        ],
        capture_output=True,
        text=True,
    )
    assert out.returncode in (0, 1), out.stderr
    return [f"{d['filename']}:{d['location']['row']} {d['message']}" for d in json.loads(out.stdout)]


# --- the checks can fail ---------------------------------------------------------------------------------------------


def test_the_cycle_finder_finds_a_cycle():
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b"}, "b": set()}) is None


def test_the_layer_contract_catches_an_upward_import_and_one_across_a_layer():
    graph = {
        "kppo.core.gae": {"kppo.agent.agent", "kppo.core.tf_loops"},
        "kppo.envs.base": {"kppo.gym_envs.spaces"},
        "kppo.agent.agent": {"kppo.core.gae"},
        "kppo.core.tf_loops": set(),
        "kppo.gym_envs.spaces": set(),
    }
    assert layer_violations(graph) == [
        "kppo.core.gae (core, layer 2) imports kppo.agent.agent (agent, layer 5)",
        "kppo.envs.base (envs, layer 3) imports kppo.gym_envs.spaces (gym_envs, layer 3)",
    ]


def test_the_contract_reads_imports_inside_functions_and_private_names(tmp_path):
    package = tmp_path / "kppo"
    (package / "core").mkdir(parents=True)
    (package / "agent").mkdir()
    for path in (package / "__init__.py", package / "core" / "__init__.py", package / "agent" / "__init__.py"):
        path.write_text("")
    (package / "agent" / "agent.py").write_text("X = 1\n")
    (package / "core" / "gae.py").write_text("def f():\n    from kppo.agent.agent import _hidden\n")
    found = modules(package)
    graph = import_graph(found)
    assert graph["kppo.core.gae"] == {"kppo.agent.agent"}
    assert layer_violations(graph) == ["kppo.core.gae (core, layer 2) imports kppo.agent.agent (agent, layer 5)"]
    assert private_imports(found) == ["kppo.core.gae imports kppo.agent.agent._hidden"]


def test_the_complexity_cap_catches_a_function_over_15(tmp_path):
    branches = "\n".join(f"    if x == {i}:\n        return {i}" for i in range(MAX_COMPLEXITY))  # 1 + 15 = 16
    (tmp_path / "complex.py").write_text(f"def complex_function(x):\n{branches}\n    return -1\n")
    (tmp_path / "simple.py").write_text("def simple_function(x):\n    return x\n")
    found = too_complex([tmp_path / "complex.py", tmp_path / "simple.py"])
    assert len(found) == 1 and "`complex_function` is too complex (16 > 15)" in found[0]


# --- kppo/ keeps them ------------------------------------------------------------------------------------------------


def test_every_folder_has_a_layer():
    assert sorted({folder(m) for m in MODULES} - set(LAYERS)) == []


def test_kppo_has_no_import_cycle():
    assert cycle(import_graph()) is None


def test_imports_flow_down_the_layers():
    assert layer_violations(import_graph()) == []


def test_no_module_imports_another_modules_private_names():
    assert private_imports() == []


def test_no_function_in_kppo_is_over_complexity_15():
    assert too_complex([PACKAGE]) == []


def test_the_runners_import_one_way():
    """native <- replicated <- host <- the dispatch in runners/__init__; the loop sees runners, never the reverse."""
    loop = {f"kppo.training.{name}" for name in ("train", "hooks", "plan", "results")}
    graph = import_graph()
    runners = "kppo.training.runners"
    assert f"{runners}.replicated" not in graph[f"{runners}.native"]
    assert f"{runners}.host" not in graph[f"{runners}.replicated"] | graph[f"{runners}.native"]
    assert not loop & set().union(*(graph[m] for m in MODULES if m.startswith(runners)))


def test_the_wheel_lists_every_folder():
    listed = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    folders = sorted({m for m in MODULES if MODULES[m].name == "__init__.py"})
    assert sorted(set(listed) - {"kppo.configs"}) == folders


def _documented_imports() -> dict[str, set[str]]:
    """module -> the kppo modules docs/architecture.md's tables say it imports."""
    doc = (ROOT / "docs" / "architecture.md").read_text()
    rows = {}
    for line in doc.splitlines():
        cells = [cell.strip() for cell in line.split(" | ")]
        if len(cells) < 3 or not cells[0].lstrip("| ").startswith("`") or not cells[0].endswith(".py`"):
            continue
        path = cells[0].lstrip("| ").strip("`")[:-3]
        name = "kppo." + path.replace("/", ".").removesuffix(".__init__").removesuffix("__init__").rstrip(".")
        names = re.findall(r"`([^`]+)`", cells[-1].removesuffix("|"))
        rows[name.rstrip(".")] = {"kppo" if n == "kppo" else f"kppo.{n}" for n in names}
    return rows


def test_the_architecture_map_lists_every_module_with_its_imports():
    """docs/architecture.md stays true: every module has a row, and its imports column is what the code imports."""
    documented, graph = _documented_imports(), import_graph()
    assert sorted(set(graph) - set(documented)) == [] and sorted(set(documented) - set(graph)) == []
    wrong = {
        name: {"doc": sorted(documented[name] - graph[name]), "code": sorted(graph[name] - documented[name])}
        for name in graph
        if documented[name] != graph[name]
    }
    assert wrong == {}


def _class_members(node: ast.ClassDef) -> set[str]:
    """A class's methods, nested classes, fields, assigned names and the `self.x` its methods assign."""
    members = set()
    for item in node.body:
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            members.add(item.name)
        elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            members.add(item.target.id)
        elif isinstance(item, ast.Assign):
            members |= {t.id for t in item.targets if isinstance(t, ast.Name)}
    for item in ast.walk(node):
        if isinstance(item, ast.Attribute) and isinstance(item.ctx, ast.Store) and isinstance(item.value, ast.Name):
            if item.value.id == "self":
                members.add(item.attr)
    return members


def _members(tree: ast.Module) -> dict[str, set[str] | None]:
    """A module's top-level names -> a class's member names (methods, fields, assigned names; its base classes'
    in this module too), None for a name that is not a class."""
    names: dict[str, set[str] | None] = {}
    bases: dict[str, list[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            names[node.name] = _class_members(node)
            bases[node.name] = [b.id for b in node.bases if isinstance(b, ast.Name)]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names[node.name] = None
        elif isinstance(node, ast.Assign):
            names.update({t.id: None for t in node.targets if isinstance(t, ast.Name)})
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names[node.target.id] = None
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update({(a.asname or a.name).split(".")[0]: None for a in node.names})
    for name, parents in bases.items():
        for parent in parents:
            if isinstance(names.get(parent), set):
                names[name] |= names[parent]  # type: ignore[operator]
    return names


DEFINED = {name: _members(ast.parse(path.read_text())) for name, path in MODULES.items()}
CLASSES = {cls: members for defined in DEFINED.values() for cls, members in defined.items() if isinstance(members, set)}


def _inherit_across_modules() -> None:
    """A class's members include those of its base classes defined in other kppo modules (`Config(ConfigFields)`)."""
    for path in MODULES.values():
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef):
                for base in (b.id for b in node.bases if isinstance(b, ast.Name)):
                    if base in CLASSES and base != node.name:
                        CLASSES[node.name] |= CLASSES[base]


_inherit_across_modules()


def unresolved_names(text: str) -> list[str]:
    """The dotted names in backticks in `text` that start with a kppo module path (`update.ppo.drive`) or a kppo
    class (`Runner.schedule_fn`) and name nothing the code defines."""
    bad = []
    for token in sorted(set(re.findall(r"`([A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)+)`", text))):
        parts = token.removeprefix("kppo.").split(".")
        if parts[-1] in ("py", "md", "yaml", "json"):  # a file name
            continue
        module = next((k for k in range(len(parts), 0, -1) if "kppo." + ".".join(parts[:k]) in MODULES), None)
        if module is not None:
            rest, defined = parts[module:], DEFINED["kppo." + ".".join(parts[:module])]
            if rest and rest[0] not in defined:
                bad.append(token)
            elif len(rest) > 1 and isinstance(defined[rest[0]], set) and rest[1] not in defined[rest[0]]:
                bad.append(token)
        elif len(parts) > 1 and parts[0] in CLASSES and parts[1] not in CLASSES[parts[0]]:
            bad.append(token)
    return bad


def test_the_dotted_name_check_catches_a_name_that_is_gone():
    assert unresolved_names("`update.driver.drive`, `update.ppo.gone`, `Runner.view`, `Runner.nothing`, `tf.foo`") == [
        "Runner.nothing",
        "update.ppo.gone",
    ]


def test_the_architecture_map_names_only_modules_and_fields_that_exist():
    """Every dotted name in backticks in docs/architecture.md that starts with a kppo module or class resolves."""
    assert unresolved_names((ROOT / "docs" / "architecture.md").read_text()) == []


@pytest.mark.parametrize("name", sorted(MODULES))
def test_every_module_says_what_it_is_for(name):
    assert ast.get_docstring(ast.parse(MODULES[name].read_text())), f"{name} has no module docstring"


def test_the_public_names_load_on_first_use_and_match_all():
    """`import kppo` starts no TensorFlow; `__all__`, the lazy table and what loads agree (no list drifts)."""
    code = (
        "import sys, kppo\n"
        "assert 'tensorflow' not in sys.modules, 'import kppo imported TensorFlow'\n"
        "assert sorted(kppo.__all__) == sorted([*kppo._EXPORTS, '__version__']), 'kppo.__all__ and _EXPORTS differ'\n"
        "missing = [n for n in kppo.__all__ if getattr(kppo, n, None) is None]\n"
        "assert not missing, missing\n"
        "assert 'tensorflow' in sys.modules\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]


def _files_on_the_way_to_the_loss(monkeypatch, env) -> list[str]:
    """The kppo files a debugger shows from `kppo.train` down to `losses.ppo_loss` (recorded as the loss traces)."""
    import traceback

    import kppo
    from kppo.core import losses

    stacks = []
    loss = losses.ppo_loss

    def recording(*args, **kwargs):
        stacks.append([frame.filename for frame in traceback.extract_stack()])
        return loss(*args, **kwargs)

    monkeypatch.setattr(losses, "ppo_loss", recording)
    config = kppo.Config(num_envs=2, num_steps=8, total_timesteps=16, num_minibatches=2, num_epochs=1, eval_freq=1)
    kppo.train(env, config.replace(num_eval_envs=1, num_hidden_units=4))
    inside = [
        str(Path(f).resolve().relative_to(PACKAGE)) for f in stacks[0] if Path(f).resolve().is_relative_to(PACKAGE)
    ]
    return [*dict.fromkeys(inside), "core/losses.py"]


@pytest.mark.parametrize("env", ["CartPole-v1", "gymnasium"])
def test_a_debugger_goes_from_kppo_train_to_the_loss_through_one_file_a_job(monkeypatch, env):
    """The front door, the loop, the runner, the loop over iterations, the one iteration, the update, the loss: each
    file one job, and nothing else on the way."""
    import gymnasium as gym

    source = (lambda: gym.make("CartPole-v1")) if env == "gymnasium" else env
    runner = "training/runners/host.py" if env == "gymnasium" else "training/runners/native.py"
    assert _files_on_the_way_to_the_loss(monkeypatch, source) == [
        "training/train.py",
        "training/loop.py",
        runner,
        "update/driver.py",
        "update/iteration.py",
        "update/ppo.py",
        "core/losses.py",
    ]


def _definitions() -> dict[str, int]:
    """How often each function, method, class and module-level constant is defined across kppo/."""
    counts: dict[str, int] = {}
    for path in MODULES.values():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                counts[node.name] = counts.get(node.name, 0) + 1
        for node in ast.parse(path.read_text()).body:
            targets = node.targets if isinstance(node, ast.Assign) else []
            for target in targets:
                if isinstance(target, ast.Name):
                    counts[target.id] = counts.get(target.id, 0) + 1
    return counts


def test_the_shared_core_is_written_once():
    """The iteration's builder, the loop over iterations, the evaluation round, the schedule table and its formula,
    the validation, the population check and the program cache: one definition each, every runner reading it."""
    counts = _definitions()
    once = [
        "make_iteration",  # update/iteration.py: every runner's iteration
        "start_iteration",
        "drive",  # update/driver.py
        "add_diagnostics",  # update/diagnostics.py: the one sum
        "evaluation_round",  # training/runners/base.py: every runner supplies only `evaluation_episodes`
        "SCHEDULED",  # config/schedules.py: the table
        "SCHEDULES",
        "progress_factor",  # update/schedules.py: the formulas
        "validate",  # config/validation.py
        "check_members",  # config/population.py
        "ProgramCache",  # training/runners/programs.py
    ]
    assert {name: counts.get(name, 0) for name in once} == dict.fromkeys(once, 1)
    # the Config resolved into what the layers below training read: once each, all in training/runners/settings.py
    resolvers = (
        "agent_spec",
        "optimizer_spec",
        "rollout_settings",
        "update_settings",
        "schedule_spec",
        "norm_constants",
    )
    settings = ast.parse(MODULES["kppo.training.runners.settings"].read_text())
    assert {name: counts.get(name, 0) for name in resolvers} == dict.fromkeys(resolvers, 1)
    assert set(resolvers) <= {node.name for node in settings.body if isinstance(node, ast.FunctionDef)}
    runners = ("NativeRunner", "HostRunner", "HostPopulationRunner", "PopulationRunner")
    assert all(counts.get(name) == 1 for name in runners)


MAX_MODULE_LINES = 500
#: SB3's algorithm classes: the base, the on-policy one and the PPO family on it, each at most this long.
ALGORITHM_CLASSES = ("BaseAlgorithm", "OnPolicyAlgorithm", "PPO", "RecurrentPPO", "MaskablePPO")
MAX_ALGORITHM_LINES = 250


def test_no_module_is_over_500_lines_and_no_sb3_algorithm_class_over_250():
    long_modules = {
        name: n for name, path in MODULES.items() if (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    }
    classes = {
        node.name: node.end_lineno - node.lineno + 1
        for path in MODULES.values()
        for node in ast.parse(path.read_text()).body
        if isinstance(node, ast.ClassDef) and node.name in ALGORITHM_CLASSES
    }
    assert long_modules == {} and sorted(classes) == sorted(ALGORITHM_CLASSES)
    assert {name: n for name, n in classes.items() if n > MAX_ALGORITHM_LINES} == {}


def test_below_training_nothing_takes_the_config():
    """core/, the envs, the agent, rollout/, update/ and the callbacks take the few resolved values they need
    (`AgentSpec`, `RolloutSettings`, `UpdateSettings`, `ScheduleSpec`, `normalization.Constants`), never a Config:
    they import only config/'s tables of names and choices, and no function of theirs has a `config` parameter
    (a Config passed in untyped)."""
    below = ("core", "envs", "gym_envs", "vec_envs", "agent", "rollout", "update", "callbacks")
    graph = import_graph()
    takes = sorted(m for m in graph if folder(m) in below and "kppo.config.options" in graph[m])
    untyped = sorted(
        f"{name}.{node.name}"
        for name, path in MODULES.items()
        if folder(name) in below
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and "config" in [arg.arg for arg in node.args.args + node.args.kwonlyargs]
    )
    assert takes == [] and untyped == []


def _config_names(tree: ast.AST) -> set[str]:
    """The names a module binds to Configs: any name spelled `config...`, and the targets of loops and comprehensions
    over one (`for c in configs`)."""
    names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and "config" in node.id}
    for node in ast.walk(tree):
        if isinstance(node, (ast.comprehension, ast.For)):
            iterated = {n.id for n in ast.walk(node.iter) if isinstance(n, ast.Name)}
            if iterated & names:
                names |= {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}
    return names


def test_the_runners_read_the_config_only_through_its_resolution():
    """`training/runners/` reads a Config once, in `settings.resolve` (every default applied, into a read-only
    `RunSpec`); every runner reads the RunSpec. A field read on a Config (`config.num_envs`, `configs[0].seed`,
    `c.seed for c in configs`) anywhere else in the folder fails here."""
    from kppo.config.options import Config

    fields = {field.name for field in dataclasses.fields(Config)}
    reads = []
    for name, path in MODULES.items():
        if not name.startswith("kppo.training.runners.") or name == "kppo.training.runners.settings":
            continue
        tree = ast.parse(path.read_text())
        names = _config_names(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in fields:
                base = node.value.value if isinstance(node.value, ast.Subscript) else node.value
                if isinstance(base, ast.Name) and base.id in names:
                    reads.append(f"{name}:{node.lineno}: {ast.unparse(node)}")
    assert reads == []
