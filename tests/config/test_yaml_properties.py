"""Property-based tests (Hypothesis) of the YAML files kppo reads: configs (`Config.from_yaml`, `kppo train FILE`),
RL-Zoo hyperparameter files (`read_zoo`, `kppo tune FILE --env ENV`) and search spaces (`load_space`, `kppo tune
--space FILE`). Random documents and mutations of the shipped files (tags, aliases, nesting, huge numbers, duplicate
keys, binary junk, other encodings) either load — a valid config, space or zoo entry — or raise kppo's one-line
ValueError naming the file; no tag ever constructs a Python object (sentinels count the calls a constructed tag
would make), and an alias bomb is refused within a second and a few megabytes."""

from __future__ import annotations

import os
import subprocess
import tempfile
import tracemalloc
from pathlib import Path

import pytest
import yaml
from hypothesis import event, example, given
from hypothesis import strategies as st

from kppo.config.options import Config
from kppo.config.values import MAX_YAML_DEPTH, MAX_YAML_NODES, load_yaml
from kppo.tuning.space import SearchSpace, load_space
from kppo.tuning.zoo import read_zoo
from tests.cli.test_cli_properties import cli_root  # noqa: F401  (the CLI's stubs and folder: a fixture)
from tests.cli.test_cli_properties import capturing, check_outcome, run_cli
from tests.helpers.fuzz import fast, one_line, slow, within

ROOT = Path(__file__).resolve().parents[2]
FIELDS = list(Config.__dataclass_fields__)
BASE = Config(num_envs=4, num_steps=32, total_timesteps=4 * 32 * 4, eval_freq=2)

# ---------------------------------------------------------------------------------------------------------------
# Sentinels: what a constructed tag would call
# ---------------------------------------------------------------------------------------------------------------

CALLS: list = []


def sentinel(*args, **kwargs):
    """What `!!python/object/apply:tests.config.test_yaml_properties.sentinel [...]` would call."""
    CALLS.append(("sentinel", args))
    return 0


class Sentinel:
    """What `!!python/object/new:...Sentinel` and `!!python/object:...Sentinel` would build."""

    def __new__(cls, *args, **kwargs):
        CALLS.append(("Sentinel", args))
        return super().__new__(cls)

    def __setstate__(self, state):
        CALLS.append(("Sentinel.__setstate__", state))


@pytest.fixture(scope="module", autouse=True)
def sentinels():
    """os.system, os.popen and subprocess.Popen count their calls for the whole module (a constructed
    `!!python/object/apply:os.system` would call one); every example then checks none was made."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(os, "system", sentinel)
        patch.setattr(os, "popen", sentinel)
        patch.setattr(subprocess, "Popen", sentinel)
        yield
    assert CALLS == []


def _no_calls():
    assert CALLS == [], f"a tag constructed a Python object: {CALLS[:3]}"


HERE = "tests.config.test_yaml_properties"
#: Tags that construct Python objects under PyYAML's unsafe loaders, unknown tags and other YAML that kppo refuses.
TAGS = [
    "!!python/object/apply:os.system ['echo pwned']",
    f"!!python/object/apply:{HERE}.sentinel [1]",
    f"!!python/object/new:{HERE}.Sentinel [1]",
    f"!!python/object:{HERE}.Sentinel {{a: 1}}",
    f"!!python/name:{HERE}.sentinel",
    "!!python/module:os",
    "!!python/tuple [1, 2]",
    "!!python/str x",
    "!!python/object/apply:subprocess.Popen [['true']]",
    "!foo bar",
    "!<tag:example.com,2000:x> 1",
    "!<tag:%0Ax> 1",
    "!!binary aGVsbG8=",
    "!!binary !!!",
    "!!set {a, b}",
    "!!omap [a: 1, b: 2]",
    "!!pairs [a: 1]",
    "!!timestamp 2001-13-45",
    "!!int x",
    "!!float x",
    "!!bool maybe",
    "!!null x",
    "!!str 1",
    "!!map [1]",
    "!!seq {a: 1}",
]
BOMB = "[&a [x, x, x, x, x, x, x, x, x]" + "".join(
    f", &{chr(98 + i)} [" + ", ".join([f"*{chr(97 + i)}"] * 9) + "]" for i in range(9)
) + "]"  # fmt: skip
#: Values: kppo's kinds and their edges, YAML's odd scalars, aliases, nesting, size.
SCALARS = [
    "4", "0", "-1", "1.0e-3", "1e-3", "3e-4", "1e5", "1e400", "-.inf", ".nan", "0x1F", "0o17", "0b11", "1_000",
    "9" * 400, "9" * 5000, "1:30", "2001-12-14", "2001-12-14t21:59:43.10-05:00", "true", "yes", "off", "~", "null",
    "''", '""', "'a'", '"\\x00"', '"\\ud800"', '"\\N"', "lin_0.1", "lin_x", "CartPole-v1", "Nope-v0", "tanh", "[]",
    "{}", "[1, 2]", "[64, 64]", "[-1]", "{a: 1}", "*a", "&a 1", "&a [*a]", BOMB, "[" * 60 + "]" * 60,
    "{a: " * 40 + "1" + "}" * 40, "x" * 3000, "[" + ", ".join(["1"] * 3000) + "]", "|\n  text\n  more", ">-\n  folded",
]  # fmt: skip
KEYS = [*FIELDS, "LR", "n_envs", "n_steps", "batch_size", "normalize", "ANNEAL_LR", "policy", "policy_kwargs",
        "n_timesteps", "colour", "<<", "? [a, b]", "1", "~", "true", "'num_envs'", "num_envs ", "!!str num_envs",
        "&k num_envs", "*k", ""]  # fmt: skip
JUNK_LINES = ["---", "...", "%YAML 1.1", "%TAG ! tag:x,2000:", "- 1", "? a", ": b", "\t", "a:b", "a: b: c",
              "[", "  indented: 1", "key with spaces: 1", "#", "'unterminated", "{a: 1", "a: &anchor",
              "*undefined"]  # fmt: skip


def _shipped() -> dict[str, str]:
    """The shipped configs without their comment headers (PyYAML, pure Python, spends most of a shipped file's
    ~10 ms on its comments; the fields are what the mutations are for)."""
    files = sorted((ROOT / "configs").glob("*.yaml"))
    return {path.name: "".join(line for line in path.read_text().splitlines(True) if line[:1] != "#") for path in files}


SHIPPED = _shipped()

#: rl_zoo3 2.9.2's hyperparams/ppo.yml, CartPole-v1 and (abridged) Pendulum-v1, as tests/tuning/test_zoo.py has it.
ZOO = """\
CartPole-v1:
  n_envs: 8
  n_timesteps: !!float 1e5
  policy: 'MlpPolicy'
  n_steps: 32
  batch_size: 256
  gae_lambda: 0.8
  gamma: 0.98
  n_epochs: 20
  ent_coef: 0.0
  learning_rate: lin_0.001
  clip_range: lin_0.2

Pendulum-v1:
  n_envs: 4
  n_timesteps: !!float 1e5
  policy: 'MlpPolicy'
  n_steps: 1024
  gae_lambda: 0.95
  gamma: 0.9
  n_epochs: 10
  ent_coef: 0.0
  learning_rate: !!float 1e-3
  clip_range: 0.2
  use_sde: True
  sde_sample_freq: 4
  normalize: "{'norm_obs': True, 'norm_reward': False}"
  policy_kwargs: "dict(log_std_init=-2, ortho_init=False, activation_fn=nn.ReLU, net_arch=dict(pi=[64], vf=[64]))"
"""
#: The search spaces of kppo/tuning/space.py's docstring and docs/guides/tuning.md, and RL-Zoo's derived names.
SPACE = """\
learning_rate: {type: float, low: 1.0e-5, high: 1.0e-2, log: true}
clip_range: {type: categorical, choices: [0.1, 0.3]}
n_steps_pow: {type: int, low: 3, high: 6}
num_hidden_units: {type: int, low: 32, high: 256, step: 32}
net_arch: {type: categorical, choices: [tiny, small]}
"""  # five parameters (each bound is a Config built twice: ~1 ms each); every kind, RL-Zoo's derived ones included
#: Fragments that go into a zoo entry's Python strings (policy_kwargs, normalize): read as syntax trees, never run.
PYTHON = [
    "dict(net_arch=dict(pi=[64], vf=[64]), activation_fn=nn.ReLU)", "__import__('os').system('echo pwned')",
    f"__import__('{HERE}').sentinel()", "dict(**x)", "{1: 2}", "{[1]: 2}", "dict(log_std_init='a')",
    "dict(ortho_init='no')", "dict(net_arch=[dict(pi=[1])])", "dict(net_arch={1: [2]})", "dict(activation_fn=nn.Foo)",
    "dict(features_extractor_class=x)", "(" * 300 + ")" * 300, "[" * 150 + "]" * 150, "1+" * 2000 + "1", "9" * 5000,
    "{'norm_obs': True, 'norm_reward': False}", "{'norm_obs': 'no'}", "{'clip_obs': 5.0}", "True", "dict(", "lambda: 0",
    "dict(optimizer_kwargs=dict(eps=1e-5))", "dict(squash_output=True, full_std=[1])",
]  # fmt: skip


# ---------------------------------------------------------------------------------------------------------------
# Documents: random ones and mutations of the shipped ones, as text or bytes
# ---------------------------------------------------------------------------------------------------------------

VALUE = st.one_of(
    st.sampled_from(SCALARS),
    st.sampled_from(TAGS),
    st.text(max_size=8),
    st.text(max_size=8).map(repr),
    st.integers().map(str),
    st.floats().map(repr),
)
LINE = st.one_of(
    st.builds(lambda k, v: f"{k}: {v}", st.sampled_from(KEYS), VALUE),
    st.sampled_from(JUNK_LINES),
    st.text(max_size=20),
)


@st.composite
def mutated_text(draw, text: str) -> str:
    """`text` with 1-4 edits: a line dropped, duplicated (a duplicate key), replaced, its value replaced by a tag or
    an odd value, a line inserted, indentation changed, characters inserted or the text cut."""
    lines = text.splitlines()
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, max(len(lines) - 1, 0)))
        edit = draw(st.sampled_from(["drop", "duplicate", "replace", "value", "insert", "indent", "chars", "cut"]))
        if not lines or edit == "insert":
            lines.insert(i, draw(LINE))
        elif edit == "drop":
            del lines[i]
        elif edit == "duplicate":
            lines.insert(draw(st.integers(0, len(lines))), lines[i])
        elif edit == "replace":
            lines[i] = draw(LINE)
        elif edit == "value":
            key = lines[i].split(":")[0]
            lines[i] = f"{key}: {draw(VALUE)}"
        elif edit == "indent":
            lines[i] = draw(st.sampled_from(["  ", "    ", "\t", ""])) + lines[i].lstrip()
        elif edit == "chars":
            j = draw(st.integers(0, len(lines[i])))
            lines[i] = lines[i][:j] + draw(st.text(max_size=3)) + lines[i][j:]
        else:
            lines = lines[:i]
    return "\n".join(lines) + "\n"


@st.composite
def as_bytes(draw, text: str) -> bytes:
    """`text` as UTF-8 mostly; sometimes another encoding, a BOM, or random bytes spliced in."""
    how = draw(st.sampled_from(["utf-8"] * 6 + ["utf-8-sig", "utf-16", "latin-1", "splice"]))
    if how == "splice":
        data = text.encode()
        j = draw(st.integers(0, len(data)))
        return data[:j] + draw(st.binary(min_size=1, max_size=8)) + data[j:]
    return text.encode(how, errors="replace") if how == "latin-1" else text.encode(how)


RANDOM_DOCUMENT = st.lists(LINE, max_size=8).map(lambda lines: "\n".join(lines) + "\n")
DUMPED = st.dictionaries(
    st.one_of(st.sampled_from(KEYS[:40]), st.text(max_size=6)),
    st.recursive(
        st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=6)),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
        max_leaves=6,
    ),
    max_size=5,
).map(lambda d: yaml.safe_dump(d, sort_keys=False))  # valid YAML of random values
CONFIG_TEXTS = st.one_of(st.sampled_from(list(SHIPPED.values())).flatmap(mutated_text), RANDOM_DOCUMENT, DUMPED)
CONFIG_FILES = CONFIG_TEXTS.flatmap(as_bytes)
ZOO_TEXTS = st.one_of(
    st.just(ZOO).flatmap(mutated_text),
    st.builds(
        lambda key, text: ZOO.replace("'MlpPolicy'", "'MlpPolicy'\n  " + f"{key}: {text!r}"),
        st.sampled_from(["policy_kwargs", "normalize"]),
        st.sampled_from(PYTHON),
    ),
)
ZOO_FILES = ZOO_TEXTS.flatmap(as_bytes)
SPACE_FILES = st.one_of(st.just(SPACE).flatmap(mutated_text), RANDOM_DOCUMENT).flatmap(as_bytes)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("yaml")


def _write(folder: Path, data: bytes, suffix: str = ".yaml") -> Path:
    handle, name = tempfile.mkstemp(suffix=suffix, dir=folder)
    with os.fdopen(handle, "wb") as f:
        f.write(data)
    return Path(name)


# ---------------------------------------------------------------------------------------------------------------
# The targets, as plain checks
# ---------------------------------------------------------------------------------------------------------------


def _refused(err: ValueError, path: Path, *names: str) -> None:
    one_line(str(err), [repr(str(path)), *names])
    assert len(str(err).splitlines()) == 1, f"split by a line break character: {str(err)!r}"
    event(f"refused: {str(err).split(': ', 2)[-1][:24]}")


def check_config_file(folder: Path, data: bytes) -> None:
    """`Config.from_yaml(file)`: a Config (which survives its own YAML) or a one-line error naming the file."""
    path = _write(folder, data)
    with within(5):
        try:
            config = Config.from_yaml(path)
        except ValueError as err:
            _refused(err, path)
            return
        finally:
            _no_calls()
    event("loaded")
    assert Config.from_dict(config.to_dict()) == config  # (the YAML round trip is tests/config/test_options.py's)


def check_zoo_file(folder: Path, data: bytes, env: str | None) -> None:
    """`read_zoo(file, env)`: an entry's Config or a one-line error naming the file (or --env, for a wrong env)."""
    path = _write(folder, data, ".yml")
    with within(5):
        try:
            env_id, config = read_zoo(path, env)
        except ValueError as err:
            _refused(err, path, "--env")
            return
        finally:
            _no_calls()
    event("loaded")
    assert config.env == env_id and isinstance(config, Config)


def check_space_file(folder: Path, data: bytes) -> None:
    """`load_space(file, base)`: a SearchSpace whose every bound or choice makes a valid config, or a one-line
    error naming the file."""
    path = _write(folder, data)
    with within(5):
        try:
            space = load_space(path, BASE)
        except ValueError as err:
            _refused(err, path)
            return
        finally:
            _no_calls()
    event("loaded")
    assert isinstance(space, SearchSpace)
    for name, dist in space.params.items():
        for value in dist.values():
            space.apply(BASE, {name: value})


#: A space given as YAML text (`--space` takes either): RL-Zoo's default space is 11 parameters whose 22 bounds are
#: each checked by building a Config (~40 ms a command); the zoo file is what this target is about.
SMALL_SPACE = "learning_rate: {type: float, low: 1.0e-4, high: 1.0e-3}"


def check_cli_file(capsys, root: Path, data: bytes, command: str) -> None:
    """`kppo train FILE`, `kppo tune FILE --env CartPole-v1` or `kppo tune cartpole --space FILE` (training, the
    study and PBT stubbed: `tests/cli/test_cli_properties.py`): it would run, or exits 2 with one line naming the
    file (or the env it names)."""
    argv = {
        "train": ["train", "file.yaml", "--quiet"],
        "tune zoo": ["tune", "file.yaml", "--env", "CartPole-v1", "--space", SMALL_SPACE, "--quiet"],
        "tune space": ["tune", "cartpole", "--space", "file.yaml", "--quiet"],
    }[command]
    outcome = run_cli(argv, capsys, root, {"file.yaml": data})
    _no_calls()
    check_outcome(outcome, argv, ["'file.yaml'", "env", "--env"])


# ---------------------------------------------------------------------------------------------------------------
# The tests: each target fast and slow
# ---------------------------------------------------------------------------------------------------------------


@given(CONFIG_FILES)
@fast()
def test_config_files_load_or_refuse_in_one_line(folder, data):
    check_config_file(folder, data)


@given(ZOO_FILES, st.one_of(st.none(), st.sampled_from(["CartPole-v1", "Pendulum-v1", "Acrobot-v1", ""])))
@fast()
def test_zoo_files_load_or_refuse_in_one_line(folder, data, env):
    check_zoo_file(folder, data, env)


@given(SPACE_FILES)
@fast()
def test_space_files_load_or_refuse_in_one_line(folder, data):
    check_space_file(folder, data)


@example(case=("train", b'env:\n  "\\x1E": null\n'))  # an RL-Zoo key whose name is a line break
@example(case=("tune zoo", b"CartPole-v1:\n  policy: !!set {a, b}\n"))  # an unhashable policy (found by Hypothesis)
@given(
    st.one_of(
        st.tuples(st.just("train"), CONFIG_FILES),
        st.tuples(st.just("tune zoo"), ZOO_FILES),
        st.tuples(st.just("tune space"), SPACE_FILES),
    )
)
@capturing(fast())
def test_yaml_files_through_the_cli_run_or_refuse_in_one_line(request, capsys, case):
    command, data = case
    check_cli_file(capsys, request.getfixturevalue("cli_root"), data, command)


@pytest.mark.slow
@given(CONFIG_FILES)
@slow(3_000)
def test_config_files_at_scale(folder, data):
    check_config_file(folder, data)


@pytest.mark.slow
@given(ZOO_FILES, st.one_of(st.none(), st.sampled_from(["CartPole-v1", "Pendulum-v1", "Acrobot-v1", ""])))
@slow(2_000)
def test_zoo_files_at_scale(folder, data, env):
    check_zoo_file(folder, data, env)


@pytest.mark.slow
@given(SPACE_FILES)
@slow(2_000)
def test_space_files_at_scale(folder, data):
    check_space_file(folder, data)


@pytest.mark.slow
@example(case=("train", b'env:\n  "\\x1E": null\n'))  # an RL-Zoo key whose name is a line break
@given(
    st.one_of(
        st.tuples(st.just("train"), CONFIG_FILES),
        st.tuples(st.just("tune zoo"), ZOO_FILES),
        st.tuples(st.just("tune space"), SPACE_FILES),
    )
)
@capturing(slow(2_000))
def test_yaml_files_through_the_cli_at_scale(request, capsys, case):
    command, data = case
    check_cli_file(capsys, request.getfixturevalue("cli_root"), data, command)


# ---------------------------------------------------------------------------------------------------------------
# What Hypothesis (or a reading of the code) found, kept as regressions; and that the checks can fail
# ---------------------------------------------------------------------------------------------------------------


def test_every_shipped_config_loads():
    """The mutations start from valid files."""
    for name, text in SHIPPED.items():
        assert isinstance(Config.from_yaml(text), Config), name
    assert read_zoo(ZOO, "Pendulum-v1")[1].normalize_obs
    assert len(load_space(SPACE, BASE).params) == 5


@pytest.mark.parametrize(
    "text, message",
    [
        # nesting deeper than Python's recursion limit: PyYAML's composer raised RecursionError (a traceback)
        ("num_envs: " + "[" * 5000 + "]" * 5000, f"expected at most {MAX_YAML_DEPTH} nested levels"),
        ("num_envs: " + "{a: " * 3000 + "1" + "}" * 3000, f"expected at most {MAX_YAML_DEPTH} nested levels"),
        # a 400-digit integer: OverflowError from float(value) (a traceback)
        ("num_envs: " + "9" * 400, "total_timesteps: expected at least one rollout"),
        ("learning_rate: " + "9" * 400, "learning_rate: expected a finite number"),
        # a 5,000-digit integer: Python's own ValueError (4300 digits), naming no file
        ("seed: " + "9" * 5000, "could not read '9999"),
        # a date that is none: datetime's ValueError from PyYAML's constructor, naming no file
        ("seed: 2001-13-45", "could not read '2001-13-45' as timestamp (ValueError: month must be in 1..12)"),
        # PyYAML's other scalar constructors: a KeyError, an IndexError, an AttributeError (each a traceback)
        ("env: !!bool maybe", "could not read 'maybe' as bool (KeyError"),
        ("env: !!float ''", "could not read '' as float (IndexError"),
        ("env: !!timestamp abc", "could not read 'abc' as timestamp (AttributeError"),
        # duplicate keys: PyYAML kept the last value silently (the first one lost)
        ("num_envs: 4\nnum_steps: 8\nnum_envs: 8", "found duplicate key 'num_envs'"),
        ("1: a\ntrue: b", "found duplicate key True"),  # equal as Python keys
        # an alias inside its own anchor: a recursive list
        ("env: &a [*a]", "expected no alias inside its own anchor"),
        # a key the options do not know, in a file: the message named no file
        ("colour: blue", "unknown option 'colour'"),
    ],
)
def test_found_by_hypothesis(folder, text, message):
    """Each was a traceback, a silent loss or a message naming no file before its fix (the comment says which)."""
    path = _write(folder, text.encode())
    with pytest.raises(ValueError) as err:
        Config.from_yaml(path)
    assert message in str(err.value)
    one_line(str(err.value), [repr(str(path))])


def test_merge_keys_still_override_without_counting_as_duplicates():
    """The duplicate check looks at a mapping's own keys: `<<` merges and the keys that override them are YAML."""
    assert load_yaml("a: &a {x: 1, y: 2}\nb: {<<: *a, x: 3}\n") == {"a": {"x": 1, "y": 2}, "b": {"x": 3, "y": 2}}
    chained = "a: &a {x: 1}\nb: &b {<<: *a, x: 2}\nc: {<<: *b}\n"  # PyYAML's own merge gives c {x: 1}: kept as is
    assert load_yaml(chained) == yaml.safe_load(chained)
    assert Config.from_yaml("num_envs: &n 4\nnum_eval_envs: *n\n").num_eval_envs == 4  # an alias is fine


def test_an_alias_bomb_is_refused_in_bounded_time_and_memory(folder):
    """A billion laughs (9 ** 10 strings from a 600-byte file) is refused as it is composed: PyYAML builds shared
    lists in no time, but a refusal's repr (or anything walking the value) would expand it — here within 2 s and
    50 MB, through the file reader and through --set."""
    path = _write(folder, f"env: {BOMB}\n".encode())
    tracemalloc.start()
    try:
        with within(2), pytest.raises(ValueError, match=f"expected at most {MAX_YAML_NODES:,} values"):
            Config.from_yaml(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 50e6, peak


def test_tags_are_refused_without_being_constructed(folder):
    """Every tag that would construct a Python object is refused by name; the sentinels would see a construction
    (checked here: PyYAML's unsafe loader does call them)."""
    for tag in TAGS[:9]:
        path = _write(folder, f"num_envs: {tag}\n".encode())
        with pytest.raises(ValueError, match="could not determine a constructor for the tag"):
            Config.from_yaml(path)
        _no_calls()
    yaml.unsafe_load(f"x: !!python/object/apply:{HERE}.sentinel [1]\ny: !!python/object/apply:os.system ['true']")
    assert [name for name, _ in CALLS] == ["sentinel", "sentinel"]  # the check can fail
    CALLS.clear()


@pytest.mark.parametrize(
    "key, text, message",
    [
        # a dict key that is a list: TypeError (unhashable) from building the dict (a traceback)
        ("policy_kwargs", "{[1]: 2}", "CartPole-v1.policy_kwargs: expected keyword names (strings) as keys, got [1]"),
        ("policy_kwargs", "{1: 2}", "expected keyword names (strings) as keys, got 1"),
        # dict(**x): the unpacked mapping was dropped silently
        ("policy_kwargs", "dict(**x)", "CartPole-v1.policy_kwargs: expected literals, dict(...) and nn.<activation>"),
        # 300 nested parentheses: the parser's own limit, a SyntaxError worded as one
        ("policy_kwargs", "(" * 300 + ")" * 300, "CartPole-v1.policy_kwargs: could not parse"),
        # 1+1+...: literal_eval's recursion (a RecursionError, a traceback)
        ("policy_kwargs", "1+" * 2000 + "1", "CartPole-v1.policy_kwargs: expected"),
        # `bool('no')` is True: a flag given as a string was read as true
        ("policy_kwargs", "dict(ortho_init='no')", "policy_kwargs.ortho_init: expected true or false, got 'no'"),
        ("policy_kwargs", "dict(log_std_init='a')", "policy_kwargs.log_std_init: expected a number, got 'a'"),
        ("normalize", "{'norm_obs': 'no'}", "normalize_obs: expected true or false, got 'no'"),
        # VecNormalize arguments kppo does not take (gamma: PPO's) were dropped silently
        ("normalize", "{'gamma': 0.9}", "normalize: expected VecNormalize arguments among"),
        ("normalize", "{'clip_obs': -1}", "clip_obs: expected a positive number, got -1"),
        # a features extractor a search does not build was dropped silently
        ("policy_kwargs", "dict(features_extractor_class=1)", "policy_kwargs.features_extractor_class: expected none"),
    ],
)
def test_zoo_found_by_hypothesis(folder, key, text, message):
    """RL-Zoo entries: each was a traceback or a silent loss before its fix."""
    path = _write(folder, f"CartPole-v1:\n  {key}: {text!r}\n".encode(), ".yml")
    with pytest.raises(ValueError) as err:
        read_zoo(path)
    assert message in str(err.value), str(err.value)
    one_line(str(err.value), [repr(str(path))])


@pytest.mark.parametrize(
    "entry, message",
    [
        ("n_timesteps: abc", "n_timesteps: expected an integer, got 'abc'"),  # float('abc'): no field named
        ("n_timesteps: [1]", "n_timesteps: expected an integer, got [1]"),  # float([1]): a TypeError
        ("n_timesteps: .inf", "n_timesteps: expected an integer, got inf"),  # int(inf): an OverflowError
        ("1: 2", "expected option names as strings, got 1"),  # replace(**{1: 2}): a TypeError
    ],
)
def test_zoo_entries_found_by_hypothesis(folder, entry, message):
    path = _write(folder, f"CartPole-v1:\n  {entry}\n".encode(), ".yml")
    with pytest.raises(ValueError) as err:
        read_zoo(path)
    assert message in str(err.value), str(err.value)
    one_line(str(err.value), [repr(str(path))])


@pytest.mark.parametrize(
    "text, message",
    [
        # keys of two types: sorted() raised TypeError (a traceback)
        ("learning_rate: {type: float, low: 0.1, high: 1, 1: 2, a: 3}", "a float distribution takes"),
        # a 400-digit bound: math.isfinite raised OverflowError
        ("learning_rate: {type: float, low: 0.1, high: " + "9" * 400 + "}", "high: expected a finite number"),
        # 2 ** 10**9 (n_steps_pow) never ended; a float power was truncated; a string one was a TypeError
        ("n_steps_pow: {type: int, low: 1000000000, high: 1000000000}", "n_steps_pow: expected an integer from 0"),
        ("n_steps_pow: {type: float, low: 3.5, high: 4.5}", "n_steps_pow: expected an integer from 0 to 30"),
        ("one_minus_gamma: {type: categorical, choices: [a]}", "one_minus_gamma: expected a finite number, got 'a'"),
    ],
)
def test_space_found_by_hypothesis(folder, text, message):
    path = _write(folder, f"{text}\n".encode())
    with pytest.raises(ValueError) as err, within(5):
        load_space(path, BASE)
    assert message in str(err.value), str(err.value)
    one_line(str(err.value), [repr(str(path))])


def test_a_name_with_a_line_break_character_stays_on_the_line(folder):
    """YAML's "\\L" (U+2028) and "\\N" (U+0085) are line breaks to str.splitlines: a space's parameter or a zoo
    file's env id holding one split the refusal quoting it (found with \\x1e on the command line)."""
    space = _write(folder, b'"a\\Lb": {type: float, low: 1, high: 2}\n')
    with pytest.raises(ValueError) as err:
        load_space(space, BASE)
    assert "a\\u2028b" in str(err.value) and len(str(err.value).splitlines()) == 1
    zoo = _write(folder, b'"Cart\\NPole-v1": {policy: MlpLstmPolicy}\n', ".yml")
    with pytest.raises(ValueError) as err:
        read_zoo(zoo)
    assert "Cart\\x85Pole-v1.policy" in str(err.value) and len(str(err.value).splitlines()) == 1


def test_a_space_bound_in_scientific_notation_without_a_dot_is_a_number():
    """YAML 1.1 reads `1e-4` as a string: a space refused it ('expected a finite number, got '1e-4''), while a
    config's fields take it."""
    assert load_space("learning_rate: {type: float, low: 1e-4, high: 1e-3}\n", BASE).params["learning_rate"].low == 1e-4


@example(b"colour: blue\n")
@given(st.just(b"colour: blue\n"))
@fast(1)
def test_the_check_fails_a_refusal_that_names_no_file(folder, data):
    """`check_config_file` can fail: the refusal of a file that did not name it (before the fix) is caught."""
    check_config_file(folder, data)
    with pytest.raises(AssertionError, match="names none of"):
        _refused(ValueError("config: unknown option 'colour'"), Path("/x.yaml"))
