"""Search spaces: a YAML mapping of Config fields (any spelling) or RL-Zoo's derived parameters to Optuna
distributions, checked once, then sampled per trial and applied to a base Config.

    learning_rate: {type: float, low: 1.0e-5, high: 1.0e-2, log: true}
    ent_coef: {type: float, low: 1.0e-8, high: 0.1, log: true}
    clip_range: {type: categorical, choices: [0.1, 0.2, 0.3]}
    n_steps_pow: {type: int, low: 5, high: 10}       # RL-Zoo's: n_steps = 2 ** value

A trial's parameters are named as the file names them (so a study reads as RL-Zoo's does); `apply` turns them into
a Config. Fields in `SWEEPABLE` batch: trials that differ only in them train as one population.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from collections.abc import Callable, Mapping

import yaml

from kppo.config.options import SWEEPABLE, Config
from kppo.config.spellings import translate
from kppo.config.values import is_finite, printable, load_yaml, read_text, yaml_problem

__all__ = ["FIXED", "ZOO_PARAMS", "Distribution", "SearchSpace", "default_space", "load_space"]

#: Fields a search cannot vary: the run's identity and budget, its evaluation protocol and where it runs.
FIXED = (
    "env",
    "env_backend",
    "vectorization",
    "total_timesteps",
    "num_eval_envs",
    "eval_freq",
    "verbose",
    "debug",
    "seed",
    "jit_rollout",
    "jit_update",
    "jit_eval",
    "distribute",
    "devices",
    "checkpoint_every",
    "iterations_per_call",
)

_NET_ARCH = {"tiny": (64,), "small": (64, 64), "medium": (256, 256)}  # RL-Zoo's net_arch choices (pi = vf)

_MAX_POW = 30  # n_steps / batch_size up to 2 ** 30 (RL-Zoo samples 2 ** 5 .. 2 ** 12)


def _one_minus(field: str) -> Callable[[Any], dict[str, Any]]:
    return lambda x: {field: 1.0 - _number(f"one_minus_{field}", x)}


def _power_of_two(field: str) -> Callable[[Any], dict[str, Any]]:
    """`<field>_pow`: 2 ** x for an integer x in 0..30 (a float or a huge power would be truncated or never end)."""

    def changes(x: Any) -> dict[str, Any]:
        integral = isinstance(x, int) or (isinstance(x, float) and x.is_integer())
        if isinstance(x, bool) or not integral or not 0 <= x <= _MAX_POW:
            raise ValueError(f"{field}_pow: expected an integer from 0 to {_MAX_POW} ({field} = 2 ** value), got {x!r}")
        return {field: 2 ** int(x)}

    return changes


#: RL-Zoo's derived parameters (`rl_zoo3.hyperparams_opt.convert_onpolicy_params`): name -> value -> Config changes.
ZOO_PARAMS: dict[str, Callable[[Any], dict[str, Any]]] = {
    "one_minus_gamma": _one_minus("gamma"),
    "one_minus_gae_lambda": _one_minus("gae_lambda"),
    "n_steps_pow": _power_of_two("n_steps"),
    "batch_size_pow": _power_of_two("batch_size"),
    "net_arch": lambda x: {"actor_hidden_units": _NET_ARCH[x], "critic_hidden_units": _NET_ARCH[x]},
    "activation_fn": lambda x: {"activation": x},
}
_ZOO_CHOICES = {"net_arch": tuple(_NET_ARCH), "activation_fn": ("tanh", "relu", "elu", "leaky_relu")}
_TYPES = ("float", "int", "categorical")
_KEYS = {"float": {"low", "high", "log", "step"}, "int": {"low", "high", "log", "step"}, "categorical": {"choices"}}


@dataclass(frozen=True)
class Distribution:
    """One parameter's distribution: Optuna's `suggest_float` / `suggest_int` / `suggest_categorical` arguments."""

    kind: str
    low: float | None = None
    high: float | None = None
    log: bool = False
    step: float | None = None
    choices: tuple = ()

    def suggest(self, trial: Any, name: str) -> Any:
        if self.kind == "categorical":
            return trial.suggest_categorical(name, list(self.choices))
        if self.kind == "int":
            low, high = int(self.low or 0), int(self.high or 0)
            return trial.suggest_int(name, low, high, step=int(self.step or 1), log=self.log)
        return trial.suggest_float(name, self.low, self.high, step=self.step, log=self.log)

    def values(self) -> list:
        """The values a check builds a Config from: the bounds, or every choice."""
        return list(self.choices) if self.kind == "categorical" else [self.low, self.high]

    def to_dict(self) -> dict[str, Any]:
        if self.kind == "categorical":
            return {"type": "categorical", "choices": list(self.choices)}
        out: dict[str, Any] = {"type": self.kind, "low": self.low, "high": self.high}
        if self.log:
            out["log"] = True
        if self.step is not None:
            out["step"] = self.step
        return out


@dataclass(frozen=True)
class SearchSpace:
    """Parameter name -> distribution, in the file's order; `fields` maps each to the Config fields it sets;
    `constants`: Config changes every trial takes (RL-Zoo's space: its sampled rates are constants)."""

    params: dict[str, Distribution]
    fields: dict[str, tuple[str, ...]]
    constants: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    sb3_budget: bool = False  # a trial trains whole rollouts until its budget is reached (SB3's `learn` counting)

    def suggest(self, trial: Any) -> dict[str, Any]:
        """A trial's parameters (an enqueued trial returns its fixed values)."""
        return {name: dist.suggest(trial, name) for name, dist in self.params.items()}

    def apply(self, config: Config, params: Mapping[str, Any]) -> Config:
        """`config` with a trial's parameters (any spelling, RL-Zoo's derived ones) applied and validated."""
        changes = {**self.constants, **changes_of(params)}
        if self.sb3_budget:
            changes["total_timesteps"] = _sb3_budget(config, changes)
        return config.replace(**changes)

    @property
    def batches(self) -> bool:
        """True when every parameter sets only sweepable fields (trials then differ only in what a population
        member may)."""
        return all(set(fields) <= set(SWEEPABLE) for fields in self.fields.values())

    def to_dict(self) -> dict[str, dict]:
        return {name: dist.to_dict() for name, dist in self.params.items()}


def _sb3_budget(config: Config, changes: Mapping[str, Any]) -> int:
    """`config.total_timesteps` rounded up to whole rollouts of the changed config, as SB3's `learn` counts: it
    collects rollouts until the budget is reached, so a rollout longer than the budget still trains once."""
    kppo = translate(changes, Config.__dataclass_fields__, config.to_dict())
    rollout = int(kppo.get("num_envs", config.num_envs)) * int(kppo.get("num_steps", config.num_steps))
    return -(-config.total_timesteps // rollout) * rollout


def changes_of(params: Mapping[str, Any]) -> dict[str, Any]:
    """A trial's parameters as Config changes (RL-Zoo's derived parameters expanded)."""
    changes: dict[str, Any] = {}
    for name, value in params.items():
        for field, field_value in (ZOO_PARAMS[name](value) if name in ZOO_PARAMS else {name: value}).items():
            if field in changes:
                raise ValueError(f"space: {field!r} is set by two parameters (again by {name!r})")
            changes[field] = field_value
    return changes


def _number(where: str, value: Any) -> float:
    if isinstance(value, str):  # YAML 1.1 reads 1e-4 (no dot, no sign) as a string, as Config's fields accept it
        try:
            value = float(value)
        except ValueError:
            raise ValueError(f"{where}: expected a finite number, got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not is_finite(value):
        raise ValueError(f"{where}: expected a finite number, got {value!r}")
    return value


def _distribution(where: str, spec: Any) -> Distribution:
    if not isinstance(spec, Mapping):
        raise ValueError(f"{where}: expected a mapping like {{type: float, low: 0.1, high: 1.0}}, got {spec!r}")
    kind = spec.get("type")
    if kind not in _TYPES:
        raise ValueError(f"{where}.type: expected one of {', '.join(_TYPES)}, got {kind!r}")
    unknown = sorted(map(str, set(spec) - _KEYS[kind] - {"type"}))  # str: the keys may be of several types
    if unknown:
        raise ValueError(f"{where}: a {kind} distribution takes {', '.join(sorted(_KEYS[kind]))}, got {unknown}")
    if kind == "categorical":
        choices = spec.get("choices")
        if not isinstance(choices, list) or not choices:
            raise ValueError(f"{where}.choices: expected a non-empty list, got {choices!r}")
        for choice in choices:
            if choice is not None and not isinstance(choice, (bool, int, float, str)):
                raise ValueError(f"{where}.choices: expected numbers, strings, booleans or null, got {choice!r}")
        return Distribution("categorical", choices=tuple(choices))
    for key in ("low", "high"):
        if key not in spec:
            raise ValueError(f"{where}.{key}: expected a number, got nothing")
    low, high = _number(f"{where}.low", spec["low"]), _number(f"{where}.high", spec["high"])
    log, step = spec.get("log", False), spec.get("step")
    if not isinstance(log, bool):
        raise ValueError(f"{where}.log: expected true or false, got {log!r}")
    if kind == "int" and not (isinstance(low, int) and isinstance(high, int)):
        raise ValueError(f"{where}: an int distribution expects integer bounds, got low={low!r}, high={high!r}")
    if low > high:
        raise ValueError(f"{where}: expected low <= high, got low={low!r}, high={high!r}")
    if log and low <= 0:
        raise ValueError(f"{where}.low: expected > 0 on a log scale, got {low!r}")
    if step is not None and (_number(f"{where}.step", step) <= 0 or log):
        raise ValueError(f"{where}.step: expected a positive step without log, got step={step!r}, log={log}")
    return Distribution(kind, low, high, log, step)


def _fields(where: str, name: str, probe: Any) -> tuple[str, ...]:
    """The Config fields parameter `name` sets (one-line errors for an unknown name or a field that cannot vary)."""
    try:
        changes = ZOO_PARAMS[name](probe) if name in ZOO_PARAMS else {name: probe}
        fields = tuple(translate(changes, Config.__dataclass_fields__))
    except ValueError as err:
        also = "" if name in ZOO_PARAMS else f" (or one of RL-Zoo's {', '.join(ZOO_PARAMS)})"
        raise ValueError(f"{where}: {err}{also}") from None
    fixed = [field for field in fields if field in FIXED]
    if fixed:
        raise ValueError(f"{where}: {fixed[0]} cannot vary in a search (fixed: {', '.join(FIXED)})")
    return fields


def _check_zoo_choices(where: str, name: str, dist: Distribution) -> None:
    if name in _ZOO_CHOICES:
        wrong = [v for v in dist.values() if v not in _ZOO_CHOICES[name]]
        if wrong or dist.kind != "categorical":
            raise ValueError(
                f"{where}: expected choices among {list(_ZOO_CHOICES[name])}, got {(wrong or [dist])[0]!r}"
            )


def _check_values(where: str, base: Config, name: str, dist: Distribution, sb3_budget: bool) -> None:
    """Every bound or choice makes a valid Config from `base` (a one-line error naming the value otherwise)."""
    for value in dist.values():
        try:
            SearchSpace({}, {}, sb3_budget=sb3_budget).apply(base, {name: value})
        except ValueError as err:
            raise ValueError(f"{where}: the value {value!r} makes no valid config ({err})") from None


def parse_space(values: Any, base: Config, source: str = "space", *, sb3_budget: bool = False) -> SearchSpace:
    """A checked SearchSpace from a mapping (`source` names it in errors; `sb3_budget`: see `SearchSpace`)."""
    if not isinstance(values, Mapping) or not values:
        raise ValueError(f"{source}: expected a mapping of field: {{type: ..., ...}}, got {values!r}")
    params: dict[str, Distribution] = {}
    fields: dict[str, tuple[str, ...]] = {}
    seen: dict[str, str] = {}
    for name, spec in values.items():
        where = f"{source}: {printable(name) if isinstance(name, str) else repr(name)}"
        if not isinstance(name, str):
            raise ValueError(f"{source}: expected field names as strings, got {name!r}")
        dist = _distribution(where, spec)
        _check_zoo_choices(where, name, dist)
        fields[name] = _fields(where, name, dist.values()[0])
        for field in fields[name]:
            if field in seen:
                raise ValueError(f"{where}: sets {field!r}, which {seen[field]!r} sets too")
            seen[field] = name
        _check_values(where, base, name, dist, sb3_budget)
        params[name] = dist
    return SearchSpace(params, fields, sb3_budget=sb3_budget)


def load_space(path_or_text: str | Path, base: Config) -> SearchSpace:
    """A search space from a YAML file (or YAML text); errors name the file and line."""
    text, source = read_text(path_or_text)
    try:
        values = load_yaml(text)
    except yaml.YAMLError as err:
        raise ValueError(f"space YAML {source}: could not parse {yaml_problem(err)}") from None
    return parse_space(values, base, f"space YAML {source}")


def default_space(base: Config) -> SearchSpace:
    """RL-Zoo's PPO search (`rl_zoo3.hyperparams_opt.sample_ppo_params`, rl_zoo3 2.9.2), under its names, with
    RL-Zoo's meaning: a sampled learning rate or clip range is a constant (it replaces the base's `lin_0.001`), and a
    trial trains whole rollouts until its budget is reached, as SB3's `learn` counts (n_steps up to 4096)."""
    space = parse_space(
        {
            "batch_size_pow": {"type": "int", "low": 2, "high": 10},
            "n_steps_pow": {"type": "int", "low": 5, "high": 12},
            "one_minus_gamma": {"type": "float", "low": 0.0001, "high": 0.03, "log": True},
            "one_minus_gae_lambda": {"type": "float", "low": 0.0001, "high": 0.1, "log": True},
            "learning_rate": {"type": "float", "low": 1e-5, "high": 0.002, "log": True},
            "ent_coef": {"type": "float", "low": 1e-8, "high": 0.1, "log": True},
            "clip_range": {"type": "categorical", "choices": [0.1, 0.2, 0.3, 0.4]},
            "n_epochs": {"type": "categorical", "choices": [1, 5, 10, 20]},
            "max_grad_norm": {"type": "float", "low": 0.3, "high": 2.0},
            "net_arch": {"type": "categorical", "choices": ["tiny", "small", "medium"]},
            "activation_fn": {"type": "categorical", "choices": ["tanh", "relu"]},
        },
        base,
        "the default space",
        sb3_budget=True,
    )
    return dataclasses.replace(space, constants={"lr_schedule": "constant", "clip_schedule": "constant"})
