"""RL-Zoo's hyperparameter files (`hyperparams/ppo.yml`: env id -> its settings) as a base Config, so that a zoo
user's file runs in `kppo tune` as it is.

An entry's `n_timesteps`, `n_envs`, `policy`, `normalize` (a bool or a string of a dict), `policy_kwargs` (a string
of Python: `dict(net_arch=dict(pi=[64], vf=[64]), activation_fn=nn.ReLU)`, read as a syntax tree, never run) and
SB3's arguments (`lin_<value>` schedules included) are read on SB3's defaults for PPO, with SB3's update (what
`kppo.PPO` trains). Evaluation as RL-Zoo's search makes it: `max(1, n_timesteps // 100000)` rounds of 5 episodes.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any
from collections.abc import Mapping

import yaml

from kppo.config.options import Config
from kppo.config.values import coerce, printable, load_yaml, read_text, yaml_problem
from kppo.sb3.arguments import SB3_UPDATE, policy_config

__all__ = ["SB3_PPO_DEFAULTS", "is_zoo_file", "read_zoo"]

#: `stable_baselines3.PPO`'s defaults, RL-Zoo's `n_envs: 1`, SB3's vf clipping (only with clip_range_vf) and update.
SB3_PPO_DEFAULTS: dict[str, Any] = {
    "env_backend": "gymnasium",
    "num_envs": 1,
    "num_steps": 2048,
    "learning_rate": 3e-4,
    "lr_schedule": "constant",
    "num_epochs": 10,
    "gamma": 0.99,
    "gae_lambda": 0.95,
    "clip_range": 0.2,
    "clip_range_vf": None,
    "vf_clip_mode": "clipped",
    "ent_coef": 0.0,
    "vf_coef": 0.5,
    "max_grad_norm": 0.5,
    "num_eval_envs": 5,
    **SB3_UPDATE,
}
_POLICIES = ("MlpPolicy",)
_TORCH_MODULES = ("nn", "th.nn", "torch.nn")
_IGNORED = ("policy",)


def _torch_name(node: ast.AST) -> str | None:
    """'ReLU' for nn.ReLU / th.nn.ReLU / torch.nn.ReLU."""
    if isinstance(node, ast.Attribute) and ast.unparse(node.value) in _TORCH_MODULES:
        return node.attr
    return None


def _literal(node: ast.AST, where: str) -> Any:
    """A policy_kwargs value: literals, dict(...) calls and torch activation classes (as Keras' names)."""
    name = _torch_name(node)
    if name is not None:
        return {"LeakyReLU": "leaky_relu", "SiLU": "silu", "GELU": "gelu", "ELU": "elu", "SELU": "selu"}.get(
            name, name.lower()
        )
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict" and not node.args:
        if any(kw.arg is None for kw in node.keywords):  # dict(**other): nothing to read `other` from
            raise ValueError(f"{where}: expected literals, dict(...) and nn.<activation>, got {_shown(node)!r}")
        return {kw.arg: _literal(kw.value, where) for kw in node.keywords}
    if isinstance(node, ast.Dict):
        keys = [key for key in node.keys if key is not None]
        if len(keys) < len(node.keys):  # {**other}
            raise ValueError(f"{where}: expected literals, dict(...) and nn.<activation>, got {_shown(node)!r}")
        items = [(_literal(k, where), _literal(v, where)) for k, v in zip(keys, node.values)]
        wrong = [key for key, _ in items if not isinstance(key, str)]
        if wrong:
            raise ValueError(f"{where}: expected keyword names (strings) as keys, got {wrong[0]!r}")
        return dict(items)
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_literal(x, where) for x in node.elts]
    try:
        return ast.literal_eval(node)
    except (
        ValueError,
        TypeError,
        SyntaxError,
        MemoryError,
        RecursionError,
    ):  # what literal_eval raises on non-literals
        raise ValueError(f"{where}: expected literals, dict(...) and nn.<activation>, got {_shown(node)!r}") from None


def _shown(node: ast.AST) -> str:
    text = ast.unparse(node)
    return text if len(text) <= 60 else f"{text[:60]}..."


def _python(text: Any, where: str) -> Any:
    if not isinstance(text, str):
        return text
    try:
        tree = ast.parse(text, mode="eval")
        return _literal(tree.body, where)
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


def _entry(values: Mapping, env: str | None, source: str) -> tuple[str, Mapping]:
    if env is None:
        if len(values) != 1:
            raise ValueError(f"{source}: an RL-Zoo file of {len(values)} envs; name one with --env ({list(values)})")
        env = next(iter(values))
    if env not in values:
        raise ValueError(f"--env: expected one of the file's envs {list(values)}, got {env!r}")
    return str(env), values[env]


def zoo_config(env: str, entry: Mapping[str, Any], source: str) -> Config:
    """One RL-Zoo entry on SB3's PPO defaults."""
    env_id, env = env, printable(env)  # `env` as messages name it
    settings = dict(entry)
    policy = settings.pop("policy", "MlpPolicy")
    if policy not in _POLICIES:
        raise ValueError(f"{source}: {env}.policy: expected {', '.join(_POLICIES)} in a search, got {policy!r}")
    fields = dict(SB3_PPO_DEFAULTS, env=env_id)
    wrong = [key for key in settings if not isinstance(key, str)]
    if wrong:
        raise ValueError(f"{source}: {env}: expected option names as strings, got {wrong[0]!r}")
    try:
        fields.update(_policy_fields(settings.pop("policy_kwargs", None), f"{env}.policy_kwargs"))
        normalize = _normalize(_python(settings.pop("normalize", False), f"{env}.normalize"), f"{env}.normalize")
        twice = sorted(set(normalize) & set(settings))
        if twice:
            raise ValueError(f"{env}.normalize: sets {twice[0]}, which the entry sets too")
        settings.update(normalize)
        timesteps = coerce(f"{env}.n_timesteps", "int", settings.get("n_timesteps", 1_000_000))
        settings["n_timesteps"] = timesteps
        settings.setdefault("eval_freq", max(1, timesteps // 100_000))
        return Config.from_dict(fields).replace(**settings)
    except ValueError as err:
        message = str(err)
        raise ValueError(f"{source}: {message if message.startswith(f'{env}.') else f'{env}: {message}'}") from None


#: The policy_kwargs values `policy_config` reads as numbers or flags: checked here, so that a string or a list is
#: refused in one line rather than converted (`bool("no")` is True).
_POLICY_VALUES = {
    "log_std_init": "float",
    "ortho_init": "bool",
    "squash_output": "bool",
    "full_std": "bool",
    "use_expln": "bool",
}
#: SB3 policy_kwargs for other policies than MlpPolicy's (a search builds only MlpPolicy): refused, not dropped.
_EXTRACTOR_KWARGS = ("features_extractor_class", "features_extractor_kwargs", "normalize_images")


def _policy_fields(text: Any, where: str) -> dict[str, Any]:
    """An entry's policy_kwargs (a string of Python, read as a syntax tree) as Config fields."""
    kwargs = _python(text, where)
    if kwargs is None:
        return {}
    if not isinstance(kwargs, dict):
        raise ValueError(f"{where}: expected dict(...), got {kwargs!r}")
    for key, kind in _POLICY_VALUES.items():
        if key in kwargs:
            coerce(f"{where}.{key}", kind, kwargs[key])
    extractor = [key for key in _EXTRACTOR_KWARGS if key in kwargs]
    if extractor:
        raise ValueError(f"{where}.{extractor[0]}: expected none in a search (it builds {', '.join(_POLICIES)})")
    return policy_config(kwargs)


#: VecNormalize's arguments kppo's normalization takes: name -> setting (SB3's spelling or a Config field).
_NORMALIZE_KEYS = {
    "norm_obs": "norm_obs",
    "norm_reward": "norm_reward",
    "norm_obs_keys": "normalize_obs_keys",
    "clip_obs": "clip_obs",
    "clip_reward": "clip_reward",
    "epsilon": "norm_epsilon",
}


def _normalize(normalize: Any, where: str) -> dict[str, Any]:
    """RL-Zoo's `normalize` (a bool, or VecNormalize's arguments as a dict) as settings."""
    if not isinstance(normalize, dict):
        return {"normalize": normalize}
    unknown = sorted(map(str, set(normalize) - set(_NORMALIZE_KEYS)))
    if unknown:
        raise ValueError(f"{where}: expected VecNormalize arguments among {', '.join(_NORMALIZE_KEYS)}, got {unknown}")
    settings = {"norm_obs": True, "norm_reward": True}  # VecNormalize's defaults
    settings.update({_NORMALIZE_KEYS[key]: value for key, value in normalize.items()})
    return settings


def read_zoo(path_or_text: str | Path, env: str | None = None) -> tuple[str, Config]:
    """(env id, Config) of an RL-Zoo hyperparameter file's entry (`env`, or its only one)."""
    text, source = read_text(path_or_text)
    try:
        values = load_yaml(text)
    except yaml.YAMLError as err:
        raise ValueError(f"RL-Zoo YAML {source}: could not parse {yaml_problem(err)}") from None
    if not is_zoo_file(values):
        raise ValueError(f"RL-Zoo YAML {source}: expected env id: {{settings}} entries")
    env_id, entry = _entry(values, env, f"RL-Zoo YAML {source}")
    return env_id, zoo_config(env_id, entry, f"RL-Zoo YAML {source}")
