"""Property-based tests (Hypothesis) of the loaders of kppo's saved agents, on damaged and hostile input: a `.zip`
save (`kppo.PPO.save`, read by `kppo.PPO.load`), an agent directory (`checkpoint.save`, read by `load_agent`) and a
run's training checkpoints (`TrainingCheckpointer`, read as `kppo eval RUN_DIR` and `kppo train --resume` read them).

Each saved input is written once per module; an example mutates its bytes (truncated, bits flipped, members or
files renamed, removed, or replaced by random bytes, YAML, JSON, deep nesting, a pickle calling a sentinel, a
plausible file with one field changed; zip-slip names, symlink members, decompression bombs whose header tells the
truth or lies). The contract (issue 39): the input loads, or is refused with a one-line ValueError naming the file;
nothing is written outside the loader's own temporary directory (an empty sentinel folder next to it stays empty);
the input is left as it was; nothing is executed (`os.system`, `exec`, `eval`, `pickle.loads`, ... raise while a
loader runs, and the sentinel is never called); a bomb never costs the loader more than a few MB.

The zip and content helpers here are shared with tests/sb3/test_sb3_zip_properties.py (SB3's zips)."""

from __future__ import annotations

import base64
import builtins
import contextlib
import io
import itertools
import json
import marshal
import os
import pickle
import stat
import struct
import subprocess
import sys
import tempfile
import tracemalloc
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import yaml
from hypothesis import event, example, given
from hypothesis.control import currently_in_test_context
from hypothesis import strategies as st

from tests.helpers.fuzz import fast, one_line, slow, within

# ---------------------------------------------------------------------------------------------------------------
# Zips written byte by byte (any name, attribute, method, declared size), and the decompression bomb
# ---------------------------------------------------------------------------------------------------------------


class Entry(NamedTuple):
    """One zip member as written: its name, stored bytes (`payload`), method, CRC, declared size, Unix mode."""

    name: str
    payload: bytes
    method: int = zipfile.ZIP_DEFLATED
    crc: int = 0
    size: int = 0
    mode: int = stat.S_IFREG | 0o644


def entry(name: str, data: bytes, mode: int = stat.S_IFREG | 0o644) -> Entry:
    """A deflated member holding `data`, its header true."""
    packer = zlib.compressobj(6, zlib.DEFLATED, -15)
    return Entry(name, packer.compress(data) + packer.flush(), zipfile.ZIP_DEFLATED, zlib.crc32(data), len(data), mode)


def pack(entries: list[Entry]) -> bytes:
    """A zip of `entries`, written as they say (local headers, central directory, end record; no zip64)."""
    out, central = io.BytesIO(), []
    for e in entries:
        name = e.name.encode("utf-8", "surrogateescape")
        flags = 0 if name.isascii() else 0x800
        offset = out.tell()
        header = (20, flags, e.method, 0, 0x21, e.crc, len(e.payload), e.size, len(name), 0)
        out.write(struct.pack("<4s5H3L2H", b"PK\x03\x04", *header) + name + e.payload)
        central.append(
            struct.pack("<4s6H3L5H2L", b"PK\x01\x02", 0x314, *header, 0, 0, 0, (e.mode & 0xFFFF) << 16, offset) + name
        )
    start = out.tell()
    directory = b"".join(central)
    out.write(directory)
    out.write(struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, len(entries), len(entries), len(directory), start, 0))
    return out.getvalue()


def members(data: bytes) -> list[tuple[str, bytes]]:
    """(name, bytes) of a zip's members, in order."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return [(info.filename, archive.read(info)) for info in archive.infolist()]


def _deflated_zeros(mib: int) -> bytes:
    """A raw deflate stream of `mib` MiB of zeros, built from one flushed 1 MiB block repeated (~1 KB each)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = packer.compress(bytes(1 << 20)) + packer.flush(zlib.Z_FULL_FLUSH)
    return block * mib + zlib.compressobj(9, zlib.DEFLATED, -15).flush()


BOMB_SIZE = 3 << 30  # 3 GiB of zeros in ~3 MB: more than any loader may unpack
BOMB = _deflated_zeros(BOMB_SIZE >> 20)


def bomb(name: str, declared: int) -> Entry:
    """A member inflating to 3 GiB that declares `declared` bytes (the truth, or a lie)."""
    return Entry(name, BOMB, zipfile.ZIP_DEFLATED, 0, declared)


# ---------------------------------------------------------------------------------------------------------------
# Contents: random bytes, YAML, JSON, deep nesting, a pickle calling the sentinel, plausible files with one change
# ---------------------------------------------------------------------------------------------------------------

CALLS: list[str] = []


def sentinel(*args: Any) -> None:
    """What the hostile pickles call (GLOBAL + REDUCE): a loader that unpickles records a call here."""
    CALLS.append(f"sentinel{args!r}")


#: `tests.agent.test_archive_properties.sentinel()` as protocol-2 and protocol-4 opcodes.
SENTINEL_PICKLES = [
    b"\x80\x02c" + __name__.encode() + b"\nsentinel\n)R.",
    pickle.dumps(sentinel, protocol=4)[:-1] + b")R.",
]
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)
#: What a user or an editor might put in a field (the edge numbers of tests/config/test_config_properties.py).
FIELD_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from([0, 1, -1, 2, 3, 7, 64, 2**31, 2**40, 2**63, -(2**63), 10**30]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=10),
    st.sampled_from(["Box", "Discrete", "Dict", "float32", "object", "int64", "linear", "lstm", "1.0", ""]),
    st.lists(st.integers(-3, 10**6), max_size=3),
    st.dictionaries(st.sampled_from(["type", "n", "shape", "low", "high", "dtype", "spaces"]), JSON_VALUES, max_size=3),
)


class Edit(NamedTuple):
    """The member's own JSON or YAML with one field (a dotted path) set to `value` (or removed when `remove`)."""

    path: tuple[str, ...]
    value: Any
    remove: bool = False


def edited(data: bytes, change: Edit) -> bytes:
    """`data` (JSON or YAML) with `change` applied at the deepest existing part of its path; `data` when not a
    mapping."""
    as_json = data.lstrip().startswith(b"{")
    try:
        tree = json.loads(data) if as_json else yaml.safe_load(data)
    except (ValueError, yaml.YAMLError):
        return data
    node = tree
    for key in change.path[:-1]:
        if not isinstance(node, dict) or not isinstance(node.get(key), dict):
            break
        node = node[key]
    if not isinstance(node, dict):
        return data
    if change.remove:
        node.pop(change.path[-1], None)
    else:
        node[change.path[-1]] = change.value
    return json.dumps(tree).encode() if as_json else yaml.safe_dump(tree).encode()


#: Field paths worth changing in kppo's and SB3's JSON and YAML files (missing ones are added at the top).
FIELD_PATHS = sorted(
    [
        ("format",),
        ("kppo_version",),
        ("observation_space",),
        ("observation_space", "type"),
        ("observation_space", "shape"),
        ("observation_space", "low"),
        ("observation_space", "dtype"),
        ("action_space",),
        ("action_space", "n"),
        ("action_space", "type"),
        ("extra",),
        ("extra", "sb3"),
        ("extra", "sb3", "policy_kwargs"),
        ("extra", "sb3", "n_steps"),
        ("extra", "sb3", "policy"),
        ("extra", "sb3", "learning_rate"),
        ("num_hidden_units",),
        ("num_hidden_layers",),
        ("actor_hidden_units",),
        ("num_envs",),
        ("recurrent",),
        ("lstm_hidden_size",),
        ("env",),
        ("features_extractor",),
        ("n_steps",),
        ("n_envs",),
        ("batch_size",),
        ("gamma",),
        ("num_timesteps",),
        ("_stats_window_size",),
        ("policy_kwargs",),
        ("policy_kwargs", "net_arch"),
        ("policy_class",),
        ("observation_space", ":serialized:"),
        ("action_space", ":serialized:"),
        ("policy_class", ":serialized:"),
        ("clip_range", "value_schedule"),
    ]
)
#: Base64 text for SB3's serialized entries: random bytes, and the sentinel's pickles.
SERIALIZED = st.one_of(
    st.binary(max_size=40).map(lambda b: base64.b64encode(b).decode()),
    st.sampled_from([base64.b64encode(p).decode() for p in SENTINEL_PICKLES]),
    st.text(max_size=12),
)


def contents(paths: list[tuple[str, ...]]) -> st.SearchStrategy:
    """New contents for a member or file: bytes as they come, or an `Edit` of the member's own JSON or YAML at one
    of `paths`."""
    edits = st.builds(
        Edit, st.sampled_from(paths), st.one_of(FIELD_VALUES, SERIALIZED), st.sampled_from([False, False, True])
    )
    return st.one_of(
        st.binary(max_size=64),
        JSON_VALUES.map(lambda v: json.dumps(v).encode()),
        JSON_VALUES.map(lambda v: yaml.safe_dump(v).encode()),
        st.text(max_size=40).map(str.encode),
        st.tuples(st.sampled_from("[{"), st.integers(10, 50_000)).map(lambda t: (t[0] * t[1]).encode()),
        st.sampled_from(SENTINEL_PICKLES),
        edits,
    )


CONTENTS = contents(FIELD_PATHS)


def new_content(content: bytes | Edit, old: bytes) -> bytes:
    return edited(old, content) if isinstance(content, Edit) else content


# ---------------------------------------------------------------------------------------------------------------
# Mutations of a zip: the strategy draws them as data, `mutated_zip` writes them
# ---------------------------------------------------------------------------------------------------------------

#: Names a member may be renamed to or added as: the kppo and SB3 members, folders, odd and non-ASCII names.
NAMES = st.one_of(
    st.sampled_from(
        [
            "config.yaml",
            "config.yml",
            "metadata.json",
            "weights",
            "weights/",
            "weights/ckpt.index",
            "weights/ckpt.data-00000-of-00001",
            "data",
            "policy.pth",
            "pytorch_variables.pth",
            "_stable_baselines3_version",
            "policy/data.pkl",
            "archive/data.pkl",
            "archive/data/0",
            "a/b/c",
            "config.yaml/x",
            ".",
            "x/..",
            "é.json",
            "nul\x00.json",
            "",
        ]
    ),
    st.text(max_size=12),
)
#: Where zip-slip names point: `k` levels up then a path (`up`), or an absolute path in the sentinel folder.
SLIPS = st.one_of(
    st.tuples(st.just("up"), st.integers(1, 4), st.sampled_from(["x", "sentinel/x", "sentinel/../x", "tmp/x"])),
    st.tuples(st.just("absolute"), st.just(0), st.sampled_from(["sentinel/x", "x"])),
    st.tuples(st.just("inner"), st.integers(1, 4), st.sampled_from(["x", "sentinel/x"])),
)
MEMBER = st.integers(0, 63)
OFFSET = st.one_of(st.integers(0, 2**31), st.integers(-400, -1))  # negative: from the end (the central directory)


def zip_mutations(contents: st.SearchStrategy, links: list[str]) -> st.SearchStrategy:
    """Mutations of a zip (`mutated_zip`): members replaced or added with `contents`, symlink members named `links`."""
    return st.one_of(
        st.tuples(st.just("truncate"), OFFSET),
        st.tuples(st.just("flip"), st.lists(st.tuples(OFFSET, st.integers(0, 7)), min_size=1, max_size=4)),
        st.tuples(st.just("rename"), MEMBER, NAMES),
        st.tuples(st.just("remove"), MEMBER),
        st.tuples(st.just("replace"), MEMBER, contents),
        st.tuples(st.just("add"), NAMES, contents),
        st.tuples(st.just("slip"), SLIPS, st.booleans()),
        st.tuples(st.just("symlink"), st.sampled_from(links), SLIPS),
        st.tuples(st.just("bomb"), MEMBER, st.sampled_from([BOMB_SIZE, 100, 0, (1 << 32) - 1, 2 << 30])),
    )


#: The zip target leaves the values inside metadata.json's `extra.sb3` alone: kppo.PPO.load passes them to the
#: constructor, whose refusals do not name the zip yet (kppo/sb3/ppo.py; see
#: `test_a_kppo_zip_whose_sb3_arguments_the_constructor_refuses_is_refused_naming_it`).
ZIP_CONTENTS = contents([p for p in FIELD_PATHS if p[:2] != ("extra", "sb3") or len(p) == 2])
ZIP_MUTATIONS = zip_mutations(ZIP_CONTENTS, ["link", "weights", "config.yaml"])


def slip_name(slip: tuple[str, int, str], sandbox: Sandbox) -> str:
    """A name that lands outside the extraction folder (`sandbox.tmp/kppo-agent-*/`)."""
    kind, levels, rest = slip
    if kind == "absolute":
        return str(sandbox.root / rest)
    if kind == "inner":
        return "weights/" + "../" * (levels + 1) + rest  # through a folder of the agent, then out
    return "../" * levels + rest


def mutated_zip(data: bytes, mutation: tuple, sandbox: Sandbox) -> bytes:
    """`data` (a zip) with `mutation` applied (see ZIP_MUTATIONS)."""
    kind = mutation[0]
    if kind == "truncate":
        return data[: mutation[1] % len(data)]
    if kind == "flip":
        out = bytearray(data)
        for offset, bit in mutation[1]:
            out[offset % len(out)] ^= 1 << bit
        return bytes(out)
    entries = [entry(name, content) for name, content in members(data)]
    i = mutation[1] % len(entries) if isinstance(mutation[1], int) else 0
    old = entries[i]
    if kind == "rename":
        entries[i] = old._replace(name=mutation[2])
    elif kind == "remove":
        del entries[i]
    elif kind == "replace":
        entries[i] = entry(old.name, new_content(mutation[2], dict(members(data))[old.name]))
    elif kind == "add":
        entries.append(entry(mutation[1], new_content(mutation[2], b"")))
    elif kind == "slip":
        name = slip_name(mutation[1], sandbox)
        entries.insert(0 if mutation[2] else len(entries), entry(name, b"slipped"))
    elif kind == "symlink":
        target = slip_name(mutation[2], sandbox).encode()
        entries.insert(0, entry(mutation[1], target, stat.S_IFLNK | 0o777))
        entries.append(entry(f"{mutation[1]}/x", b"through the link"))
    elif kind == "bomb":
        entries[i] = bomb(old.name, mutation[2])
    return pack(entries)


# ---------------------------------------------------------------------------------------------------------------
# The sandbox: nothing written outside the loader's temporary folder, nothing lost, nothing executed
# ---------------------------------------------------------------------------------------------------------------


class Executed(AssertionError):
    """A loader called something that runs code (or unpickles) on a file's behalf."""


#: Functions that run code or unpickle; each raises `Executed` while a loader runs (imports may still `exec`).
GUARDED = [
    (os, "system"),
    (os, "popen"),
    (os, "execv"),
    (os, "execve"),
    (os, "posix_spawn"),
    (subprocess, "Popen"),
    (builtins, "exec"),
    (builtins, "eval"),
    (pickle, "loads"),
    (pickle, "load"),
    (marshal, "loads"),
]


def _refuse(name: str, real: Callable) -> Callable:
    def call(*args: Any, **kwargs: Any) -> Any:
        if sys._getframe(1).f_globals.get("__name__", "").startswith("importlib"):
            return real(*args, **kwargs)  # an import of a module not imported yet: not the file's code
        CALLS.append(name)
        raise Executed(f"{name} was called while a file was loaded")

    return call


@contextlib.contextmanager
def nothing_runs():
    """Replaces the `GUARDED` functions while the block runs; fails if any (or the sentinel) was called, even when
    the loader caught what it raised."""
    del CALLS[:]
    saved = [(module, name, getattr(module, name)) for module, name in GUARDED]
    for module, name, real in saved:
        setattr(module, name, _refuse(f"{module.__name__}.{name}", real))
    try:
        yield
    finally:
        for module, name, real in saved:
            setattr(module, name, real)
    assert not CALLS, f"executed while loading: {CALLS}"


class Sandbox:
    """A folder for one module's examples: `inputs/` (each example's file or folder, under a fresh name), `tmp/`
    (where `tempfile` writes while a loader runs: the loader's own extraction folders, `kppo-agent-*`) and
    `sentinel/`, which must stay empty. Zip-slip names point at `sentinel/`, `tmp/` and the root."""

    def __init__(self, root: Path):
        self.root, self.inputs, self.tmp, self.sentinel = root, root / "inputs", root / "tmp", root / "sentinel"
        for folder in (self.inputs, self.tmp, self.sentinel):
            folder.mkdir(parents=True, exist_ok=True)
        self._names = itertools.count()

    def fresh(self, suffix: str = "") -> Path:
        """A new path under inputs/ (never reused: the zip cache keys on path, time and size)."""
        return self.inputs / f"in{next(self._names)}{suffix}"

    @contextlib.contextmanager
    def writes_nothing_outside(self, *inputs: Path):
        """Runs the block with `tempfile` writing under tmp/; then checks that sentinel/ is empty, the root and
        tmp/ hold nothing new but the loader's folders, and every input is as it was (nothing lost)."""
        before = [_contents(path) for path in inputs]
        saved, tempfile.tempdir = tempfile.tempdir, str(self.tmp)
        try:
            yield
        finally:
            tempfile.tempdir = saved
        assert not any(self.sentinel.iterdir()), f"written outside: {sorted(self.sentinel.rglob('*'))}"
        assert {p.name for p in self.root.iterdir()} == {"inputs", "tmp", "sentinel"}, sorted(self.root.iterdir())
        strays = [p for p in self.tmp.iterdir() if not (p.is_dir() and p.name.startswith("kppo-agent-"))]
        assert not strays, f"written outside the loader's folders: {strays}"
        for path, contents in zip(inputs, before):
            assert _contents(path) == contents, f"{path} was changed by loading it"


def _contents(path: Path) -> dict[str, bytes]:
    """Every file under `path` (or `path` itself) -> its bytes."""
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    return {str(file): file.read_bytes() for file in files}


def note(text: str) -> None:
    """Hypothesis' `event` (its statistics) inside a property test; nothing in a plain test."""
    if currently_in_test_context():
        event(text)


@contextlib.contextmanager
def bounded_memory(bounded: bool = True, limit: int = 64 << 20):
    """Fails (when `bounded`) if the block's Python allocations peak above `limit`: a bomb inflated in memory."""
    if not bounded:
        yield
        return
    tracemalloc.start()
    try:
        yield
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert peak < limit, f"the loader allocated {peak:,} bytes for a bomb"


def loads_or_refuses(load: Callable[[], Any], names: list[str], seconds: float = 20.0, bounded: bool = False) -> str:
    """Runs `load` under `nothing_runs` and `within(seconds)`: 'loaded', or 'refused' for a one-line ValueError
    naming one of `names`; any other exception fails the example. `bounded`: `bounded_memory` too."""
    try:
        with bounded_memory(bounded), within(seconds), nothing_runs():
            load()
    except ValueError as err:
        one_line(str(err), names)
        note(f"refused: {type(err).__name__}: {str(err).split(':')[0][:40]}")
        return "refused"
    note("loaded")
    return "loaded"


# ---------------------------------------------------------------------------------------------------------------
# The saved inputs, written once per module
# ---------------------------------------------------------------------------------------------------------------


class Built(NamedTuple):
    """A saved agent's config and spaces as `read_metadata` reads them, and an agent of them (built once)."""

    config: Any
    spaces: tuple  # (observation_space, action_space)
    agent: Any

    def restore(self, folder: Path) -> Any:
        """The saved statistics after restoring `folder`'s weights into `agent`: what `load_agent` does after
        building an agent for an unchanged config and spaces (equal to `agent`; building one costs ~50 ms, more
        than the rest of a load)."""
        from kppo.agent import checkpoint

        return checkpoint.restore(folder, self.agent, [4])

    def fits(self, config: Any, *spaces: Any) -> bool:
        return config == self.config and spaces == self.spaces


class Saved(NamedTuple):
    """The saved inputs of one module (shown short in Hypothesis' reports)."""

    zip: bytes  # kppo.PPO(...).save
    zip_agent: Built
    agent: dict[str, bytes]  # an agent directory, relative path -> bytes
    dir_agent: Built
    run: dict[str, bytes]  # a run directory (config.yaml, checkpoints/)
    checkpointer: Any  # the TrainingCheckpointer that wrote it (of the runner whose agent is `dir_agent.agent`)
    sandbox: Sandbox

    def __repr__(self) -> str:
        return "saved"


TINY = dict(num_envs=1, num_steps=8, num_hidden_units=4, total_timesteps=8, num_minibatches=1, num_epochs=1)


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def compact(config: Any) -> bytes:
    """`config` as YAML of the fields that differ from the defaults (what a user writes). kppo writes all ~90: a
    file whose parse in PyYAML's pure-Python loader (~15 ms) would be most of an example's cost, twice per load."""
    from kppo.config.options import Config

    defaults = Config().to_dict()
    return yaml.safe_dump({k: v for k, v in config.to_dict().items() if v != defaults[k]}, sort_keys=False).encode()


def _with_config(data: bytes, config: Any) -> bytes:
    """The zip `data` with its config.yaml `compact`."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, content in members(data):
            archive.writestr(name, compact(config) if name == "config.yaml" else content)
    return out.getvalue()


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> Saved:
    """A kppo zip, an agent directory and a run's checkpoints of one tiny CartPole agent, written by the functions
    `kppo.PPO.save` and `kppo train` use (`checkpoint.save`; `TrainingCheckpointer.save` of the runner that
    `kppo.train` builds, without the seconds a training run spends compiling); each config.yaml `compact`."""
    import kppo
    from kppo.agent import checkpoint
    from kppo.training.checkpointer import TrainingCheckpointer
    from kppo.training.runners import make_runner
    from kppo.training.agents import read_metadata

    work = tmp_path_factory.mktemp("saved")
    model = kppo.PPO("MlpPolicy", "CartPole-v1", n_steps=8, batch_size=8, n_epochs=1, policy_kwargs={"net_arch": [4]})
    model.save(work / "model.zip")
    config = kppo.Config(**TINY, jit_rollout=False, eval_freq=1, num_eval_envs=1)
    runner = make_runner(None, config)
    (work / "run").mkdir()
    config.to_yaml(work / "run" / "config.yaml")
    checkpointer = TrainingCheckpointer(work / "run" / "checkpoints", runner.agent, runner.state)
    checkpointer.save(runner.state, [], 1)
    stats = runner.view(runner.state).rollout
    spaces = (runner.observation_space, runner.action_space)
    checkpoint.save(work / "agent", config.to_yaml(), runner.agent, stats.obs_stats, stats.return_stats, *spaces)
    kppo.PPO.load(work / "model.zip")  # every module a load imports, imported before `nothing_runs` guards
    zip_config, _, *zip_spaces = read_metadata(work / "model.zip")
    return Saved(
        _with_config((work / "model.zip").read_bytes(), zip_config),
        Built(zip_config, tuple(zip_spaces), model.agent),
        {**_files(work / "agent"), "config.yaml": compact(config)},
        Built(config, spaces, runner.agent),
        {**_files(work / "run"), "config.yaml": compact(config)},
        checkpointer,
        Sandbox(tmp_path_factory.mktemp("sandbox")),
    )


# ---------------------------------------------------------------------------------------------------------------
# Target 1: a kppo .zip save, as kppo.PPO.load reads it
# ---------------------------------------------------------------------------------------------------------------


def check_zip(saved: Saved, mutation: tuple) -> None:
    """`kppo.PPO.load` of the zip with `mutation` loads, or refuses it in one line naming it. Its `load_agent`
    restores into the module's agent when the config and spaces read back unchanged (`quick_load_agent`)."""
    import kppo

    box = saved.sandbox
    path = box.fresh(".zip")
    path.write_bytes(mutated_zip(saved.zip, mutation, box))
    note(f"mutation: {mutation[0]}")
    with box.writes_nothing_outside(path), quick_load_agent(saved):
        loads_or_refuses(lambda: kppo.PPO.load(path), [path.name], bounded=mutation[0] == "bomb")


@contextlib.contextmanager
def quick_load_agent(saved: Saved):
    """`kppo.sb3.save_util.load_agent` replaced while the block runs by the same steps (`read_metadata`, an agent of the
    config, `restore`), the agent of an unchanged config and spaces being the module's (`Built.restore`)."""
    from kppo.sb3 import save_util as ppo
    from kppo.training.agents import SavedAgent, read_metadata

    real = ppo.load_agent

    def load_agent(path: Any, user_extractor: Any = None) -> SavedAgent:
        config, metadata, observation_space, action_space = read_metadata(path)
        if not saved.zip_agent.fits(config, observation_space, action_space):
            return real(path, user_extractor)
        stats = saved.zip_agent.restore(path)
        return SavedAgent(config, saved.zip_agent.agent, *stats, observation_space, action_space, metadata)

    ppo.load_agent = load_agent
    try:
        yield
    finally:
        ppo.load_agent = real


@fast()
@given(mutation=ZIP_MUTATIONS)
@example(mutation=("bomb", 0, BOMB_SIZE))
@example(mutation=("bomb", 2, 100))
@example(mutation=("slip", ("up", 2, "sentinel/x"), True))
@example(mutation=("slip", ("absolute", 0, "sentinel/x"), False))
@example(mutation=("symlink", "weights", ("up", 2, "sentinel")))
def test_a_kppo_zip_loads_or_is_refused_in_one_line(saved, mutation):
    check_zip(saved, mutation)


@pytest.mark.slow
@slow(3000)
@given(mutation=ZIP_MUTATIONS)
def test_a_kppo_zip_loads_or_is_refused_in_one_line_at_scale(saved, mutation):
    check_zip(saved, mutation)


# ---------------------------------------------------------------------------------------------------------------
# Target 2: an agent directory, as load_agent reads it
# ---------------------------------------------------------------------------------------------------------------


def file_mutations(file: st.SearchStrategy[int], content: st.SearchStrategy, bits: int = 8) -> st.SearchStrategy:
    """Mutations of one file of a folder (`write_files`; `file` picks it among the sorted names; flips among the
    low `bits` bits of a byte)."""
    flips = st.lists(st.tuples(OFFSET, st.integers(0, bits - 1)), min_size=1, max_size=4)
    return st.one_of(
        st.tuples(st.just("truncate"), file, OFFSET),
        st.tuples(st.just("flip"), file, flips),
        st.tuples(st.just("rename"), file, NAMES.filter(lambda n: "\x00" not in n)),
        st.tuples(st.just("remove"), file),
        st.tuples(st.just("replace"), file, content),
    )


FILE_MUTATIONS = file_mutations(st.integers(0, 63), CONTENTS)


def write_files(files: dict[str, bytes], mutation: tuple, folder: Path) -> None:
    """Writes `files` into `folder` with `mutation` applied to one of them (see FILE_MUTATIONS)."""
    files = dict(files)
    kind, name = mutation[0], sorted(files)[mutation[1] % len(files)]
    if kind == "truncate":
        files[name] = files[name][: mutation[2] % max(len(files[name]), 1)]
    elif kind == "flip":
        out = bytearray(files[name])
        for offset, bit in mutation[2] if out else ():
            out[offset % len(out)] ^= 1 << bit
        files[name] = bytes(out)
    elif kind == "rename":
        files[_plain_name(mutation[2], name)] = files.pop(name)
    elif kind == "remove":
        del files[name]
    elif kind == "replace":
        files[name] = new_content(mutation[2], files[name])
    folder.mkdir(parents=True)
    folder = folder.resolve()
    for relative, data in files.items():
        target = (folder / relative).resolve()
        if target.is_relative_to(folder) and target != folder and not target.is_dir():
            with contextlib.suppress(OSError):  # a name a folder cannot hold (a file where a folder is)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)


def _plain_name(name: str, old: str) -> str:
    """A file name the folder can hold in place of `old` (a rename onto nothing: a removal)."""
    name = name.strip("/")
    return name if name and name not in (".", "..") and len(name.encode()) < 200 else old + ".renamed"


def check_agent(saved: Saved, mutation: tuple) -> None:
    """`load_agent` of the directory with `mutation` loads, or refuses it in one line naming it (its folder or a
    file of it). A directory whose config and spaces read back unchanged restores into the module's agent (what
    `load_agent` does after building an agent of that config: the build, ~50 ms, is skipped)."""
    from kppo.training.agents import load_agent, read_metadata

    box = saved.sandbox
    folder = box.fresh()
    write_files(saved.agent, mutation, folder)
    note(f"mutation: {mutation[0]} {sorted(saved.agent)[mutation[1] % len(saved.agent)]}")

    def load() -> None:
        config, _, observation_space, action_space = read_metadata(folder)
        if saved.dir_agent.fits(config, observation_space, action_space):
            saved.dir_agent.restore(folder)
        else:
            load_agent(folder)

    names = [folder.name, "config.yaml", "metadata.json", "weights"]
    with box.writes_nothing_outside(folder):
        loads_or_refuses(load, names)


@fast()
@given(mutation=FILE_MUTATIONS)
def test_an_agent_directory_loads_or_is_refused_in_one_line(saved, mutation):
    check_agent(saved, mutation)


@pytest.mark.slow
@slow(2500)
@given(mutation=FILE_MUTATIONS)
def test_an_agent_directory_loads_or_is_refused_in_one_line_at_scale(saved, mutation):
    check_agent(saved, mutation)


# ---------------------------------------------------------------------------------------------------------------
# Target 3: a run's training checkpoints, as `kppo eval RUN_DIR` and `kppo train --resume RUN_DIR` read them
# ---------------------------------------------------------------------------------------------------------------

#: TensorFlow's checkpoint state file naming checkpoints elsewhere: other numbers, other folders, other files.
STATE_FILES = st.lists(
    st.sampled_from(["ckpt-1", "ckpt-0", "ckpt-2", "../checkpoints/ckpt-1", "../config.yaml", "", "ckpt-1.index"])
    | st.text(max_size=10),
    min_size=1,
    max_size=3,
).map(lambda paths: "".join(f'model_checkpoint_path: "{p}"\nall_model_checkpoint_paths: "{p}"\n' for p in paths))
#: A run's config.yaml is changed byte by byte only: `load_run_checkpoint` builds the runner of any config, whatever
#: its checkpoints hold (kppo/training/resume.py, not yet fixed: see the expected failure at the end), so an edit to
#: `num_hidden_units: 30000` would hang the example allocating gigabytes.
RUN_MUTATIONS = st.one_of(
    file_mutations(st.integers(0, 2), CONTENTS),  # sorted(run)[:3]: checkpoints/checkpoint, the data, the index
    st.tuples(st.just("replace"), st.just(0), STATE_FILES.map(str.encode)),
    file_mutations(st.just(3), contents([("env",)]).filter(lambda c: not isinstance(c, Edit))),  # config.yaml
)


def check_run(saved: Saved, mutation: tuple) -> None:
    """The run directory with `mutation` loads as `kppo eval` / `--resume` read it (`load_run_checkpoint`: a
    runner of its config, then `restore_newest`), or is refused in one line naming it. With config.yaml unchanged,
    `restore_newest` reads the folder through the module's TrainingCheckpointer (its checkpoint manager made for the
    folder as `TrainingCheckpointer.__init__` makes it: what `load_run_checkpoint` builds for an unchanged config,
    whose runner and 25 variables cost ~70 ms)."""
    from kppo.training import checkpointer
    from kppo.training.resume import load_run_checkpoint, restore_newest

    box = saved.sandbox
    folder = box.fresh()
    write_files(saved.run, mutation, folder)
    note(f"mutation: {mutation[0]} {sorted(saved.run)[mutation[1] % len(saved.run)]}")
    config = folder / "config.yaml"
    same_config = config.is_file() and config.read_bytes() == saved.run["config.yaml"]

    def load() -> None:
        if same_config and (folder / "checkpoints").is_dir():
            reader = saved.checkpointer
            reader.manager = checkpointer._manager(reader.checkpoint, folder / "checkpoints", 3)  # as __init__ does
            restore_newest(reader, "checkpoints", repr(str(config)))
        else:
            load_run_checkpoint(folder)

    with box.writes_nothing_outside(folder):
        loads_or_refuses(load, [folder.name, "config.yaml", "checkpoints"])


@pytest.mark.filterwarnings("ignore::DeprecationWarning:google.protobuf")  # its parser, on random state files
@fast()
@given(mutation=RUN_MUTATIONS)
def test_a_runs_checkpoints_load_or_are_refused_in_one_line(saved, mutation):
    check_run(saved, mutation)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::DeprecationWarning:google.protobuf")
@slow(2500)
@given(mutation=RUN_MUTATIONS)
def test_a_runs_checkpoints_load_or_are_refused_in_one_line_at_scale(saved, mutation):
    check_run(saved, mutation)


# ---------------------------------------------------------------------------------------------------------------
# What Hypothesis found (each a crash or a message that named no file before the fix), kept as plain tests
# ---------------------------------------------------------------------------------------------------------------


def _at(data: bytes, name: str) -> int:
    """The index of the member `name` in the zip `data`."""
    return [n for n, _ in members(data)].index(name)


def _refused(saved: Saved, data: bytes) -> str:
    """The one-line refusal of `kppo.PPO.load` for the zip `data` (fails when it loads or fails otherwise)."""
    import kppo

    box = saved.sandbox
    path = box.fresh(".zip")
    path.write_bytes(data)
    with box.writes_nothing_outside(path), quick_load_agent(saved), within(20), nothing_runs():
        with pytest.raises(ValueError) as err:
            kppo.PPO.load(path)
    one_line(str(err.value), [path.name])
    return str(err.value)


@pytest.mark.parametrize(
    "mutation",
    [("add", "", b""), ("rename", 0, "")],
    ids=["added", "renamed"],
)
def test_a_member_without_a_name_is_refused(saved, mutation):
    """Found: a member named '' crashed the extraction (IndexError in zipfile's `ZipInfo.is_dir`)."""
    assert "without a name" in _refused(saved, mutated_zip(saved.zip, mutation, saved.sandbox))


@pytest.mark.parametrize("name", ["config.yaml/x", ".", "x/.."])
def test_a_member_where_a_folder_or_file_is_is_refused(saved, name):
    """Found: a member under another member's file ('config.yaml/x': FileExistsError) or naming the extraction
    folder itself ('.': IsADirectoryError) crashed the extraction with an OSError and its traceback."""
    assert "cannot be unpacked" in _refused(saved, mutated_zip(saved.zip, ("add", name, b"x"), saved.sandbox))


@pytest.mark.parametrize("declared", [(1 << 32) - 1, BOMB_SIZE, 100], ids=["4GiB", "3GiB", "lying"])
def test_a_decompression_bomb_is_refused_before_it_is_written(saved, declared):
    """Found: a member declaring 4 GiB was written out whole (the example hung past its 20 s); the loader now
    refuses a declared size over `MAX_UNPACKED_BYTES` before writing, and a header that lies is caught by the
    CRC after at most the declared bytes (checked by memory and time)."""
    data = mutated_zip(saved.zip, ("bomb", _at(saved.zip, "config.yaml"), declared), saved.sandbox)
    with bounded_memory():
        message = _refused(saved, data)
    assert "config.yaml" in message


def test_a_broken_deflate_stream_is_refused(saved):
    """Found: a flipped bit in a member's deflate data crashed the extraction with zlib.error (not a ValueError),
    which zipfile lets through. Here the first block's type is set to 3, reserved."""
    data = bytearray(saved.zip)
    with zipfile.ZipFile(io.BytesIO(saved.zip)) as archive:
        info = archive.getinfo("metadata.json")
    start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
    data[start] |= 0b110
    assert "metadata.json" in _refused(saved, bytes(data))


def test_a_zip_version_zipfile_does_not_implement_is_refused(saved):
    """Found: a flipped bit in a central directory entry's 'version needed' crashed `kppo.PPO.load` with zipfile's
    NotImplementedError ('zip file version 8.4') from `is_sb3_save`."""
    data = bytearray(saved.zip)
    entry_at = data.index(b"PK\x01\x02")
    data[entry_at + 6 : entry_at + 8] = struct.pack("<H", 84)
    assert "8.4" in _refused(saved, bytes(data))


def test_refusals_name_the_zip_not_the_folder_it_was_unpacked_into(saved):
    """Found: for a zip without config.yaml (and for every later check of its files), the message named the
    temporary folder the zip was unpacked into, which the user never saw, instead of the zip."""
    message = _refused(saved, mutated_zip(saved.zip, ("remove", _at(saved.zip, "config.yaml")), saved.sandbox))
    assert "kppo-agent-" not in message


@pytest.mark.parametrize(
    "mutation",
    [
        ("flip", 1, [(-273, 7)]),  # metadata.json: a byte that is not UTF-8
        ("replace", 1, b"[]\n"),
        ("replace", 1, b"true"),
        ("replace", 1, Edit(("action_space",), None, remove=True)),
        ("replace", 1, Edit(("observation_space", "shape"), [7])),
        ("replace", 1, Edit(("observation_space",), {"type": "Dict", "spaces": []})),
        ("replace", 1, b"[" * 50_000),
        ("replace", 1, Edit(("extra",), [])),
    ],
    ids=["not-utf8", "a-list", "true", "no-action-space", "bad-shape", "bad-dict", "nested", "extra-list"],
)
def test_a_broken_metadata_json_is_refused_naming_it(saved, mutation):
    """Found (the first four): metadata.json that is not UTF-8 was refused by a UnicodeDecodeError naming no file;
    one that is a JSON list or `true` crashed with AttributeError, one without `action_space` with KeyError. The
    rest, written with the fix: a space gymnasium cannot build, arrays nested past Python's stack, an `extra` that
    is not an object."""
    from kppo.training.agents import load_agent

    folder = saved.sandbox.fresh()
    write_files(saved.agent, mutation, folder)
    with within(20), nothing_runs(), pytest.raises(ValueError) as err:
        load_agent(folder)
    one_line(str(err.value), [folder.name])
    assert "metadata.json" in str(err.value)


@pytest.mark.parametrize(
    "field, value",
    # 2**20: the largest width Config takes (2**40 is now refused as a field bound); 2 x 2**20 x 2**20 weights are not
    [("num_hidden_units", 2**20), ("actor_hidden_units", [100_000, 100_000]), ("lstm_hidden_size", 10**6)],
)
def test_a_config_whose_networks_the_weights_cannot_hold_is_refused_before_building(saved, field, value):
    """Written with the fix, not found by Hypothesis (the edit is rare among its draws): config.yaml changed to
    `num_hidden_units: 2**40` made `load_agent` ask TensorFlow for a [4, 2**40] kernel, a ResourceExhaustedError
    after 10 s (smaller widths: gigabytes allocated, the example hung). It is refused before any network is built."""
    from kppo.training.agents import load_agent

    folder = saved.sandbox.fresh()
    extra = {"recurrent": "lstm"} if field == "lstm_hidden_size" else {}
    config = {**yaml.safe_load(saved.agent["config.yaml"]), field: value, **extra}
    write_files(saved.agent, ("replace", 0, yaml.safe_dump(config).encode()), folder)
    with within(5), nothing_runs(), pytest.raises(ValueError) as err:
        load_agent(folder)
    one_line(str(err.value), [folder.name])
    assert "weights" in str(err.value)


# ---------------------------------------------------------------------------------------------------------------
# Found in files that are not this task's: fixed there since, or expected failures (strict) until they are
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("sb3_arguments", [{}, False, None], ids=["empty", "false", "none"])
def test_a_kppo_zip_with_broken_sb3_arguments_is_refused_in_one_line(saved, sb3_arguments):
    """Found: `extra.sb3` = {} crashed `kppo.PPO.load` with KeyError 'policy_kwargs', `false` with TypeError, and
    `null` was refused naming the temporary folder instead of the zip."""
    edit = Edit(("extra", "sb3"), sb3_arguments)
    _refused(saved, mutated_zip(saved.zip, ("replace", _at(saved.zip, "metadata.json"), edit), saved.sandbox))


@pytest.mark.parametrize("key, value", [("policy", True), ("learning_rate", "x")])
def test_a_kppo_zip_whose_sb3_arguments_the_constructor_refuses_is_refused_naming_it(saved, key, value):
    """Found: `extra.sb3.policy` = true in a kppo zip was refused with "policy: expected one of ('MlpPolicy',
    'CnnPolicy', 'MultiInputPolicy'), got True", which names the field but not the file it came from."""
    edit = Edit(("extra", "sb3", key), value)
    _refused(saved, mutated_zip(saved.zip, ("replace", _at(saved.zip, "metadata.json"), edit), saved.sandbox))


def test_a_runs_checkpoint_state_file_that_is_not_text_is_refused_naming_it(saved):
    """Found: checkpoints/checkpoint replaced by b'\\x80' made `kppo eval RUN_DIR` fail with "'utf-8' codec can't
    decode byte 0x80 in position 0: invalid start byte", naming no file."""
    from kppo.training.resume import load_run_checkpoint

    folder = saved.sandbox.fresh()
    write_files(saved.run, ("replace", 0, b"\x80"), folder)
    with within(20), nothing_runs(), pytest.raises(ValueError) as err:
        load_run_checkpoint(folder)
    one_line(str(err.value), [folder.name, "checkpoint"])


@pytest.mark.parametrize("units", [2**20, 30000])
def test_a_run_config_whose_networks_the_checkpoints_cannot_hold_is_refused_before_building(saved, units):
    """Found: a run's config.yaml changed to `num_hidden_units: 1048576` made `load_run_checkpoint` allocate a
    [2**20, 2**20] kernel (ResourceExhaustedError after TensorFlow's 10 s of retries); 30000 hung the example for
    40 s. The widths are now checked against the checkpoints' index files before anything is built."""
    from kppo.training.resume import load_run_checkpoint

    folder = saved.sandbox.fresh()
    config = {**yaml.safe_load(saved.run["config.yaml"]), "num_hidden_units": units}
    write_files(saved.run, ("replace", 3, yaml.safe_dump(config).encode()), folder)
    with within(10), nothing_runs(), pytest.raises(ValueError) as err:
        load_run_checkpoint(folder)
    one_line(str(err.value), [folder.name, "config.yaml", "checkpoints", f"num_hidden_units={units}"])
