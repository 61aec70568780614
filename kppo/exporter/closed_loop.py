"""Closed-loop episodes for an artifact's report: the float policy and the artifact each play the same seeded
gymnasium episodes with deterministic actions (as Stable-Baselines3's `evaluate_policy` with
`deterministic=True`), several episodes stepped side by side with one batched call per step (`play`); while the
artifact plays, the float policy acts on the same observations (a recurrent one carrying its own state along the
artifact's episode), which gives the actions' agreement on the states the artifact visits.

Episode i is reset with seed `seed + i`, for the float policy and the artifact alike, so a float32 artifact plays
the float policy's episodes exactly.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple
from collections.abc import Callable

import gymnasium as gym
import numpy as np

from kppo.agent.policy import Policy
from kppo.exporter.calibration import policy_env
from kppo.gym_envs.action_masks import env_mask
from kppo.gym_envs.spaces import input_rows

MAX_STEPS = 1000  # an episode's length where its env sets no time limit
RECORDED_ROWS = 200  # the artifact's closed-loop inputs kept for TFLite Micro's replay

#: act(rows [N, *input_shape], raw observations (a batch; a Dict's: a dict of batches), masks bool [N, mask_size] or
#: None, state or None) -> (actions [N, ...], state); a state is a tuple of arrays [N, ...]
Act = Callable[[np.ndarray, Any, Any, Any], tuple[np.ndarray, Any]]


class Played(NamedTuple):
    """What `play` returns."""

    returns: list[float]  # one per episode, in seed order
    agreement: dict[str, float] | None  # the reference's actions vs the player's (see `agreement`)
    recorded: dict[str, np.ndarray]  # the player's first inputs: rows, masks, h, c (those present)
    steps: int


def interval(returns: list[float]) -> dict[str, Any]:
    """Mean, standard deviation and the 95% interval of the mean (Student's t, n - 1 degrees of freedom)."""
    values = np.asarray(returns, np.float64)
    mean = float(values.mean())
    std = float(values.std(ddof=1)) if len(values) > 1 else 0.0
    half = t_975(len(values) - 1) * std / math.sqrt(len(values)) if len(values) > 1 else float("inf")
    return {
        "mean": mean,
        "std": std,
        "ci95": [mean - half, mean + half],
        "half_width": half,
        "episodes": len(values),
        "returns": values.tolist(),
    }


def t_975(dof: int) -> float:
    """Student's t quantile 0.975 for `dof` >= 1 degrees of freedom (exact table to 5, a Cornish-Fisher series
    beyond: within 1e-3)."""
    table = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571}
    if dof in table:
        return table[dof]
    z = 1.959964
    return z + (z**3 + z) / (4 * dof) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * dof**2)


def policy_act(policy: Policy) -> Act:
    """The float policy's deterministic actions on raw observations, as `predict(deterministic=True)` computes
    them (`Policy.get_action`, numpy; a recurrent one's `Policy.step` with its state carried)."""

    def act(rows, raw, masks, state):
        if policy.lstm is None:
            return np.asarray(policy.get_action(raw, action_mask=masks)), None
        layers, units = policy.lstm.num_layers, policy.lstm.units
        sb3_state = (  # the carried [N, layers * units] as sb3-contrib's [layers, N, units]
            None if state is None else tuple(part.reshape(len(part), layers, units).swapaxes(0, 1) for part in state)
        )
        actions, (h, c) = policy.step(raw, sb3_state, None, None, masks)
        return np.asarray(actions), tuple(part.swapaxes(0, 1).reshape(part.shape[1], -1) for part in (h, c))

    return act


def artifact_act(run, recurrent: bool, units: int | None) -> Act:
    """An artifact runner's actions on input rows: `run(rows[, masks])`, or a recurrent artifact's
    `run(rows, h, c, masks) -> (actions, h, c)` with its state carried."""

    def act(rows, raw, masks, state):
        del raw
        float_masks = None if masks is None else np.asarray(masks, np.float32)
        if not recurrent:
            return np.asarray(run(rows) if float_masks is None else run(rows, float_masks)), None
        if state is None:
            state = (np.zeros((len(rows), units), np.float32),) * 2
        actions, h, c = run(rows, *state, float_masks)
        return np.asarray(actions), (np.asarray(h), np.asarray(c))

    return act


def make_envs(policy: Policy, env: Any, count: int) -> list[gym.Env] | None:
    """`count` envs from a gymnasium id or factory (one, reused, for an `Env` given as it is); None when `env`
    cannot be made or has other spaces than the policy."""
    if isinstance(env, gym.Env):
        made = policy_env(policy, env)
        return None if made is None else [made]
    envs: list[gym.Env] = []
    for _ in range(count):
        made = policy_env(policy, env)
        if made is None:
            for other in envs:
                other.close()
            return None
        envs.append(made)
    return envs


def env_name(env: Any) -> str:
    """A gymnasium id, or the env's class name."""
    if isinstance(env, str):
        return env
    made = env if isinstance(env, gym.Env) else None
    if made is not None and made.spec is not None:
        return made.spec.id
    return type(made.unwrapped).__name__ if made is not None else getattr(env, "__name__", type(env).__name__)


def _to_env(space: gym.spaces.Space, action: np.ndarray):
    """One row's action as the env takes it."""
    if isinstance(space, gym.spaces.Discrete):
        return int(np.asarray(action).reshape(-1)[0])
    return np.asarray(action).reshape(space.shape).astype(space.dtype)


class _Round(NamedTuple):
    envs: list[gym.Env]
    obs: list[Any]
    infos: list[dict]
    returns: list[float]
    done: list[bool]


def _step_round(policy, round_: _Round, active: list[int], actions: np.ndarray, steps: int, limit: int) -> None:
    for slot, i in enumerate(active):
        obs, reward, terminated, truncated, info = round_.envs[i].step(_to_env(policy.action_space, actions[slot]))
        round_.obs[i], round_.infos[i] = obs, info
        round_.returns[i] += float(reward)
        round_.done[i] = bool(terminated or truncated or steps >= limit)


def _take(state, active_before: list[int], active_now: list[int]):
    """A carried state (a tuple of [N, ...] arrays, or None) kept for the rows still playing."""
    if state is None:
        return None
    keep = [active_before.index(i) for i in active_now]
    return tuple(np.asarray(part)[keep] for part in state)


class _Agreement:
    """Running action agreement of the reference against the player."""

    def __init__(self, box: bool, span: np.ndarray | None):
        self.box, self.span = box, span
        self.equal = self.steps = 0
        self.max_error = self.sum_error = 0.0

    def add(self, got: np.ndarray, want: np.ndarray) -> None:
        got, want = np.asarray(got).reshape(len(got), -1), np.asarray(want).reshape(len(got), -1)
        self.steps += len(got)
        if self.box:
            error = np.abs(got.astype(np.float64) - want) / self.span
            self.max_error = max(self.max_error, float(error.max()))
            self.sum_error += float(error.max(axis=1).sum())
        else:
            self.equal += int((got == want).all(axis=1).sum())

    def result(self) -> dict[str, float]:
        if self.box:
            return {"max_error": self.max_error, "mean_error": self.sum_error / max(self.steps, 1), "steps": self.steps}
        return {"equal": self.equal / max(self.steps, 1), "steps": self.steps}


def _record(recorded: dict[str, list], rows, masks, state) -> None:
    room = RECORDED_ROWS - sum(len(r) for r in recorded["rows"])
    if room <= 0:
        return
    recorded["rows"].append(np.asarray(rows)[:room])
    if masks is not None:
        recorded["masks"].append(np.asarray(masks, np.float32)[:room])
    if state is not None:
        recorded["h"].append(np.asarray(state[0])[:room])
        recorded["c"].append(np.asarray(state[1])[:room])


def play(policy: Policy, envs: list[gym.Env], episodes: int, seed: int, act: Act, reference: Act | None = None):
    """`episodes` deterministic episodes of `act` in `envs` (as many side by side as there are envs; episode i reset
    with seed `seed + i`), capped at the env's time limit or `MAX_STEPS`: a `Played`. `reference`: acts on the same
    observations with its own state; its agreement with `act`: Box actions the largest and the mean (over steps,
    the largest dimension) error relative to the action range, others the fraction of steps with equal actions."""
    space = policy.action_space
    box = isinstance(space, gym.spaces.Box)
    span = (space.high - space.low).reshape(1, -1) if isinstance(space, gym.spaces.Box) else None
    agreement = _Agreement(box, span)
    recorded: dict[str, list] = {"rows": [], "masks": [], "h": [], "c": []}
    returns: list[float] = []
    total = 0
    while len(returns) < episodes:
        count = min(len(envs), episodes - len(returns))
        round_envs = envs[:count]
        starts = [env.reset(seed=seed + len(returns) + i) for i, env in enumerate(round_envs)]
        round_ = _Round(round_envs, [s[0] for s in starts], [s[1] for s in starts], [0.0] * count, [False] * count)
        limit = (round_envs[0].spec.max_episode_steps if round_envs[0].spec else None) or MAX_STEPS
        active, state, ref_state, steps = list(range(count)), None, None, 0
        while active:
            raw = _batch([round_.obs[i] for i in active])
            rows = _rows(policy, raw)
            masks = (
                np.stack([env_mask(round_.envs[i], round_.infos[i]) for i in active]) if policy.action_masks else None
            )
            _record(recorded, rows, masks, state if state is not None else _zeros(policy, len(rows)))
            actions, state = act(rows, raw, masks, state)
            if reference is not None:
                want, ref_state = reference(rows, raw, masks, ref_state)
                agreement.add(actions, want)
            steps += 1
            total += len(active)
            _step_round(policy, round_, active, actions, steps, limit)
            now = [i for i in active if not round_.done[i]]
            state, ref_state, active = _take(state, active, now), _take(ref_state, active, now), now
        returns += round_.returns
    kept = {name: np.concatenate(parts) for name, parts in recorded.items() if parts}
    return Played(returns, agreement.result() if reference is not None else None, kept, total)


def _batch(observations: list[Any]) -> Any:
    """Observations of one env each -> one batch (a Dict's: a dict of batches)."""
    if isinstance(observations[0], dict):
        return {key: np.stack([np.asarray(obs[key]) for obs in observations]) for key in observations[0]}
    return np.stack([np.asarray(obs) for obs in observations])


def _rows(policy: Policy, raw: Any) -> np.ndarray:
    """A batch of raw observations -> the policy's input rows (`Policy.input_row`, for the whole batch)."""
    if policy.image:
        return np.asarray(raw).astype(np.uint8)
    return input_rows(policy.observation_space, raw).astype(policy.input_dtype)


def _zeros(policy: Policy, rows: int):
    """A recurrent policy's state at an episode's start, for `_record` (None for others)."""
    if policy.lstm is None:
        return None
    return (np.zeros((rows, policy.lstm.state_size), np.float32),) * 2
