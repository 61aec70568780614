"""RL-Zoo's hyperparameter files (`hyperparams/ppo.yml`: env id -> its settings) read as rl-zoo3's `train.py` reads
them (`ExperimentManager.read_hyperparameters` and `_preprocess_hyperparams`), into Config values on SB3's PPO
defaults (`kppo.config.sb3_defaults`); `kppo train FILE --env ID` and `kppo tune FILE --env ID` read them so.

Python strings (`policy_kwargs`, a `normalize` dict) are read as syntax trees, never run: literals, `dict(...)`, and
torch's activation classes (`nn.ReLU`, `th.nn.Tanh`, `torch.nn.GELU`) as their Keras names, torch never imported.
A key with no meaning in kppo is refused in one line naming `<env id>.<key>` and why (`REFUSED`). The
`policy_kwargs` become Config fields through SB3's own translation (`kppo.tuning.zoo`, above `kppo.sb3`).
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

from kppo.config.fields import ConfigFields
from kppo.config.sb3_defaults import SB3_BATCH_SIZE, SB3_NAMES, SB3_PPO_ARGUMENTS, SB3_PPO_DEFAULTS
from kppo.config.spellings import suggest
from kppo.config.values import coerce, load_yaml, printable, read_text, yaml_problem

__all__ = [
    "REFUSED",
    "RETIRED_IDS",
    "TORCH_ACTIVATIONS",
    "ZooEntry",
    "is_zoo_file",
    "read_entry",
    "zoo_entries",
    "zoo_key_message",
]

#: rl-zoo3's own keys (read by its ExperimentManager, not passed to PPO) that kppo reads: key -> what it becomes.
ZOO_KEYS = {
    "n_envs": "num_envs (RL-Zoo's default 1)",
    "n_timesteps": "total_timesteps",
    "policy": "MlpPolicy, CnnPolicy (features_extractor 'cnn') or MultiInputPolicy ('combined')",
    "policy_kwargs": "the network fields, as kppo.PPO reads SB3's policy_kwargs",
    "normalize": "normalize_obs and normalize_reward (VecNormalize's arguments as their fields)",
    "frame_stack": "frame_stack (SB3's VecFrameStack)",
    "env_wrapper": "atari_wrapper for SB3's AtariWrapper (the one wrapper kppo builds)",
}
#: Keys of rl-zoo3 and SB3 without a meaning in kppo: key -> why each is refused.
REFUSED = {
    "callback": "callbacks named by class path are imported and run by rl-zoo3; kppo imports no class by name",
    "vec_env_wrapper": "VecEnv wrappers named by class path; kppo imports no class by name",
    "monitor_kwargs": "kppo keeps its own episode statistics and writes no Monitor file",
    "rollout_buffer_class": "kppo's rollout is compiled, not a buffer class one replaces",
    "rollout_buffer_kwargs": "kppo's rollout is compiled, not a buffer class one replaces",
    "replay_buffer_class": "an off-policy algorithm's key; PPO has no replay buffer",
    "replay_buffer_kwargs": "an off-policy algorithm's key; PPO has no replay buffer",
    "stats_window_size": "SB3's logger window; kppo's metrics are per evaluation round",
    "tensorboard_log": "kppo train writes tensorboard/ in the run folder",
    "device": "TensorFlow places the computation (kppo.PPO takes it as an argument)",
}
#: env_wrapper class paths kppo builds -> their Config fields.
WRAPPERS = {"stable_baselines3.common.atari_wrappers.AtariWrapper": {"atari_wrapper": True}}
#: SB3's policy names -> `Config.features_extractor` (`kppo.sb3.arguments.POLICY_EXTRACTORS` for PPO's policies).
POLICIES = {"MlpPolicy": "flatten", "CnnPolicy": "cnn", "MultiInputPolicy": "combined"}
#: torch.nn activation classes -> Keras' names (`kppo.config.choices.ACTIVATIONS`).
TORCH_ACTIVATIONS = {
    "Tanh": "tanh",
    "ReLU": "relu",
    "GELU": "gelu",
    "Softplus": "softplus",
    "SiLU": "silu",
    "ELU": "elu",
    "SELU": "selu",
    "Sigmoid": "sigmoid",
    "LeakyReLU": "leaky_relu",
}
_TORCH_MODULES = ("nn", "th.nn", "torch.nn")
#: VecNormalize's arguments kppo's normalization takes: name -> setting (SB3's spelling or a Config field).
NORMALIZE_KEYS = {
    "norm_obs": "norm_obs",
    "norm_reward": "norm_reward",
    "norm_obs_keys": "normalize_obs_keys",
    "clip_obs": "clip_obs",
    "clip_reward": "clip_reward",
    "epsilon": "norm_epsilon",
}
#: Env ids of RL-Zoo's file that gymnasium 1.x no longer registers -> the id an entry trains on instead: the same
#: task's next version (LunarLander-v3: wind reset per episode, deterministic resets, wider observation bounds; the
#: MuJoCo -v4 ids: the v2 models on the `mujoco` bindings instead of mujoco-py). `--env` takes either id.
RETIRED_IDS = {
    "LunarLander-v2": "LunarLander-v3",
    "HumanoidStandup-v2": "HumanoidStandup-v4",
    "InvertedDoublePendulum-v2": "InvertedDoublePendulum-v4",
    "InvertedPendulum-v2": "InvertedPendulum-v4",
    "Reacher-v2": "Reacher-v4",
}
#: RL-Zoo's evaluation: every 25,000 steps in `train.py` (its --eval-freq), every 100,000 in a search; 5 episodes.
TRAIN_EVALUATION_STEPS, SEARCH_EVALUATION_STEPS, EVAL_EPISODES = 25_000, 100_000, 5
_FIELDS = {f.name for f in dataclasses.fields(ConfigFields)}


@dataclasses.dataclass(frozen=True)
class ZooEntry:
    """One entry of an RL-Zoo file, read: where it came from, as written, and as Config values."""

    source: str  #: how messages name the file (its quoted path, or 'text')
    env: str  #: the env id trained (the entry's key, or the Atari id that `atari` was read for)
    key: str  #: the entry's key in the file
    settings: dict[str, Any]  #: the entry as written (YAML merge keys expanded)
    base: dict[str, Any]  #: Config fields: SB3's defaults, RL-Zoo's, the policy's extractor
    changes: dict[str, Any]  #: the entry's values on `base` (SB3's, RL-Zoo's or kppo's names; `Config.replace`)
    policy: str  #: SB3's policy name
    policy_kwargs: dict[str, Any]  #: the policy_kwargs string read (activations as Keras names)


def _torch_name(node: ast.AST) -> str | None:
    """'ReLU' for nn.ReLU / th.nn.ReLU / torch.nn.ReLU."""
    if isinstance(node, ast.Attribute) and ast.unparse(node.value) in _TORCH_MODULES:
        return node.attr
    return None


def _refuse_node(node: ast.AST, where: str) -> ValueError:
    return ValueError(f"{where}: expected literals, dict(...) and nn.<activation>, got {_shown(node)!r}")


def _literal(node: ast.AST, where: str) -> Any:
    """A Python value of a zoo string: literals, dict(...) calls and torch activation classes (as Keras' names)."""
    name = _torch_name(node)
    if name is not None:
        if name not in TORCH_ACTIVATIONS:
            raise ValueError(
                f"{where}: expected a torch activation among nn.{', nn.'.join(TORCH_ACTIVATIONS)}, got nn.{name}"
            )
        return TORCH_ACTIVATIONS[name]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict" and not node.args:
        if any(kw.arg is None for kw in node.keywords):  # dict(**other): nothing to read `other` from
            raise _refuse_node(node, where)
        return {kw.arg: _literal(kw.value, where) for kw in node.keywords}
    if isinstance(node, ast.Dict):
        keys = [key for key in node.keys if key is not None]
        if len(keys) < len(node.keys):  # {**other}
            raise _refuse_node(node, where)
        items = [(_literal(k, where), _literal(v, where)) for k, v in zip(keys, node.values)]
        wrong = [key for key, _ in items if not isinstance(key, str)]
        if wrong:
            raise ValueError(f"{where}: expected keyword names (strings) as keys, got {wrong[0]!r}")
        return dict(items)
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_literal(x, where) for x in node.elts]
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):  # what literal_eval raises
        raise _refuse_node(node, where) from None


def _shown(node: ast.AST) -> str:
    text = ast.unparse(node)
    return text if len(text) <= 60 else f"{text[:60]}..."


def python_value(text: Any, where: str) -> Any:
    """A zoo string of Python (`"dict(net_arch=[64], activation_fn=nn.ReLU)"`) as a value, read as a syntax tree and
    never run; a value that is no string is returned as it is."""
    if not isinstance(text, str):
        return text
    try:
        return _literal(ast.parse(text.strip(), mode="eval").body, where)
    except SyntaxError as err:
        raise ValueError(f"{where}: could not parse {text!r} ({err.msg})") from None
    except (MemoryError, RecursionError):  # a syntax tree too deep for the parser or for `_literal`
        raise ValueError(
            f"{where}: expected a short Python literal, got {len(text):,} characters nested too deep"
        ) from None


def is_zoo_file(values: Any) -> bool:
    """True for RL-Zoo's layout: every top-level value a mapping (env id -> settings); a path: its YAML has that
    layout (False when it is no readable YAML: reading it as a config then says what is wrong)."""
    if isinstance(values, Path):
        try:
            values = load_yaml(values.read_text(encoding="utf-8"))
        except (yaml.YAMLError, UnicodeDecodeError, OSError):
            return False
    return isinstance(values, Mapping) and bool(values) and all(isinstance(v, Mapping) for v in values.values())


def load_zoo(path_or_text: str | Path) -> tuple[Mapping, str]:
    """(the file's entries, how messages name it: `RL-Zoo YAML <path>`)."""
    text, source = read_text(path_or_text)
    source = f"RL-Zoo YAML {source}"
    try:
        values = load_yaml(text)
    except yaml.YAMLError as err:
        raise ValueError(f"{source}: could not parse {yaml_problem(err)}") from None
    if not is_zoo_file(values):
        raise ValueError(f"{source}: expected env id: {{settings}} entries")
    return values, source


def zoo_entries(path_or_text: str | Path) -> list[str]:
    """The entries' keys (env ids, and `atari`) of an RL-Zoo file."""
    return [str(key) for key in load_zoo(path_or_text)[0]]


def _pick(values: Mapping, env: str | None, source: str, is_atari: Callable[[str], bool] | None) -> tuple[Any, str]:
    """(the entry's key, the env id) of `env` (or the file's only entry): as rl-zoo3, an Atari id not in the file
    reads the `atari` entry; an id gymnasium retired trains on its successor (`RETIRED_IDS`), which also picks it."""
    if env is None:
        if len(values) != 1:
            raise ValueError(f"{source}: an RL-Zoo file of {len(values)} envs; name one with --env ({list(values)})")
        key = next(iter(values))
        return key, RETIRED_IDS.get(str(key), str(key))
    if env in values:
        return env, RETIRED_IDS.get(env, env)
    retired = [old for old, new in RETIRED_IDS.items() if new == env and old in values]
    if retired:
        return retired[0], env
    if "atari" in values and is_atari is not None and is_atari(env):
        return "atari", env
    raise ValueError(f"--env: expected one of the file's envs {list(values)}, got {env!r}")


def read_entry(
    path_or_text: str | Path,
    env: str | None = None,
    is_atari: Callable[[str], bool] | None = None,
    evaluation_steps: int = TRAIN_EVALUATION_STEPS,
) -> ZooEntry:
    """The entry `env` (or the file's only one) of an RL-Zoo file, read on SB3's PPO defaults; `is_atari(env_id)`
    says whether an id not in the file reads the `atari` entry; an evaluation round every `evaluation_steps` steps
    (RL-Zoo's: 25,000 in train.py, 100,000 in a search)."""
    values, source = load_zoo(path_or_text)
    key, env_id = _pick(values, env, source, is_atari)
    shown = printable(str(key))  # as messages name it
    settings = dict(values[key])
    try:
        base, changes, policy, kwargs = entry_fields(env_id, settings, shown, evaluation_steps)
    except ValueError as err:
        message = str(err)
        raise ValueError(f"{source}: {zoo_key_message(message, shown, settings)}") from None
    return ZooEntry(source, env_id, str(key), settings, base, changes, policy, kwargs)


def entry_fields(
    env: str, entry: Mapping[str, Any], where: str, evaluation_steps: int = TRAIN_EVALUATION_STEPS
) -> tuple[dict[str, Any], dict[str, Any], str, dict[str, Any]]:
    """(Config fields of SB3's defaults, the entry's changes to them, the policy, its policy_kwargs) of one entry;
    `where` names it in messages."""
    wrong = [key for key in entry if not isinstance(key, str)]
    if wrong:
        raise ValueError(f"expected option names as strings, got {wrong[0]!r}")
    settings = dict(entry)
    for key in settings:
        _check_key(key, where)
    base: dict[str, Any] = dict(SB3_PPO_DEFAULTS, env=env, num_envs=1, num_eval_envs=EVAL_EPISODES)
    policy = settings.pop("policy", "MlpPolicy")
    if not isinstance(policy, str) or policy not in POLICIES:  # a YAML !!set or list is unhashable
        raise ValueError(f"{where}.policy: expected one of {', '.join(POLICIES)}, got {policy!r}")
    base["features_extractor"] = POLICIES[policy]
    kwargs = python_value(settings.pop("policy_kwargs", None), f"{where}.policy_kwargs")
    if kwargs is None:
        kwargs = {}
    if not isinstance(kwargs, dict):
        raise ValueError(f"{where}.policy_kwargs: expected dict(...), got {kwargs!r}")
    normalize = normalize_settings(python_value(settings.pop("normalize", False), f"{where}.normalize"), where)
    twice = sorted(set(normalize) & set(settings))
    if twice:
        raise ValueError(f"{where}.normalize: sets {twice[0]}, which the entry sets too")
    settings.update(normalize)
    settings.update(_wrappers(settings.pop("env_wrapper", None), f"{where}.env_wrapper"))
    timesteps = coerce(f"{where}.n_timesteps", "int", settings.get("n_timesteps", 1_000_000))
    settings["n_timesteps"] = timesteps
    settings.setdefault("eval_freq", max(1, timesteps // evaluation_steps))
    if "batch_size" not in settings and "num_minibatches" not in settings:
        settings["batch_size"] = SB3_BATCH_SIZE  # SB3's minibatch size, not kppo's 4 minibatches
    return base, settings, policy, kwargs


#: The Config field each SB3 or RL-Zoo spelling of an entry sets (where the names differ), for messages.
_FIELD_OF = {
    "n_envs": "num_envs",
    "n_timesteps": "total_timesteps",
    "batch_size": "num_minibatches",
    "normalize": "normalize_obs",
    "norm_obs": "normalize_obs",
    "norm_reward": "normalize_reward",
    "squash_output": "squash",
    "env_id": "env",
    **SB3_NAMES,
}


def zoo_key_message(message: str, key: str, entry: Mapping[str, Any]) -> str:
    """A Config's refusal of an entry's value, naming the entry's key (`Pendulum-v1.n_steps: num_steps: ...`)."""
    message = message.removeprefix("config: ")
    if message.startswith(f"{key}."):
        return message
    name = message.split(":", 1)[0]
    given = [k for k in entry if isinstance(k, str) and (k == name or _FIELD_OF.get(k) == name)]
    if not given:
        return f"{key}: {message}"
    return f"{key}.{message}" if given[0] == name else f"{key}.{given[0]}: {message}"


def _check_key(key: str, where: str) -> None:
    """A one-line refusal of a key without a meaning in kppo (`REFUSED`) or known to none of rl-zoo3, SB3 and kppo."""
    if key in REFUSED:
        raise ValueError(f"{where}.{key}: not read by kppo ({REFUSED[key]})")
    if key in ZOO_KEYS or key in SB3_PPO_ARGUMENTS or key in _FIELDS or key in ("norm_obs", "norm_reward", "env_id"):
        return
    raise ValueError(
        # printed: a line break in the key (`\x1e` included) would split the one-line error
        f"{printable(where)}.{printable(key)}: expected an SB3 PPO argument, an RL-Zoo key or a kppo option, got "
        f"unknown option {key!r} ({suggest(key, _FIELDS | set(SB3_PPO_ARGUMENTS) | set(ZOO_KEYS))})"
    )


def normalize_settings(normalize: Any, where: str) -> dict[str, Any]:
    """RL-Zoo's `normalize` (a bool, or VecNormalize's arguments as a dict) as settings; VecNormalize's gamma is
    PPO's (rl-zoo3 sets it so), which kppo's reward normalization uses."""
    if not isinstance(normalize, dict):
        return {"normalize": normalize}
    unknown = sorted(map(str, set(normalize) - set(NORMALIZE_KEYS)))
    if unknown:
        raise ValueError(
            f"{where}.normalize: expected VecNormalize arguments among {', '.join(NORMALIZE_KEYS)}, got {unknown}"
        )
    settings = {"norm_obs": True, "norm_reward": True}  # VecNormalize's defaults
    settings.update({NORMALIZE_KEYS[key]: value for key, value in normalize.items()})
    return settings


def _wrappers(value: Any, where: str) -> dict[str, Any]:
    """RL-Zoo's env_wrapper (a class path, a list of them, or of {class path: kwargs}) as Config fields: the
    wrappers kppo builds (`WRAPPERS`), without arguments; any other is refused naming it."""
    if value is None:
        return {}
    out: dict[str, Any] = {}
    for item in value if isinstance(value, list) else [value]:
        name, kwargs = next(iter(item.items())) if isinstance(item, Mapping) and len(item) == 1 else (item, None)
        if not isinstance(name, str) or name not in WRAPPERS:
            raise ValueError(
                f"{where}: expected {', '.join(WRAPPERS)} (the wrappers kppo builds), got {printable(repr(name))}"
            )
        if kwargs:
            raise ValueError(f"{where}: {name} takes no arguments in kppo, got {printable(repr(kwargs))}")
        out.update(WRAPPERS[name])
    return out
