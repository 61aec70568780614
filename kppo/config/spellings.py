"""The other libraries' names for kppo's options: rex's UPPER_CASE names, SB3's and RL-Zoo's (`translate`), with
"did you mean" for a key that is none of them."""

from __future__ import annotations

import dataclasses
import difflib
import warnings
from collections.abc import Mapping
from typing import Any

from kppo.config.schedules import SCHEDULED, ZOO_PREFIXES
from kppo.config.values import as_bool, coerce


_REX_NAMES = {
    "LR": "learning_rate",
    "NUM_ENVS": "num_envs",
    "NUM_STEPS": "num_steps",
    "TOTAL_TIMESTEPS": "total_timesteps",
    "UPDATE_EPOCHS": "num_epochs",
    "NUM_MINIBATCHES": "num_minibatches",
    "GAMMA": "gamma",
    "GAE_LAMBDA": "gae_lambda",
    "CLIP_EPS": "clip_range",
    "ENT_COEF": "ent_coef",
    "VF_COEF": "vf_coef",
    "MAX_GRAD_NORM": "max_grad_norm",
    "NUM_HIDDEN_LAYERS": "num_hidden_layers",
    "NUM_HIDDEN_UNITS": "num_hidden_units",
    "KERNEL_INIT_TYPE": "kernel_init",
    "HIDDEN_ACTIVATION": "activation",
    "STATE_INDEPENDENT_STD": "state_independent_std",
    "SQUASH": "squash",
    "FIXED_INIT": "fixed_init",
    "OFFSET_STEP": "offset_step",
    "NUM_EVAL_ENVS": "num_eval_envs",
    "EVAL_FREQ": "eval_freq",
    "VERBOSE": "verbose",
    "DEBUG": "debug",
    "SEED": "seed",
}
_SB3_NAMES = {
    "n_envs": "num_envs",
    "n_steps": "num_steps",
    "n_epochs": "num_epochs",
    "squash_output": "squash",
    "norm_obs": "normalize_obs",
    "norm_reward": "normalize_reward",
    "n_timesteps": "total_timesteps",
    "env_id": "env",
}


def translate(
    values: Mapping[str, Any], fields: Mapping[str, dataclasses.Field], base: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Maps rex/SB3 spellings to kppo field names (the vocabulary in `kppo.config.options`' docstring).

    Special cases: rex `ANNEAL_LR` (bool) -> `lr_schedule`; rex `NORMALIZE_ENV` and SB3/zoo `normalize` -> both
    `normalize_obs` and `normalize_reward`; rex `CLIP_EPS` also sets `clip_range_vf` (rex clips values with it)
    unless `clip_range_vf` is given; SB3 `batch_size` (minibatch size) -> `num_minibatches`; RL-Zoo's
    `learning_rate: lin_2.5e-4`, `clip_range: lin_0.1` and `ent_coef: lin_0.01` -> the value with `lr_schedule` /
    `clip_schedule` / `ent_schedule` "linear".

    Raises:
        ValueError: a key that is no spelling of any option, or the same option given twice.

    `fields` are the Config's dataclass fields (names and defaults); `base`, the values that `values` change (what
    SB3's `batch_size` is read against when `values` give no `n_envs` / `n_steps`; the defaults without it).
    """
    names = set(fields)
    out: dict[str, Any] = {}
    minibatch_size = None

    def put(name: str, value: Any, given_as: str) -> None:
        if name in out:
            raise ValueError(f"config: option {name!r} given twice (again as {given_as!r})")
        out[name] = value

    for key, value in values.items():
        if not isinstance(key, str):
            raise ValueError(f"config: expected option names as strings, got {key!r}")
        if key in names:
            put(key, value, key)
        elif key in _REX_NAMES:
            put(_REX_NAMES[key], value, key)
            if key == "CLIP_EPS" and "clip_range_vf" not in values:
                out.setdefault("clip_range_vf", value)
        elif key in _SB3_NAMES:
            put(_SB3_NAMES[key], value, key)
        elif key == "ANNEAL_LR":
            put("lr_schedule", "linear" if as_bool("ANNEAL_LR", value) else "constant", key)
        elif key in ("NORMALIZE_ENV", "normalize"):
            flag = as_bool(key, value)
            put("normalize_obs", flag, key)
            put("normalize_reward", flag, key)
        elif key == "batch_size":
            minibatch_size = value
        else:
            raise ValueError(f"config: unknown option {key!r} (not a kppo, rex or SB3 name; {suggest(key, names)})")
    for name, number, schedule, kind in _zoo_schedules(out):
        put(schedule, kind, f"{name}: {out[name]}")
        out[name] = number
    if minibatch_size is not None:
        if "num_minibatches" in out:
            raise ValueError("config: give either batch_size (SB3 minibatch size) or num_minibatches, not both")
        out["num_minibatches"] = _num_minibatches({**(base or {}), **out}, fields, minibatch_size)
    return out


def _num_minibatches(out: dict[str, Any], fields: Mapping[str, dataclasses.Field], minibatch_size: Any) -> int:
    """SB3's `batch_size` (the minibatch size) as kppo's number of minibatches of the rollout."""
    num_envs = coerce("num_envs", "int", out.get("num_envs", fields["num_envs"].default))
    num_steps = coerce("num_steps", "int", out.get("num_steps", fields["num_steps"].default))
    size = coerce("batch_size", "int", minibatch_size)
    if size <= 0:
        raise ValueError(f"batch_size: expected an integer >= 1, got {size}")
    return minibatch_count(size, num_envs * num_steps)


def minibatch_count(batch_size: int, rollout: int) -> int:
    """SB3's `batch_size` (the minibatch size) -> the number of equal minibatches of a rollout of `rollout`
    transitions: the one rule, for a Config, an RL-Zoo file and `kppo.PPO`. When it does not divide the rollout,
    kppo takes the next count that cuts the rollout into equal minibatches and warns, since SB3 would add a
    truncated one; a batch_size of the rollout or more is one minibatch of the whole rollout, as in SB3 (no warning:
    the two agree)."""
    count = max(1, rollout // batch_size)
    if batch_size < rollout and rollout % batch_size:
        count = _divisor_from(rollout, count)  # kppo's minibatches have equal sizes
        warnings.warn(
            f"You have specified a mini-batch size of {batch_size}, but because the rollout is of size "
            f"n_steps * n_envs = {rollout}, kppo uses {count} equal minibatches of "
            f"{rollout // count} (SB3 would add a truncated mini-batch of {rollout % batch_size}).",
            stacklevel=3,
        )
    return count


#: The largest rollout `_divisor_from` factors (its trial division takes sqrt(rollout) steps: ~1e6 here).
_MAX_ROLLOUT = 2**40


def _divisor_from(rollout: int, low: int) -> int:
    """The smallest divisor of `rollout` that is >= `low`, by trial division up to its square root (counting up
    from `low` took `rollout` steps for a prime rollout: a 5.7e9-transition one never ended)."""
    if rollout > _MAX_ROLLOUT:
        raise ValueError(
            f"batch_size: expected a rollout of at most 2**40 transitions to cut into minibatches, got {rollout:,}"
        )
    best, d = rollout, 1
    while d * d <= rollout:
        if rollout % d == 0:
            best = min([best] + [c for c in (d, rollout // d) if c >= low])
        d += 1
    return best


def _zoo_schedules(out: dict[str, Any]) -> list[tuple[str, float, str, str]]:
    """(option, its number, its schedule field, the schedule) for each scheduled option given in RL-Zoo's spelling
    (`lin_<number>`: `kppo.config.schedules.ZOO_PREFIXES`)."""
    found = []
    for name, schedule in SCHEDULED.items():
        value = out.get(name)
        if not isinstance(value, str):
            continue
        for prefix, kind in ZOO_PREFIXES.items():
            if value.startswith(prefix):
                try:
                    found.append((name, float(value[len(prefix) :]), schedule, kind))
                except ValueError:
                    raise ValueError(f"{name}: expected a number or RL-Zoo's {prefix}<number>, got {value!r}") from None
    return found


def suggest(key: str, names: set[str]) -> str:
    """'did you mean ...?' for the option name nearest to `key` (any spelling, any case), else where to look."""
    spellings = {n.lower(): n for n in [*_REX_NAMES, *_SB3_NAMES, "ANNEAL_LR", "NORMALIZE_ENV", "batch_size", *names]}
    near = difflib.get_close_matches(key.lower(), spellings, n=1, cutoff=0.75)
    return f"did you mean {spellings[near[0]]!r}?" if near else "see kppo.Config"
