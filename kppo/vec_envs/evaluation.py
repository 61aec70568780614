"""`evaluate_policy`: play whole episodes with a model's `predict` and report their returns (Stable-Baselines3 2.x).

The model only needs `predict(observation, state=None, episode_start=None, deterministic=False) -> (actions, state)`
on raw observations: one observation for a single `gym.Env`, a batch for a `gym.vector.VectorEnv`.

Environments:
    - a gymnasium env id (str): made with `gym.make`, played episode after episode, closed afterwards.
    - a `gym.Env`: played episode after episode; it is reset at the start of every episode and not closed.
    - a `gym.vector.VectorEnv`: the episodes are split over the sub-envs as evenly as possible and fixed in
      advance (sub-env i plays `(n_eval_episodes + i) // num_envs` of them), as SB3 does to avoid favouring short
      episodes. Every autoreset mode is handled: NEXT_STEP (the step after an episode end only resets that
      sub-env and is not counted), SAME_STEP (the final step's info is in `info["final_info"]`) and DISABLED
      (finished sub-envs are reset with `reset(options={"reset_mask": ...})`).

Seeds: none. Every episode starts with a plain `reset()`, so a gymnasium env continues its own random stream; for
reproducible results seed the env once beforehand (`env.reset(seed=0)`).

Returns and lengths: when an episode ends with gymnasium's episode statistics in its info (`info["episode"]`, from
`gymnasium.wrappers.RecordEpisodeStatistics` or its vector version, SB3's `Monitor`), those are used, so wrappers
applied outside it (reward scaling, ...) do not change the result. Otherwise the rewards returned by `step` are
summed, and with `warn=True` a warning says so (not for an env made here from an id, which has no such wrappers).
"""

from __future__ import annotations

import warnings
from typing import Any, Literal, Protocol, overload
from collections.abc import Callable

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv

from kppo.gym_envs.action_masks import MaskReader, env_mask
from kppo.gym_envs.vector_info import sub_env_info
from kppo.gym_envs.vector import vector_env_of

StepCallback = Callable[[dict[str, Any], dict[str, Any]], Any]
EvalEnv = gym.Env | VectorEnv

__all__ = ["PolicyPredictor", "evaluate_policy"]


class PolicyPredictor(Protocol):
    """Anything with SB3's `predict`: raw observation(s) in, `(actions, state)` out."""

    def predict(
        self, observation: Any, state: Any = None, episode_start: Any = None, deterministic: bool = False
    ) -> tuple[Any, Any]: ...


@overload
def evaluate_policy(
    model: PolicyPredictor,
    env: str | EvalEnv,
    n_eval_episodes: int = ...,
    deterministic: bool = ...,
    render: bool = ...,
    callback: StepCallback | None = ...,
    reward_threshold: float | None = ...,
    return_episode_rewards: Literal[False] = ...,
    warn: bool = ...,
    use_masking: bool | None = ...,
) -> tuple[float, float]: ...


@overload
def evaluate_policy(
    model: PolicyPredictor,
    env: str | EvalEnv,
    n_eval_episodes: int = ...,
    deterministic: bool = ...,
    render: bool = ...,
    callback: StepCallback | None = ...,
    reward_threshold: float | None = ...,
    *,
    return_episode_rewards: Literal[True],
    warn: bool = ...,
    use_masking: bool | None = ...,
) -> tuple[list[float], list[int]]: ...


@overload
def evaluate_policy(
    model: PolicyPredictor,
    env: str | EvalEnv,
    n_eval_episodes: int = ...,
    deterministic: bool = ...,
    render: bool = ...,
    callback: StepCallback | None = ...,
    reward_threshold: float | None = ...,
    return_episode_rewards: bool = ...,
    warn: bool = ...,
    use_masking: bool | None = ...,
) -> tuple[float, float] | tuple[list[float], list[int]]: ...


def evaluate_policy(
    model: PolicyPredictor,
    env: str | EvalEnv,
    n_eval_episodes: int = 10,
    deterministic: bool = True,
    render: bool = False,
    callback: StepCallback | None = None,
    reward_threshold: float | None = None,
    return_episode_rewards: bool = False,
    warn: bool = True,
    use_masking: bool | None = None,
) -> tuple[float, float] | tuple[list[float], list[int]]:
    """Plays `n_eval_episodes` whole episodes with `model.predict` and returns their mean and std return.

    Args:
        model: anything with `predict(observation, state=None, episode_start=None, deterministic=False)`
            returning `(actions, state)`, taking raw observations.
        env: a gymnasium env id, a `gym.Env`, a `gym.vector.VectorEnv` or an SB3-style `kppo.VecEnv` (see the
            module docstring).
        n_eval_episodes: number of episodes to play (>= 1).
        deterministic: passed to `predict`.
        render: call `env.render()` after every step.
        callback: `callback(locals(), globals())`, called after every counted sub-env step, as SB3. The locals
            include `i` (sub-env index), `reward`, `done`, `info` (that sub-env's info; at an episode end its final
            info), `observations`, `actions`, `episode_counts` and `episode_count_targets`.
        reward_threshold: if given, raise AssertionError unless the mean return is >= it.
        return_episode_rewards: return the per-episode returns and lengths instead of mean and std.
        warn: warn when the env gave no episode statistics (see the module docstring).
        use_masking: pass the env's action masks to `predict(..., action_masks=...)` (sb3-contrib's maskable
            `evaluate_policy`): `action_masks()` or `info["action_mask"]`. None: when the model was trained with
            masks (its `config.action_masks`, or a `Policy`'s `action_masks`).

    Returns:
        `(mean_return, std_return)`, or `(episode_returns, episode_lengths)` (lists of `n_eval_episodes` floats
        and ints, in the order the episodes ended) with `return_episode_rewards=True`.

    Raises:
        ValueError: (one line) for a bad `env` or `n_eval_episodes`, or an unknown autoreset mode.
        AssertionError: (one line) when the mean return is below `reward_threshold`.
    """
    if isinstance(n_eval_episodes, bool) or not isinstance(n_eval_episodes, (int, np.integer)) or n_eval_episodes < 1:
        raise ValueError(f"n_eval_episodes: expected an int >= 1, got {n_eval_episodes!r}")
    env, owned = resolve_env(env)
    try:
        tally = _Tally(env.num_envs if isinstance(env, VectorEnv) else 1, int(n_eval_episodes))
        if use_masking is None:
            use_masking = trained_with_masks(model)
        if isinstance(env, VectorEnv):
            _play_vector(model, env, tally, deterministic, render, callback, use_masking)
        else:
            _play_single(model, env, tally, deterministic, render, callback, use_masking)
    finally:
        if owned:
            env.close()
    if warn and not owned and not tally.monitored:
        warnings.warn(_UNMONITORED_WARNING, UserWarning, stacklevel=2)
    return _summarize(tally, reward_threshold, return_episode_rewards)


def trained_with_masks(model: Any) -> bool:
    """Whether `model` (kppo.PPO / MaskablePPO, a PPOResult, a Policy) acts with action masks."""
    config = getattr(model, "config", None)
    return bool(getattr(config, "action_masks", False) or getattr(model, "action_masks", False) is True)


def resolve_env(env: str | EvalEnv) -> tuple[EvalEnv, bool]:
    """`(env, owned)`: an env id is made with `gym.make` (owned: the caller closes it); an env is used as is.

    Raises:
        ValueError: (one line) for anything else.
    """
    if isinstance(env, str):
        return gym.make(env), True
    vector = vector_env_of(env)
    if vector is not None:  # SB3's VecEnv interface (model.get_env()): the gymnasium vector env under it
        return vector, False
    if isinstance(env, (gym.Env, VectorEnv)):
        return env, False
    raise ValueError(f"env: expected a gymnasium env id, a gym.Env or a gym.vector.VectorEnv, got {type(env).__name__}")


def autoreset_mode(env: VectorEnv) -> AutoresetMode:
    """The vector env's `metadata["autoreset_mode"]` (gymnasium's default NEXT_STEP when missing)."""
    mode = env.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)
    try:
        return AutoresetMode(mode)
    except ValueError:
        raise ValueError(f"autoreset_mode: expected a gymnasium AutoresetMode, got {mode!r}") from None


_UNMONITORED_WARNING = (
    "evaluate_policy: the env reported no episode statistics (wrap it in gymnasium.wrappers.RecordEpisodeStatistics "
    "first); returns and lengths are summed from env.step, so wrappers that change rewards or end episodes early "
    "change them too (warn=False silences this)"
)


class _Tally:
    """Episode bookkeeping: how many episodes each sub-env owes, running sums, and the finished episodes."""

    def __init__(self, num_envs: int, n_eval_episodes: int):
        self.targets = np.array([(n_eval_episodes + i) // num_envs for i in range(num_envs)], dtype=np.int64)
        self.counts = np.zeros(num_envs, dtype=np.int64)
        self.current_rewards = np.zeros(num_envs, dtype=np.float64)
        self.current_lengths = np.zeros(num_envs, dtype=np.int64)
        self.episode_rewards: list[float] = []
        self.episode_lengths: list[int] = []
        self.monitored = False  # some finished episode carried gymnasium's episode statistics

    def unfinished(self) -> bool:
        return bool((self.counts < self.targets).any())

    def owes(self, i: int) -> bool:
        return bool(self.counts[i] < self.targets[i])

    def add_step(self, i: int, reward: Any) -> None:
        self.current_rewards[i] += float(reward)
        self.current_lengths[i] += 1

    def end_episode(self, i: int, info: dict[str, Any]) -> None:
        """Records sub-env i's episode (from `info["episode"]` when present) and restarts its sums."""
        stats = info.get("episode") if isinstance(info, dict) else None
        if isinstance(stats, dict) and "r" in stats and "l" in stats:
            self.monitored = True
            self.episode_rewards.append(float(np.asarray(stats["r"]).item()))
            self.episode_lengths.append(int(np.asarray(stats["l"]).item()))
        else:
            self.episode_rewards.append(float(self.current_rewards[i]))
            self.episode_lengths.append(int(self.current_lengths[i]))
        self.counts[i] += 1
        self.current_rewards[i] = 0.0
        self.current_lengths[i] = 0


def _play_single(
    model, env: gym.Env, tally: _Tally, deterministic: bool, render: bool, callback, use_masking: bool = False
) -> None:
    """Plays `tally.targets[0]` episodes one after another, with one observation per `predict` call."""
    i = 0
    episode_counts, episode_count_targets = tally.counts, tally.targets  # for `callback`'s locals
    while tally.unfinished():
        observations, info = env.reset()
        states, episode_start, done = None, True, False
        while not done:
            masks = {"action_masks": env_mask(env, info)} if use_masking else {}
            actions, states = model.predict(
                observations,
                state=states,
                episode_start=np.array([episode_start]),
                deterministic=deterministic,
                **masks,
            )
            observations, reward, terminated, truncated, info = env.step(actions)
            done, episode_start = bool(terminated or truncated), False
            tally.add_step(i, reward)
            if callback is not None:
                callback(locals(), globals())
            if done:
                tally.end_episode(i, info)
            if render:
                env.render()


def _play_vector(
    model, env: VectorEnv, tally: _Tally, deterministic: bool, render: bool, callback, use_masking: bool = False
) -> None:
    """Steps all sub-envs together until each has played its share of the episodes."""
    mode = autoreset_mode(env)
    episode_counts, episode_count_targets = tally.counts, tally.targets  # for `callback`'s locals
    observations, infos = env.reset()
    reader = MaskReader(env, env.single_action_space) if use_masking else None
    masks = {"action_masks": reader.reset(infos)} if reader else {}
    states = None
    episode_starts = np.ones(env.num_envs, dtype=bool)
    resetting = np.zeros(env.num_envs, dtype=bool)  # NEXT_STEP: sub-envs whose next step only resets them
    while tally.unfinished():
        actions, states = model.predict(
            observations, state=states, episode_start=episode_starts, deterministic=deterministic, **masks
        )
        observations, rewards, terminated, truncated, infos = env.step(actions)
        masks = {"action_masks": reader.step(infos)} if reader else {}
        dones = np.logical_or(terminated, truncated)
        for i in range(env.num_envs):
            if resetting[i] or not tally.owes(i):
                continue
            reward, done = rewards[i], bool(dones[i])
            info = _sub_env_info(infos, i, final=done and mode == AutoresetMode.SAME_STEP)
            tally.add_step(i, reward)
            if callback is not None:
                callback(locals(), globals())
            if done:
                tally.end_episode(i, info)
        if render:
            env.render()
        observations, episode_starts, resetting = _after_step(env, mode, tally, observations, dones, resetting)


def _after_step(env: VectorEnv, mode: AutoresetMode, tally: _Tally, observations, dones, resetting):
    """`(observations, episode_starts, resetting)` for the next step, resetting finished sub-envs if DISABLED."""
    if mode == AutoresetMode.SAME_STEP:
        return observations, dones, np.zeros_like(resetting)
    if mode == AutoresetMode.NEXT_STEP:
        # A sub-env that was resetting now shows its first observation; one that just ended resets next step.
        return observations, resetting, dones & ~resetting
    if dones.any() and tally.unfinished():
        observations, _ = env.reset(options={"reset_mask": np.asarray(dones, dtype=np.bool_)})
    return observations, dones, np.zeros_like(resetting)


def _sub_env_info(infos: dict[str, Any], i: int, final: bool = False) -> dict[str, Any]:
    """Sub-env i's info from a vector info dict; with `final`, its `final_info` entries (SAME_STEP) take priority."""
    info = sub_env_info(infos, i)
    if final and isinstance(info.get("final_info"), dict):
        info = {**info, **info["final_info"]}
    return info


def _summarize(tally: _Tally, reward_threshold: float | None, return_episode_rewards: bool):
    mean_reward = float(np.mean(tally.episode_rewards))
    std_reward = float(np.std(tally.episode_rewards))
    if reward_threshold is not None and not mean_reward >= reward_threshold:
        raise AssertionError(
            f"evaluate_policy: mean reward {mean_reward:.2f} is below reward_threshold {reward_threshold:.2f}"
        )
    if return_episode_rewards:
        return list(tally.episode_rewards), list(tally.episode_lengths)
    return mean_reward, std_reward
