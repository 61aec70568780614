"""Property-based tests (Hypothesis) of kppo's readers of Stable-Baselines3's own zips (the real recorded saves of
tests/fixtures/sb3/saved), on damaged and hostile input: the whole zip through `kppo.PPO.load` (and
`RecurrentPPO` / `MaskablePPO`), its `data` JSON's fields and serialized entries (`kppo.sb3.saves.sb3_save`,
`kppo.sb3.saves.from_sb3`), `policy.pth` (`kppo.sb3.saves.torch_zip`) and any pickle (`kppo.sb3.saves.safe_pickle`).

Mutations as in tests/agent/test_archive_properties.py (truncation, flipped bits, members renamed, removed or
replaced, zip-slip names, symlinks, decompression bombs), plus pickles: real ones (values, numpy arrays, SB3's
spaces, torch's data.pkl) cut, flipped, spliced with a GLOBAL + REDUCE calling a sentinel, nested past any depth or
holding themselves. The contract: each loads, or is refused in one line (a ValueError) naming the file; nothing is
executed; nothing is written outside the loader's temporary folder; a bomb costs a few MB at most."""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import io
import json
import pickle
import zipfile
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tests.agent.test_archive_properties import (
    BOMB_SIZE,
    FIELD_VALUES,
    JSON_VALUES,
    SENTINEL_PICKLES,
    SERIALIZED,
    Edit,
    Sandbox,
    bounded_memory,
    contents,
    edited,
    entry,
    loads_or_refuses,
    members,
    mutated_zip,
    note,
    nothing_runs,
    pack,
    zip_mutations,
)
from tests.helpers.fuzz import fast, one_line, slow, within

SAVED = Path(__file__).resolve().parents[1] / "fixtures" / "sb3" / "saved"
#: The recorded saves read here and the kppo class whose `load` reads each (A2C's is refused by all).
FIXTURES = {
    "cartpole": "PPO",
    "multidiscrete": "PPO",
    "pendulum_vecnorm": "PPO",
    "lstm": "RecurrentPPO",
    "maskable": "MaskablePPO",
    "a2c": "PPO",
}
CLASSES = ["PPO", "RecurrentPPO", "MaskablePPO"]
#: The entries of SB3's `data` JSON worth changing, serialized ones included.
DATA_PATHS = [
    ("n_steps",),
    ("n_envs",),
    ("batch_size",),
    ("n_epochs",),
    ("gamma",),
    ("gae_lambda",),
    ("ent_coef",),
    ("vf_coef",),
    ("max_grad_norm",),
    ("target_kl",),
    ("normalize_advantage",),
    ("use_sde",),
    ("sde_sample_freq",),
    ("seed",),
    ("num_timesteps",),
    ("_stats_window_size",),
    ("learning_rate",),
    ("clip_range_vf",),
    ("policy_kwargs",),
    ("policy_kwargs", "net_arch"),
    ("policy_kwargs", "ortho_init"),
    ("policy_kwargs", "log_std_init"),
    ("policy_kwargs", "lstm_hidden_size"),
    ("policy_class",),
    ("policy_class", ":serialized:"),
    ("observation_space",),
    ("observation_space", ":serialized:"),
    ("action_space",),
    ("action_space", ":serialized:"),
    ("clip_range",),
    ("clip_range", "value_schedule"),
    ("lr_schedule", "value_schedule"),
]
SERIALIZED_KEYS = ["observation_space", "action_space", "policy_class", "clip_range", "lr_schedule", "policy_kwargs"]


ZIPS = {name: (SAVED / f"{name}.zip").read_bytes() for name in FIXTURES}
POLICY = dict(members(ZIPS["cartpole"]))["policy.pth"]  # torch's zip


def _pickles(zips: dict[str, bytes]) -> list[bytes]:
    """Every pickle the saves hold: the serialized entries of `data`, torch's data.pkl."""
    found = []
    for data in zips.values():
        files = dict(members(data))
        for value in json.loads(files["data"]).values():
            if isinstance(value, dict) and ":serialized:" in value:
                found.append(base64.b64decode(value[":serialized:"]))
        found.append(dict(members(files["policy.pth"]))["archive/data.pkl"])
    return found


SAVED_PICKLES = _pickles(ZIPS)


class SB3(NamedTuple):
    """The agents built for the recorded saves and the module's sandbox (shown short in reports)."""

    agents: list  # [(config, observation_space, action_space, agent)] built by the warm-up loads
    sandbox: Sandbox

    def __repr__(self) -> str:
        return "sb3"


#: `AgentSpec` fields that SB3's weights replace (the initial weights' seed, the learning rate the load assigns):
#: agents built for specs that differ only in these are alike.
NOT_NETWORK = {"seed", "learning_rate"}


def _network(spec: Any) -> dict:
    return {k: v for k, v in dataclasses.asdict(spec).items() if k not in NOT_NETWORK}


@contextlib.contextmanager
def built_once(sb3: SB3 | None, agents: list):
    """`kppo.sb3.saves.from_sb3.build_agent` replaced while the block runs: the agent for spaces and a config equal to
    those of one built before (but for `NOT_NETWORK`) is that agent (SB3's weights are assigned into it, all of
    them, as into a new one; building one costs ~50 ms, more than the rest of a load); others are built, and
    recorded when `sb3` is None (the warm-up)."""
    from kppo.sb3.saves import from_sb3

    real = from_sb3.build_agent

    def build_agent(spec: Any, observation_space: Any, action_space: Any, **kwargs: Any) -> Any:
        for known in agents:
            if known[:3] == (_network(spec), observation_space, action_space):
                return known[3]
        agent = real(spec, observation_space, action_space, **kwargs)
        if sb3 is None:
            agents.append((_network(spec), observation_space, action_space, agent))
        return agent

    from_sb3.build_agent = build_agent
    try:
        yield
    finally:
        from_sb3.build_agent = real


@pytest.fixture(scope="module")
def sb3(tmp_path_factory) -> SB3:
    """The recorded saves, each loaded once (its agent kept for `built_once`; every module a load imports imported
    before `nothing_runs` guards)."""
    import kppo

    agents: list = []
    with built_once(None, agents):
        for name, cls in FIXTURES.items():
            with contextlib.suppress(ValueError):  # A2C's: refused
                getattr(kppo, cls).load(SAVED / f"{name}.zip")
    return SB3(agents, Sandbox(tmp_path_factory.mktemp("sandbox")))


def _load(sb3: SB3, cls: str, path: Path, bounded: bool) -> str:
    """`loads_or_refuses` of `cls.load(path)`: 'loaded' or 'refused'."""
    import kppo

    with sb3.sandbox.writes_nothing_outside(path), built_once(sb3, sb3.agents):
        return loads_or_refuses(lambda: getattr(kppo, cls).load(path), [path.name], bounded=bounded)


# ---------------------------------------------------------------------------------------------------------------
# Target 1: an SB3 zip, mutated as a zip, through kppo.PPO.load (RecurrentPPO.load, MaskablePPO.load)
# ---------------------------------------------------------------------------------------------------------------

SB3_ZIP_MUTATIONS = zip_mutations(contents(DATA_PATHS), ["link", "data", "policy.pth"])


def check_sb3_zip(sb3: SB3, name: str, cls: str, mutation: tuple) -> None:
    """`cls.load` of the save `name` with `mutation` loads, or refuses it in one line naming it."""
    path = sb3.sandbox.fresh(".zip")
    path.write_bytes(mutated_zip(ZIPS[name], mutation, sb3.sandbox))
    note(f"mutation: {mutation[0]}")
    _load(sb3, cls, path, bounded=mutation[0] == "bomb")


@fast()
@given(name=st.sampled_from(sorted(FIXTURES)), cls=st.sampled_from(CLASSES), mutation=SB3_ZIP_MUTATIONS)
@example(name="cartpole", cls="PPO", mutation=("bomb", 1, BOMB_SIZE))
@example(name="cartpole", cls="PPO", mutation=("bomb", 1, 100))
@example(name="lstm", cls="RecurrentPPO", mutation=("bomb", 3, 100))
@example(name="cartpole", cls="PPO", mutation=("slip", ("absolute", 0, "sentinel/x"), True))
def test_an_sb3_zip_loads_or_is_refused_in_one_line(sb3, name, cls, mutation):
    check_sb3_zip(sb3, name, cls, mutation)


@pytest.mark.slow
@slow(2500)
@given(name=st.sampled_from(sorted(FIXTURES)), cls=st.sampled_from(CLASSES), mutation=SB3_ZIP_MUTATIONS)
def test_an_sb3_zip_loads_or_is_refused_in_one_line_at_scale(sb3, name, cls, mutation):
    check_sb3_zip(sb3, name, cls, mutation)


# ---------------------------------------------------------------------------------------------------------------
# Target 2: any pickle, through safe_pickle.read_pickle
# ---------------------------------------------------------------------------------------------------------------

#: Values pickle writes with the opcodes kppo reads (and with the ones it refuses: protocols 0 and 1).
VALUES = st.one_of(
    JSON_VALUES,
    st.tuples(st.integers(), st.binary(max_size=8)),
    st.frozensets(st.integers(-3, 3), max_size=3),
    st.sets(st.text(max_size=2), max_size=3),
    hnp.arrays(
        st.sampled_from([np.float32, np.float64, np.int64, np.uint8, np.bool_]),
        hnp.array_shapes(min_dims=0, max_dims=3, max_side=3),
    ),
)
#: Hand-written opcodes: nested past any depth, a list holding itself, memo entries read before they are stored.
HANDMADE = st.one_of(
    st.integers(1, 20_000).map(lambda n: b"\x80\x02" + b"]" * n + b"a" * (n - 1) + b"."),
    st.integers(1, 20_000).map(lambda n: b"\x80\x02)" + b"\x85" * n + b"."),
    st.just(b"\x80\x02]q\x00h\x00a."),  # L = []; L.append(L)
    st.just(b"\x80\x02}q\x00K\x01h\x00s."),  # D = {}; D[1] = D
    st.just(b"\x80\x02h\x05."),
    st.just(b"\x80\x04\x95\x00\x00\x00\x00\x00\x00\x00\x00."),
)


def pickle_mutations(bases: st.SearchStrategy[bytes]) -> st.SearchStrategy[bytes]:
    """`bases` as they are, or cut, with bits flipped, a slice removed or repeated, or the sentinel's GLOBAL +
    REDUCE spliced in at a random place."""

    def mutate(data: bytes, kind: str, at: int, span: int, bit: int, splice: bytes) -> bytes:
        if not data or kind == "keep":
            return data
        at %= len(data)
        if kind == "truncate":
            return data[:at]
        if kind == "flip":
            return data[:at] + bytes([data[at] ^ (1 << bit)]) + data[at + 1 :]
        if kind == "cut":
            return data[:at] + data[at + span :]
        if kind == "repeat":
            return data[: at + span] + data[at : at + span] + data[at + span :]
        return data[:at] + splice[2:-1] + data[at:]  # the sentinel's opcodes, without PROTO and STOP

    return st.builds(
        mutate,
        bases,
        st.sampled_from(["keep", "truncate", "flip", "cut", "repeat", "splice"]),
        st.integers(0, 2**31),
        st.integers(1, 64),
        st.integers(0, 7),
        st.sampled_from(SENTINEL_PICKLES),
    )


def check_pickle(names: dict, data: bytes) -> str:
    """`read_pickle` of `data` gives a value ('read'), or refuses it in one line naming the file (`x.pkl`:
    'refused'); it never calls what the pickle names."""
    from kppo.sb3.saves.safe_pickle import read_pickle

    try:
        with within(10), nothing_runs():
            read_pickle(data, "x.pkl", names)
    except ValueError as err:
        one_line(str(err), ["x.pkl"])
        note(f"refused: {type(err).__name__}")
        return "refused"
    note("read")
    return "read"


def _names() -> dict:
    from kppo.sb3.saves.safe_pickle import ORDERED_DICT
    from kppo.sb3.saves.sb3_save import SPACE_NAMES

    return {**SPACE_NAMES, **ORDERED_DICT}


PICKLES = pickle_mutations(
    st.one_of(
        st.builds(lambda v, p: pickle.dumps(v, protocol=p), VALUES, st.integers(0, 5)),
        st.sampled_from(SAVED_PICKLES),
        HANDMADE,
        st.binary(max_size=40),
    )
)


@fast()
@given(data=PICKLES)
@example(data=b"\x80\x02]q\x00h\x00a.")  # a list holding itself
@example(data=b"\x80\x02" + b"]" * 5000 + b"a" * 4999 + b".")  # 5,000 nested lists
def test_a_pickle_is_read_as_data_or_refused_in_one_line(data):
    check_pickle(_names(), data)


@pytest.mark.slow
@slow(3000)
@given(data=PICKLES)
def test_a_pickle_is_read_as_data_or_refused_in_one_line_at_scale(data):
    check_pickle(_names(), data)


# ---------------------------------------------------------------------------------------------------------------
# Target 3: policy.pth (torch's zip), through torch_zip.read_state_dict
# ---------------------------------------------------------------------------------------------------------------


def check_state_dict(sandbox: Sandbox, mutation: tuple | bytes) -> str:
    """`read_state_dict` of policy.pth with `mutation` (a zip mutation, or new bytes for its data.pkl) gives a
    state_dict ('read'), or refuses it in one line naming the file ('refused')."""
    from kppo.sb3.saves.torch_zip import read_state_dict

    if isinstance(mutation, bytes):
        note("mutation: data.pkl")
        data = pack([entry(n, mutation if n.endswith("data.pkl") else c) for n, c in members(POLICY)])
    else:
        note(f"mutation: {mutation[0]}")
        data = mutated_zip(POLICY, mutation, sandbox)
    try:
        with bounded_memory(isinstance(mutation, tuple) and mutation[0] == "bomb"), within(10), nothing_runs():
            read_state_dict(data, "policy.pth")
    except ValueError as err:
        one_line(str(err), ["policy.pth"])
        note(f"refused: {type(err).__name__}")
        return "refused"
    note("read")
    return "read"


STATE_DICT_MUTATIONS = st.one_of(
    zip_mutations(contents([("x",)]), ["archive/data", "archive/data/0"]),
    st.tuples(
        st.just("rename"),
        st.integers(0, 63),
        st.sampled_from(["archive/data.pkl", "archive/data/0", "archive/byteorder", "archive/version"]),
    ),
    pickle_mutations(st.just(dict(members(POLICY))["archive/data.pkl"])),
)


@fast()
@given(mutation=STATE_DICT_MUTATIONS)
@example(mutation=("bomb", 4, 100))  # archive/data/0, its header lying
@example(mutation=("bomb", 0, BOMB_SIZE))  # archive/data.pkl, its header true
def test_policy_pth_is_read_as_a_state_dict_or_refused_in_one_line(sb3, mutation):
    check_state_dict(sb3.sandbox, mutation)


@pytest.mark.slow
@slow(3000)
@given(mutation=STATE_DICT_MUTATIONS)
def test_policy_pth_is_read_as_a_state_dict_or_refused_in_one_line_at_scale(sb3, mutation):
    check_state_dict(sb3.sandbox, mutation)


# ---------------------------------------------------------------------------------------------------------------
# Target 4: the fields of SB3's `data` JSON, through the whole load
# ---------------------------------------------------------------------------------------------------------------


class Reserialized(NamedTuple):
    """A serialized entry of `data` (its base64 cloudpickle) with its pickle bytes mutated."""

    key: str
    pickle: Any  # a strategy's draw: a function of the entry's bytes


DATA_EDITS = st.lists(
    st.one_of(
        st.builds(Edit, st.sampled_from(DATA_PATHS), st.one_of(FIELD_VALUES, SERIALIZED), st.booleans()),
        st.builds(
            Reserialized,
            st.sampled_from(SERIALIZED_KEYS),
            st.tuples(st.sampled_from(["truncate", "flip", "splice"]), st.integers(0, 2**31), st.integers(0, 7)),
        ),
    ),
    min_size=1,
    max_size=3,
)


def _reserialized(data: dict, change: Reserialized) -> None:
    entry_ = data.get(change.key)
    if not (isinstance(entry_, dict) and isinstance(entry_.get(":serialized:"), str)):
        return
    try:
        raw = base64.b64decode(entry_[":serialized:"])
    except ValueError:  # an earlier Edit left no base64 there: that entry is the case
        return
    kind, at, bit = change.pickle
    at %= max(len(raw), 1)
    if kind == "truncate":
        raw = raw[:at]
    elif kind == "flip" and raw:
        raw = raw[:at] + bytes([raw[at] ^ (1 << bit)]) + raw[at + 1 :]
    else:
        raw = raw[:at] + SENTINEL_PICKLES[bit % 2][2:-1] + raw[at:]
    entry_[":serialized:"] = base64.b64encode(raw).decode()


def with_data(zip_bytes: bytes, changes: list) -> bytes:
    """The save with its `data` JSON changed by `changes` (Edits and Reserialized entries)."""
    files = dict(members(zip_bytes))
    text = files["data"]
    for change in changes:
        if isinstance(change, Edit):
            text = edited(text, change)
        else:
            data = json.loads(text)
            _reserialized(data, change)
            text = json.dumps(data).encode()
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, content in files.items():
            archive.writestr(name, text if name == "data" else content)
    return out.getvalue()


def check_sb3_data(sb3: SB3, name: str, changes: list) -> None:
    """The save `name` with its `data` fields changed loads with its own class, or is refused in one line naming
    it."""
    path = sb3.sandbox.fresh(".zip")
    path.write_bytes(with_data(ZIPS[name], changes))
    for change in changes:
        note(f"changed: {change.key if isinstance(change, Reserialized) else '.'.join(change.path)}")
    _load(sb3, FIXTURES[name], path, bounded=False)


@fast()
@given(name=st.sampled_from(sorted(FIXTURES)), changes=DATA_EDITS)
@example(  # found: the mutation helper itself failed on a Reserialized change after an Edit that left no base64
    name="a2c",
    changes=[Edit(("action_space", ":serialized:"), "\x80", False), Reserialized("action_space", ("truncate", 0, 0))],
)
@example(name="pendulum_vecnorm", changes=[Reserialized("policy_kwargs", ("flip", 39399409, 0))])  # found: a tuple
# holding a list as a dict key (unhashable) raised a TypeError instead of the one-line refusal
def test_an_sb3_saves_data_loads_or_is_refused_in_one_line(sb3, name, changes):
    check_sb3_data(sb3, name, changes)


@pytest.mark.slow
@slow(2500)
@given(name=st.sampled_from(sorted(FIXTURES)), changes=DATA_EDITS)
def test_an_sb3_saves_data_loads_or_is_refused_in_one_line_at_scale(sb3, name, changes):
    check_sb3_data(sb3, name, changes)


# ---------------------------------------------------------------------------------------------------------------
# What Hypothesis found (each a crash, a hang or a message that named no file before the fix), kept as plain tests
# ---------------------------------------------------------------------------------------------------------------


def _at(data: bytes, name: str) -> int:
    return [n for n, _ in members(data)].index(name)


@pytest.mark.parametrize(
    "name, changes, says",
    [
        ("cartpole", [Edit(("n_steps",), None)], "data['n_steps']"),
        ("pendulum_vecnorm", [Edit(("sde_sample_freq",), None)], "data['sde_sample_freq']"),
        ("lstm", [Edit(("n_steps",), [1886, 3549, 369])], "data['n_steps']"),
        ("cartpole", [Edit(("n_envs",), "")], "data['n_envs']"),
        ("pendulum_vecnorm", [Edit(("gae_lambda",), False)], "data['gae_lambda']"),
        ("cartpole", [Edit(("use_sde",), "Dict")], "data['use_sde']"),
        ("lstm", [Edit(("policy_kwargs", "net_arch"), "linear")], "policy_kwargs.net_arch"),
        ("pendulum_vecnorm", [Edit(("learning_rate",), -1.2e16)], "learning_rate"),
    ],
    ids=[
        "n_steps-null",
        "sde_sample_freq-null",
        "n_steps-list",
        "n_envs-text",
        "gae-false",
        "sde-text",
        "net-arch",
        "lr",
    ],
)
def test_saved_fields_kppo_cannot_take_are_refused_naming_the_file(sb3, name, changes, says):
    """Found: SB3 `data` fields of the wrong type crashed `PPO.load` in kppo's constructor (TypeError: `None * int`,
    `int(None)`, `list <= int`) or in `int(n_envs)` (ValueError "invalid literal for int()" naming nothing); the
    constructor's own refusals (`gae_lambda: expected a finite number, got False`) named the field but not the
    file. Each is now a one-line ValueError naming the zip."""
    import kppo

    path = sb3.sandbox.fresh(".zip")
    path.write_bytes(with_data(ZIPS[name], changes))
    with built_once(sb3, sb3.agents), within(20), nothing_runs(), pytest.raises(ValueError) as err:
        getattr(kppo, FIXTURES[name]).load(path)
    one_line(str(err.value), [path.name])
    assert says in str(err.value)


@pytest.mark.parametrize(
    "changes",
    [
        [Edit(("policy_kwargs", "net_arch"), [10**6, 10**6])],
        [Edit(("policy_kwargs", "lstm_hidden_size"), 10**5)],
    ],
    ids=["net_arch", "lstm"],
)
def test_policy_kwargs_asking_for_more_weights_than_saved_are_refused_before_building(sb3, changes):
    """Written with the fix (Hypothesis' net_arch draws stay under 10**6 wide): `net_arch: [10**6, 10**6]` made
    `RecurrentPPO.load` build a 10**12-weight network (gigabytes, then TensorFlow's ResourceExhaustedError). The
    state_dict holds every weight kppo builds, so a larger network is refused before it is built."""
    import kppo

    path = sb3.sandbox.fresh(".zip")
    path.write_bytes(with_data(ZIPS["lstm"], changes))
    with within(10), nothing_runs(), pytest.raises(ValueError) as err:
        kppo.RecurrentPPO.load(path)
    one_line(str(err.value), [path.name])
    assert "state_dict" in str(err.value)


def test_a_sentinel_call_in_a_serialized_entry_is_refused_naming_the_file(sb3):
    """Found: the sentinel's GLOBAL + REDUCE spliced into `data['policy_class']` was refused (nothing called) with
    'calls tests.agent.test_archive_properties.sentinel', naming no file: a builder's refusal left the pickle reader
    without its source."""
    path = sb3.sandbox.fresh(".zip")
    path.write_bytes(with_data(ZIPS["multidiscrete"], [Reserialized("policy_class", ("splice", 279, 2))]))
    assert _load(sb3, "PPO", path, bounded=False) == "refused"


@pytest.mark.parametrize("member, declared", [("data", 0), ("data", BOMB_SIZE), ("policy.pth", 100)])
def test_a_bomb_in_an_sb3_zip_is_refused_within_a_few_megabytes(sb3, member, declared):
    """Found: a deflate bomb as `data` or `policy.pth` was inflated in memory by `ZipFile.read` (2 to 4 GB traced
    before the CRC or the JSON failed); it is now refused by its declared size, or after the bytes it declares."""
    path = sb3.sandbox.fresh(".zip")
    data = ZIPS["cartpole"]
    path.write_bytes(mutated_zip(data, ("bomb", _at(data, member), declared), sb3.sandbox))
    assert _load(sb3, "PPO", path, bounded=True) == "refused"


def test_a_data_json_nested_past_the_stack_is_refused(sb3):
    """Found: `data` replaced by 50,000 '[' crashed `PPO.load` with json's RecursionError."""
    path = sb3.sandbox.fresh(".zip")
    data = ZIPS["multidiscrete"]
    path.write_bytes(mutated_zip(data, ("replace", _at(data, "data"), b"[" * 50_000), sb3.sandbox))
    assert _load(sb3, "RecurrentPPO", path, bounded=False) == "refused"


def test_a_deflated_member_in_policy_pth_is_refused_unread(sb3):
    """Found: a deflate bomb as policy.pth's `archive/data/0` (its header saying 100 bytes) hung `read_state_dict`
    past 10 s inflating a gigabyte; torch writes stored members, so a compressed one is refused unread."""
    assert check_state_dict(sb3.sandbox, ("bomb", _at(POLICY, "archive/data/0"), 100)) == "refused"


@pytest.mark.parametrize(
    "data, outcome",
    [
        (b"\x80\x02}q\x00K\x01h\x00s.", "read"),
        (b"\x80\x02]q\x00h\x00a.", "read"),
        (b"\x80\x02" + b"]" * 5000 + b"a" * 4999 + b".", "refused"),
    ],
    ids=["dict-holding-itself", "list-holding-itself", "5000-deep"],
)
def test_a_pickle_holding_itself_or_nested_past_the_stack_is_read_or_refused(data, outcome):
    """Found: a dict holding itself (`D = {}; D[1] = D`, memo references) crashed `read_pickle` with RecursionError
    in `resolve`; so did a list holding itself and lists nested 5,000 deep. Self-references now resolve to
    themselves; nesting past `MAX_NESTING` is refused."""
    assert check_pickle(_names(), data) == outcome


@pytest.mark.parametrize("key, value", [("log_std_init", {}), ("lstm_hidden_size", None)])
def test_policy_kwargs_of_the_wrong_type_are_refused_in_one_line(sb3, key, value):
    """Found: policy_kwargs `log_std_init: {}` crashed `PPO.load` with "float() argument must be a string or a real
    number, not 'dict'" (TypeError), `lstm_hidden_size: null` with int()'s TypeError."""
    path = sb3.sandbox.fresh(".zip")
    path.write_bytes(with_data(ZIPS["lstm"], [Edit(("policy_kwargs", key), value)]))
    assert _load(sb3, "RecurrentPPO", path, bounded=False) == "refused"
