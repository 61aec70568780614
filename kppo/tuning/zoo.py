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
from kppo.config.values import read_text, yaml_problem
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
        return {kw.arg: _literal(kw.value, where) for kw in node.keywords if kw.arg is not None}
    if isinstance(node, ast.Dict):
        return {_literal(k, where): _literal(v, where) for k, v in zip(node.keys, node.values) if k is not None}
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_literal(x, where) for x in node.elts]
    try:
        return ast.literal_eval(node)
    except ValueError:
        raise ValueError(
            f"{where}: expected literals, dict(...) and nn.<activation>, got {ast.unparse(node)!r}"
        ) from None


def _python(text: Any, where: str) -> Any:
    if not isinstance(text, str):
        return text
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as err:
        raise ValueError(f"{where}: could not parse {text!r} ({err.msg})") from None
    return _literal(tree.body, where)


def is_zoo_file(values: Any) -> bool:
    """True for RL-Zoo's layout: every top-level value a mapping (env id -> settings)."""
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
    settings = dict(entry)
    policy = settings.pop("policy", "MlpPolicy")
    if policy not in _POLICIES:
        raise ValueError(f"{source}: {env}.policy: expected {', '.join(_POLICIES)} in a search, got {policy!r}")
    fields = dict(SB3_PPO_DEFAULTS, env=env)
    kwargs = _python(settings.pop("policy_kwargs", None), f"{source}: {env}.policy_kwargs")
    if kwargs is not None:
        if not isinstance(kwargs, dict):
            raise ValueError(f"{source}: {env}.policy_kwargs: expected dict(...), got {kwargs!r}")
        fields.update(policy_config(kwargs))
    normalize = _python(settings.pop("normalize", False), f"{source}: {env}.normalize")
    if isinstance(normalize, dict):
        settings["norm_obs"] = bool(normalize.get("norm_obs", True))
        settings["norm_reward"] = bool(normalize.get("norm_reward", True))
    else:
        settings["normalize"] = normalize
    timesteps = int(float(settings.get("n_timesteps", 1e6)))
    settings["n_timesteps"] = timesteps
    settings.setdefault("eval_freq", max(1, timesteps // 100_000))
    try:
        return Config.from_dict(fields).replace(**settings)
    except ValueError as err:
        raise ValueError(f"{source}: {env}: {err}") from None


def read_zoo(path_or_text: str | Path, env: str | None = None) -> tuple[str, Config]:
    """(env id, Config) of an RL-Zoo hyperparameter file's entry (`env`, or its only one)."""
    text, source = read_text(path_or_text)
    try:
        values = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ValueError(f"RL-Zoo YAML {source}: could not parse {yaml_problem(err)}") from None
    if not is_zoo_file(values):
        raise ValueError(f"RL-Zoo YAML {source}: expected env id: {{settings}} entries")
    env_id, entry = _entry(values, env, f"RL-Zoo YAML {source}")
    return env_id, zoo_config(env_id, entry, f"RL-Zoo YAML {source}")
