"""Population-based training (Jaderberg et al. 2017) inside one compiled population on a TF-native env.

N members start from values sampled from the space (sweepable fields only) and train as one `kppo.train`
population. Every `interval` evaluation rounds, between two compiled calls, each member of the bottom `quantile`
(by the round's return) becomes a copy of a member of the top quantile — its weights, Adam state, normalization
statistics, env states and random key, everything a member carries, with the key folded so the copy draws its own
numbers — and perturbs its values: each x0.8 or x1.2 (clipped to the space; a categorical moves to a neighbouring
choice), or with probability `resample_probability` a fresh draw from the space. No member restarts and nothing
retraces: the members' values are variables of the program. The lineage goes to `pbt.csv`, the best member's values
to `best.yaml`, and its schedule (the values it and its ancestors trained with, from which step) to
`best_schedule.yaml`.

Gymnasium populations are not supported: their envs' states live in Python processes, which cannot be copied.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import yaml

from kppo import envs as envs_lib
from kppo._tf import tf
from kppo.core import counter_rng
from kppo.config.options import SWEEPABLE, Config
from kppo.config.spellings import translate
from kppo.envs.base import VecEnv
from kppo.training.train import train
from kppo.tuning.space import Distribution, SearchSpace, changes_of

__all__ = ["PBTResult", "copy_member", "explore", "pbt", "set_member_values"]

FACTORS = (0.8, 1.2)


class PBTResult(NamedTuple):
    best_value: float
    best_params: dict[str, Any]
    best_config: Config
    schedule: list[dict[str, Any]]  # the best member's values, each from the step it took them
    lineage: list[dict[str, Any]]  # one row per copy
    returns: np.ndarray  # float [rounds, members]: each round's evaluation return
    population: Any  # kppo.training.results.PopulationResult
    out: Path


def _row(x: tf.Tensor, loser: int, donor: int) -> tf.Tensor:
    """`x` with row `loser` replaced by row `donor` (leading member axis; an empty leaf, e.g. no gSDE noise, as is)."""
    if x.shape.num_elements() == 0:
        return x
    rows = tf.equal(tf.range(tf.shape(x)[0]), loser)
    return tf.where(tf.reshape(rows, [-1] + [1] * (x.shape.rank - 1)), x[donor], x)


def copy_member(runner: Any, state: Any, loser: int, donor: int, salt: int) -> Any:
    """Member `loser` becomes member `donor`: its weights and Adam state (the population's variables) and its
    runner state; its key is the donor's folded with `salt` (so the copy draws its own numbers). Returns the state."""
    weights = runner.population.weights
    for variable in [*weights.params, *weights.m, *weights.v, weights.steps]:
        variable.assign(_row(tf.convert_to_tensor(variable), loser, donor))
    state = tf.nest.map_structure(lambda x: _row(x, loser, donor), state)
    key = counter_rng.fold_in(state.key[donor], salt)
    return state._replace(key=tf.where(tf.equal(tf.range(tf.shape(state.key)[0]), loser)[:, None], key, state.key))


def set_member_values(runner: Any, member: int, values: dict[str, float]) -> None:
    """Member `member`'s sweepable hyperparameters (Config field -> value), assigned in the program's variables."""
    for name, value in values.items():
        variable = getattr(runner.population.values, name)
        variable.assign(tf.tensor_scatter_nd_update(variable, [[member]], [float(value)]))


def _draw(dist: Distribution, rng: np.random.Generator) -> Any:
    if dist.kind == "categorical":
        return dist.choices[int(rng.integers(len(dist.choices)))]
    low, high = float(dist.low or 0.0), float(dist.high or 0.0)
    value = math.exp(rng.uniform(math.log(low), math.log(high))) if dist.log else rng.uniform(low, high)
    return round(value) if dist.kind == "int" else float(value)


def _perturb(dist: Distribution, value: Any, rng: np.random.Generator) -> Any:
    if dist.kind == "categorical":
        index = dist.choices.index(value) + int(rng.choice([-1, 1]))
        return dist.choices[min(max(index, 0), len(dist.choices) - 1)]
    moved = float(np.clip(value * rng.choice(FACTORS), dist.low, dist.high))
    return round(moved) if dist.kind == "int" else moved


def explore(space: SearchSpace, params: dict[str, Any], rng: np.random.Generator, resample: float) -> dict[str, Any]:
    """Perturbed parameters: each x0.8 / x1.2 (a neighbouring choice), or with probability `resample` redrawn."""
    return {
        name: _draw(dist, rng) if rng.random() < resample else _perturb(dist, params[name], rng)
        for name, dist in space.params.items()
    }


def _is_builtin(env: Any) -> bool:
    try:
        envs_lib.resolve_name(env)
        return True
    except (ValueError, TypeError):
        return False


def _check(env: Any, base: Config, space: SearchSpace, members: int, interval: int, quantile: float) -> None:
    if not 0 < quantile <= 0.5:  # NaN fails this too
        raise ValueError(f"--pbt-quantile: expected a fraction in (0, 0.5], got {quantile!r}")
    if not space.batches:
        fields = sorted({f for fs in space.fields.values() for f in fs} - set(SWEEPABLE))
        raise ValueError(f"--pbt: a member's values must be sweepable ({', '.join(SWEEPABLE)}), got {fields}")
    if not isinstance(env, VecEnv) and not (base.env_backend != "gymnasium" and _is_builtin(env)):
        raise ValueError(f"--pbt: needs a TF-native env (member envs are copied), got {env!r}")
    if members < 2 or interval < 1:
        raise ValueError(f"--pbt: expected --batch >= 2 and --pbt-interval >= 1, got {members} and {interval}")


@dataclass
class _Exploit:
    """The `between_rounds` hook: rank, copy, perturb, and keep the lineage and schedules."""

    space: SearchSpace
    params: list[dict[str, Any]]
    interval: int
    quantile: float
    resample: float
    rng: np.random.Generator
    rounds: int
    steps_per_round: list[int] = field(default_factory=list)
    returns: list[np.ndarray] = field(default_factory=list)
    lineage: list[dict[str, Any]] = field(default_factory=list)
    schedules: list[list[dict[str, Any]]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.schedules = [[{"from_step": 0, **p}] for p in self.params]

    def __call__(self, runner: Any, state: Any, row: dict) -> Any:
        returns = np.atleast_1d(np.asarray(row["eval/mean_returns"], np.float64))
        self.returns.append(returns)
        done = len(self.returns)
        if done % self.interval or done >= self.rounds:
            return state
        step = int(row["train/total_steps"])
        order = np.argsort(returns, kind="stable")
        count = max(1, int(len(returns) * self.quantile))
        for rank, loser in enumerate(order[:count]):
            donor = int(self.rng.choice(order[-count:]))
            new = explore(self.space, self.params[donor], self.rng, self.resample)
            state = copy_member(runner, state, int(loser), donor, salt=done * 1_000 + rank)
            set_member_values(runner, int(loser), translate(changes_of(new), Config.__dataclass_fields__))
            self.lineage.append(
                {"round": done, "step": step, "member": int(loser), "donor": donor, "return": returns[loser],
                 "donor_return": returns[donor], **{f"old_{k}": v for k, v in self.params[loser].items()},
                 **{f"new_{k}": v for k, v in new.items()}}
            )  # fmt: skip
            self.params[int(loser)] = new
            self.schedules[int(loser)] = [*self.schedules[donor], {"from_step": step, **new}]
        return state


def _write(out: Path, hook: _Exploit, best_config: Config, best: int) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with (out / "pbt.csv").open("w", newline="") as f:
        names = list(hook.lineage[0]) if hook.lineage else ["round", "step", "member", "donor"]
        writer = csv.DictWriter(f, fieldnames=names)
        writer.writeheader()
        writer.writerows(hook.lineage)
    best_config.to_yaml(out / "best.yaml")
    schedule = [
        {k: (float(v) if isinstance(v, (float, np.floating)) else v) for k, v in s.items()}
        for s in hook.schedules[best]
    ]
    (out / "best_schedule.yaml").write_text(yaml.safe_dump(schedule, sort_keys=False))


def pbt(
    env: Any,
    base: Config,
    space: SearchSpace,
    *,
    members: int = 8,
    interval: int = 2,
    quantile: float = 0.25,
    resample_probability: float = 0.25,
    seed: int = 0,
    initial: list[dict[str, Any]] | None = None,
    out: str | Path = "pbt",
) -> PBTResult:
    """Population-based training of `members` members of `base` on `env` (see the module docstring).

    Args:
        interval: evaluation rounds between two exploit/explore steps (`base.eval_freq` rounds in all).
        seed: the generator of the initial draws, donors and perturbations; members train seeds base.seed + i.
        initial: the members' starting parameters (default: drawn from the space).
    """
    env = base.env if env is None else env
    _check(env, base, space, members, interval, quantile)
    rng = np.random.default_rng(seed)
    params = initial or [{name: _draw(d, rng) for name, d in space.params.items()} for _ in range(members)]
    configs = [space.apply(base, p).replace(seed=base.seed + i, verbose=0) for i, p in enumerate(params)]
    hook = _Exploit(space, [dict(p) for p in params], interval, quantile, resample_probability, rng, base.eval_rounds)
    result = train(env, configs, between_rounds=hook)
    last = hook.returns[-1]
    best = int(np.argmax(last))
    best_config = space.apply(base, hook.params[best])
    out = Path(out)
    _write(out, hook, best_config, best)
    return PBTResult(
        float(last[best]), hook.params[best], best_config, hook.schedules[best], hook.lineage,
        np.stack(hook.returns), result, out,
    )  # fmt: skip
