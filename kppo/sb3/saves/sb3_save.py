"""Models saved by Stable-Baselines3 2.x / sb3-contrib (`model.save("model.zip")`) read without torch and without
unpickling: the zip's `data` JSON, `policy.pth` and `_stable_baselines3_version`.

SB3's `data` JSON holds plain values (n_steps, gamma, policy_kwargs when they are plain, ...) and, for the values
JSON cannot hold, an object `{":type:": ..., ":serialized:": <base64 cloudpickle>, <readable fields>}`. kppo reads
the plain values; of the serialized ones it reads three, through `kppo.sb3.saves.safe_pickle` (nothing is imported or
called): `policy_class` (a reference to a class: its name), `observation_space` / `action_space` (gymnasium spaces
as data: their numpy bounds, sizes and dtypes, rebuilt here with gymnasium's constructors) and `policy_kwargs` when
they name torch classes (`activation_fn`, `optimizer_class`: references, by name only). The schedules
(`clip_range`, `lr_schedule`) are read from their readable `value_schedule` field when constant. Everything else in
the file (the optimizer's state, the last observations, the episode buffers, `pytorch_variables.pth`) is not read.
`policy.pth` is read by `kppo.sb3.saves.torch_zip`.

Refused in one line naming the file: not a zip, a zip over kppo's bounds (`kppo.agent.archive.checked_members`:
a decompression bomb is refused before it is inflated), a zip without `data` / `policy.pth` (SB3 writes both), an
SB3 version other than 2.x, another algorithm's save (SAC, DQN, A2C, TD3, ...), a policy class kppo does not map, a
space of a kind kppo does not read or cannot rebuild from its saved state.
"""

from __future__ import annotations

import base64
import io
import json
import re
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any, NamedTuple

import gymnasium as gym
import numpy as np

from kppo.agent.archive import ZIP_ERRORS, checked_members, file_bytes, read_member
from kppo.core.errors import NotSupportedError
from kppo.sb3.saves.safe_pickle import NUMPY_NAMES, Builder, Global, Instance, PickleRefused, describe, read_pickle
from kppo.sb3.saves.torch_zip import read_state_dict

#: SB3's and sb3-contrib's PPO policy classes -> (algorithm, SB3 policy name).
POLICY_CLASSES = {
    "stable_baselines3.common.policies.ActorCriticPolicy": ("PPO", "MlpPolicy"),
    "stable_baselines3.common.policies.ActorCriticCnnPolicy": ("PPO", "CnnPolicy"),
    "stable_baselines3.common.policies.MultiInputActorCriticPolicy": ("PPO", "MultiInputPolicy"),
    "sb3_contrib.common.recurrent.policies.RecurrentActorCriticPolicy": ("RecurrentPPO", "MlpLstmPolicy"),
    "sb3_contrib.common.recurrent.policies.RecurrentActorCriticCnnPolicy": ("RecurrentPPO", "CnnLstmPolicy"),
    "sb3_contrib.common.recurrent.policies.RecurrentMultiInputActorCriticPolicy": (
        "RecurrentPPO",
        "MultiInputLstmPolicy",
    ),
    "sb3_contrib.common.maskable.policies.MaskableActorCriticPolicy": ("MaskablePPO", "MlpPolicy"),
    "sb3_contrib.common.maskable.policies.MaskableActorCriticCnnPolicy": ("MaskablePPO", "CnnPolicy"),
    "sb3_contrib.common.maskable.policies.MaskableMultiInputActorCriticPolicy": ("MaskablePPO", "MultiInputPolicy"),
}
#: The other algorithms' policy modules, named in the refusal.
OTHER_ALGORITHMS = {
    "stable_baselines3.sac.": "SAC",
    "stable_baselines3.td3.": "TD3",
    "stable_baselines3.dqn.": "DQN",
    "stable_baselines3.ddpg.": "DDPG",
    "sb3_contrib.qrdqn.": "QR-DQN",
    "sb3_contrib.tqc.": "TQC",
    "sb3_contrib.ars.": "ARS",
    "sb3_contrib.trpo.": "TRPO",
    "sb3_contrib.crossq.": "CrossQ",
}
#: PPO's own fields in `data` (A2C saves an ActorCriticPolicy too, without these).
PPO_FIELDS = ("n_steps", "batch_size", "n_epochs", "gamma", "gae_lambda", "clip_range")
_GYM_SPACES = {
    ("gymnasium.spaces.box", "Box"): None,
    ("gymnasium.spaces.discrete", "Discrete"): None,
    ("gymnasium.spaces.multi_discrete", "MultiDiscrete"): None,
    ("gymnasium.spaces.multi_binary", "MultiBinary"): None,
    ("gymnasium.spaces.dict", "Dict"): None,
    ("collections", "OrderedDict"): None,
    # a space's seeded RNG (`_np_random`): records, never built
    ("numpy.random._pickle", "__generator_ctor"): None,
    ("numpy.random._pickle", "__bit_generator_ctor"): None,
    ("numpy.random._pcg64", "PCG64"): None,
    ("numpy.random.bit_generator", "__pyx_unpickle_SeedSequence"): None,
    ("numpy.random.bit_generator", "SeedSequence"): None,
}
SPACE_NAMES: dict[tuple[str, str], Builder | None] = {**NUMPY_NAMES, **_GYM_SPACES}


class SB3Save(NamedTuple):
    """What kppo reads of an SB3 save."""

    source: str  # the file, as errors name it
    version: str  # SB3's version that wrote it
    algorithm: str  # "PPO", "RecurrentPPO" or "MaskablePPO"
    policy: str  # the SB3 policy name ("MlpPolicy", "CnnPolicy", "MlpLstmPolicy", ...)
    policy_class: str  # module.qualname
    data: dict[str, Any]  # the plain fields of `data`
    schedules: dict[str, dict]  # the readable fields of serialized schedules (clip_range, lr_schedule, ...)
    policy_kwargs: dict[str, Any]  # as saved; torch classes as `Global` references
    observation_space: gym.spaces.Space
    action_space: gym.spaces.Space
    state_dict: dict[str, np.ndarray]


class _AnyName(Mapping):
    """Names a reference-only pickle may hold (a class saved by reference): any, none of them callable."""

    def __getitem__(self, key: tuple[str, str]) -> Builder:
        def refuse(args: tuple) -> Any:
            raise PickleRefused(f"calls {key[0]}.{key[1]}")

        return refuse

    def __contains__(self, key: object) -> bool:
        return True

    def __iter__(self):
        return iter(())

    def __len__(self) -> int:
        return 0


def _source(path: Any) -> str:
    return repr(str(path)) if isinstance(path, (str, Path)) else "the file object"


def is_sb3_save(path: str | Path | IO[bytes]) -> bool:
    """True for a zip holding SB3's `data` and `policy.pth` (and not kppo's `config.yaml`); an open file is left
    at its start."""
    try:
        if isinstance(path, (str, Path)):
            if not Path(path).is_file():
                return False
            with zipfile.ZipFile(path) as archive:
                names = set(archive.namelist())
        else:
            position = path.tell()
            try:
                with zipfile.ZipFile(path) as archive:
                    names = set(archive.namelist())
            finally:
                path.seek(position)
    except ZIP_ERRORS:
        return _looks_like_sb3(path)
    if "config.yaml" in names or "metadata.json" in names:
        return False  # kppo's own save
    return ("data" in names and "policy.pth" in names) or _looks_like_sb3(path)


def _looks_like_sb3(path: str | Path | IO[bytes]) -> bool:
    """A file that is not a complete zip but holds SB3's member names (a truncated save): `read_sb3_save` then
    says what is wrong with it."""
    if not isinstance(path, (str, Path)):
        return False
    try:
        with open(path, "rb") as file:
            head = file.read(1 << 20)  # the first MiB, not the whole file
    except OSError:
        return False
    return head.startswith(b"PK") and (b"_stable_baselines3_version" in head or b"policy.pth" in head)


def _member(archive: zipfile.ZipFile, name: str, source: str) -> bytes:
    try:
        return read_member(archive, name, source)  # within kppo's bound on unpacked bytes (a bomb is refused)
    except KeyError:
        raise ValueError(f"{source}: expected an SB3 save holding {name!r}, found none") from None


def _serialized(entry: Any, names: Mapping, source: str, key: str) -> Any:
    if not (isinstance(entry, dict) and isinstance(entry.get(":serialized:"), str)):
        raise ValueError(f"{source}: data[{key!r}]: expected SB3's serialized entry, got {describe(entry)}")
    try:
        blob = base64.b64decode(entry[":serialized:"], validate=True)
    except ValueError:
        raise ValueError(f"{source}: data[{key!r}]: expected base64, got other text") from None
    return read_pickle(blob, f"{source}: data[{key!r}]", names)


def _array(value: Any, source: str, what: str) -> np.ndarray:
    if not isinstance(value, np.ndarray):
        raise ValueError(f"{source}: {what}: expected a numpy array, got {describe(value)}")
    return value


#: What gymnasium and numpy raise for a space's state they cannot build (a missing or mistyped field, bounds that
#: do not fit the shape, a size past int64).
_SPACE_ERRORS = (KeyError, TypeError, ValueError, IndexError, OverflowError, AttributeError)


def build_space(record: Any, source: str) -> gym.spaces.Space:
    """A gymnasium space from its pickled record (an `Instance` of a gymnasium space with its state dict); a state
    gymnasium cannot build is a one-line ValueError naming `source` and the space."""
    if not (isinstance(record, Instance) and isinstance(record.state, dict)):
        raise NotSupportedError(f"{source}: expected a gymnasium space, got {describe(record)}")
    kind, state = record.cls.name, record.state
    if kind == "Box":
        low, high = _array(state.get("low"), source, "Box.low"), _array(state.get("high"), source, "Box.high")
        return _built(kind, source, lambda: _box(low, high, state))
    if kind == "Discrete":
        return _built(kind, source, lambda: gym.spaces.Discrete(int(state["n"]), start=int(state.get("start", 0))))
    if kind == "MultiDiscrete":
        nvec = _array(state.get("nvec"), source, "MultiDiscrete.nvec")
        dtype = state.get("dtype", np.int64)
        return _built(kind, source, lambda: gym.spaces.MultiDiscrete(nvec, dtype=dtype, start=state.get("start")))
    if kind == "MultiBinary":
        n: Any = state.get("n")
        n = list(n) if isinstance(n, (tuple, list, np.ndarray)) else n
        return _built(kind, source, lambda: gym.spaces.MultiBinary(n if isinstance(n, list) else int(n)))
    if kind == "Dict":
        spaces = state.get("spaces")
        if not isinstance(spaces, dict):
            raise ValueError(f"{source}: Dict space without its spaces")
        return gym.spaces.Dict({str(k): build_space(v, source) for k, v in spaces.items()})
    raise NotSupportedError(f"{source}: holds a {record.cls} space, which kppo does not read")


def _box(low: np.ndarray, high: np.ndarray, state: dict) -> gym.spaces.Box:
    shape = tuple(state.get("_shape", low.shape))
    if low.shape != shape or high.shape != shape:  # SB3 pickles whole bounds: none is broadcast to a larger shape
        raise ValueError(f"bounds of shapes {low.shape} and {high.shape} for the shape {shape}")
    dtype: Any = state.get("dtype")
    return gym.spaces.Box(low, high, shape, dtype)


def _built(kind: str, source: str, make: Callable[[], gym.spaces.Space]) -> gym.spaces.Space:
    try:
        return make()
    except _SPACE_ERRORS as err:
        why = f"no {err}" if isinstance(err, KeyError) else (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise ValueError(f"{source}: a {kind} space kppo cannot rebuild from its saved state ({why})") from None


def _policy_class(data: dict, source: str) -> str:
    entry = data.get("policy_class")
    target = _serialized(entry, _AnyName(), source, "policy_class")
    if not isinstance(target, Global):
        raise ValueError(f"{source}: data['policy_class']: expected a class reference, got {describe(target)}")
    return str(target)


def _algorithm(policy_class: str, data: dict, source: str) -> tuple[str, str]:
    for prefix, name in OTHER_ALGORITHMS.items():
        if policy_class.startswith(prefix):
            raise NotSupportedError(
                f"{source}: holds a {name} model ({policy_class}); kppo reads PPO, RecurrentPPO and MaskablePPO saves"
            )
    if policy_class not in POLICY_CLASSES:
        raise NotSupportedError(
            f"{source}: holds the policy class {policy_class}, which kppo cannot map onto its networks (it reads "
            f"SB3's and sb3-contrib's actor-critic policies)"
        )
    missing = [key for key in PPO_FIELDS if key not in data]
    if missing:
        guess = "an A2C model" if "clip_range" not in data and "n_steps" in data else "not a PPO model"
        raise NotSupportedError(f"{source}: holds {guess} ({policy_class} without {', '.join(missing)})")
    return POLICY_CLASSES[policy_class]


def _policy_kwargs(data: dict, source: str) -> dict[str, Any]:
    """The policy_kwargs as saved: plain JSON, or (when they name torch classes) read from the serialized entry,
    each class a `Global` reference (`kppo.sb3.saves.from_sb3` maps the ones kppo builds)."""
    entry = data.get("policy_kwargs", {})
    if entry is None:
        return {}
    kwargs = entry if not (isinstance(entry, dict) and ":serialized:" in entry) else None
    if kwargs is None:
        kwargs = _serialized(entry, _AnyName(), source, "policy_kwargs")
    if not isinstance(kwargs, dict):
        raise ValueError(f"{source}: data['policy_kwargs']: expected a dict, got {describe(kwargs)}")
    return dict(kwargs)


def schedule_value(entry: Any, default: float) -> float:
    """A constant schedule's value from SB3's readable field ("ConstantSchedule(val=0.2)"), a plain number as it
    is; `default` for any other schedule (its value now is not in the file's plain fields)."""
    if isinstance(entry, (int, float)) and not isinstance(entry, bool):
        return float(entry)
    text = entry.get("value_schedule", "") if isinstance(entry, dict) else ""
    match = re.fullmatch(r"ConstantSchedule\(val=([-+0-9.eE]+)\)", str(text))
    return float(match.group(1)) if match else default


def read_sb3_save(path: str | Path | IO[bytes]) -> SB3Save:
    """Reads an SB3 / sb3-contrib PPO save (see the module docstring); one-line ValueErrors otherwise."""
    source = _source(path)
    try:
        handle = path if isinstance(path, (str, Path)) else io.BytesIO(file_bytes(path))
        archive = zipfile.ZipFile(handle)
    except ZIP_ERRORS:
        raise ValueError(
            f"{source}: expected an SB3 save (a zip file), got a file that is not a complete zip"
        ) from None
    with archive:
        checked_members(archive, source)  # counts, methods, declared sizes
        listed = archive.namelist()
        if "data" not in listed or "policy.pth" not in listed:  # a truncated save can open as its inner zip
            raise ValueError(
                f"{source}: expected an SB3 save listing 'data' and 'policy.pth', got a zip listing "
                f"{listed[:4]}{' ...' if len(listed) > 4 else ''} (a truncated or damaged file)"
            )
        version = _member(archive, "_stable_baselines3_version", source).decode("utf-8", "replace").strip()
        if not re.fullmatch(r"2\.\d+\.\d+\S*", version):
            raise NotSupportedError(f"{source}: saved by Stable-Baselines3 {version!r}; kppo reads saves of SB3 2.x")
        try:
            data = json.loads(_member(archive, "data", source))
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as err:  # Recursion: nested past the stack
            raise ValueError(f"{source}: 'data': expected SB3's JSON, got {str(err).splitlines()[0]}") from None
        if not isinstance(data, dict):
            raise ValueError(f"{source}: 'data': expected a JSON object, got {type(data).__name__}")
        policy_class = _policy_class(data, source)
        algorithm, policy = _algorithm(policy_class, data, source)
        spaces = [
            build_space(_serialized(data.get(key), SPACE_NAMES, source, key), f"{source}: data[{key!r}]")
            for key in ("observation_space", "action_space")
        ]
        state_dict = read_state_dict(_member(archive, "policy.pth", source), f"{source}: policy.pth")
    plain = {k: v for k, v in data.items() if not (isinstance(v, dict) and ":serialized:" in v)}
    schedules = {
        k: {field: text for field, text in data[k].items() if not field.startswith(":")}
        for k in ("learning_rate", "lr_schedule", "clip_range", "clip_range_vf")
        if isinstance(data.get(k), dict) and ":serialized:" in data[k]
    }
    kwargs = _policy_kwargs(data, source)
    return SB3Save(
        source, version, algorithm, policy, policy_class, plain, schedules, kwargs, spaces[0], spaces[1], state_dict
    )
