"""The TF-native vectorized environment contract (pure, batched, stateless RNG).

A *task* holds only the physics of one episode, batched over environments:

    initial_state(key, num_envs) -> task_state
    observe(task_state) -> obs                      # [num_envs, *obs_shape]
    transition(task_state, action) -> (task_state, reward, terminated)

An *environment* (what `train` consumes) adds the episode bookkeeping and follows gymnax's contract:

    reset(key, num_envs) -> (state, obs)
    step(state, action, key) -> StepResult(state, obs, reward, terminated, truncated, final_obs)

Auto-reset happens on the same step: where `terminated | truncated`, `obs` is the first observation of the
next episode and `final_obs` the last observation of the finished one (used to bootstrap truncated
episodes, see `kppo.core.gae`). Everything is a `tf.Tensor` or a NamedTuple of them, so an environment runs
eagerly, inside `tf.function` and under XLA. `key` is a stateless-RNG seed, an int32 tensor of shape [2]. Draw from it
with `kppo.envs.counter_rng` (`uniform`, `uniform_int`, `normal`, `split`), as the built-in tasks do: the same key then
gives the same numbers eagerly, in `tf.function` and under XLA. TensorFlow's own `tf.random.stateless_*` ops draw other
numbers under XLA than in TF kernels, so with them a run repeats only under the same jit flags, and a population
member (compiled by XLA) matches its single run only in distribution.

`observation_space` / `action_space` are gymnasium spaces (metadata only: they describe one environment).
Actions arrive in env units: float [num_envs, act_dim] for Box, int32 [num_envs] for Discrete.

Action masks (optional): a task with Discrete or MultiDiscrete actions may implement
`action_mask(task_state) -> bool [num_envs, n]` (True = allowed; MultiDiscrete: the dimensions' masks concatenated),
the actions allowed at `observe(task_state)`; `VecEnv.action_mask(state)` forwards it, and None means no masks.

Writing your own task: subclass `Task`, set `observation_space`, `action_space`, `max_episode_steps`, and
implement the three methods with TF ops (see `tests/envs/test_custom_env.py` for a ten-line example);
`kppo.envs.wrap(task)` then gives a trainable environment.
"""

from __future__ import annotations

import abc
from typing import Any, NamedTuple

import gymnasium as gym

from kppo._tf import tf


class StepResult(NamedTuple):
    """What `VecEnv.step` returns; tensors are [num_envs, ...]."""

    state: Any
    obs: tf.Tensor
    reward: tf.Tensor
    terminated: tf.Tensor
    truncated: tf.Tensor
    final_obs: tf.Tensor


class Task(abc.ABC):
    """Batched physics of one episode. Subclasses set the three attributes below."""

    observation_space: gym.spaces.Space
    action_space: gym.spaces.Space
    max_episode_steps: int
    #: The gymnasium id whose dynamics this task reproduces (None for custom tasks).
    gym_id: str | None = None

    def __init__(self, dtype: tf.DType = tf.float32):
        self.dtype = tf.as_dtype(dtype)

    @abc.abstractmethod
    def initial_state(self, key: tf.Tensor, num_envs: int) -> Any:
        """Samples `num_envs` initial task states from the stateless seed `key` (int32 [2])."""

    @abc.abstractmethod
    def observe(self, state: Any) -> tf.Tensor:
        """Observation [num_envs, *obs_shape] of `state`, in `self.dtype`."""

    @abc.abstractmethod
    def transition(self, state: Any, action: tf.Tensor) -> tuple[Any, tf.Tensor, tf.Tensor]:
        """One step: returns (next_state, reward [num_envs] dtype, terminated [num_envs] bool)."""

    def action_mask(self, state: Any) -> tf.Tensor | None:
        """bool [num_envs, n]: the actions allowed in `state` (see the module docstring); None: no masks."""
        del state
        return None


class VecEnv(abc.ABC):
    """A batched TF-native environment following the contract in the module docstring."""

    observation_space: gym.spaces.Space
    action_space: gym.spaces.Space
    max_episode_steps: int
    dtype: tf.DType

    @abc.abstractmethod
    def reset(self, key: tf.Tensor, num_envs: int) -> tuple[Any, tf.Tensor]:
        """Returns (state, obs [num_envs, *obs_shape])."""

    @abc.abstractmethod
    def step(self, state: Any, action: tf.Tensor, key: tf.Tensor) -> StepResult:
        """Advances every environment one step, auto-resetting finished ones on the same step."""

    def action_mask(self, state: Any) -> tf.Tensor | None:
        """bool [num_envs, n]: the actions allowed at the current observations; None: the env has no masks."""
        del state
        return None

    @property
    def unwrapped(self) -> VecEnv:
        return self


def select(done: tf.Tensor, on_done: Any, otherwise: Any) -> Any:
    """Per-environment `where` over matching nests: `on_done` where done[i], else `otherwise`.

    Args:
        done: bool [num_envs].
        on_done: a nest of tensors with leading dimension num_envs, taken where done.
        otherwise: a nest of the same structure, taken elsewhere.
    """

    def _pick(a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
        mask = tf.reshape(done, [-1] + [1] * (len(a.shape) - 1))
        return tf.where(mask, a, b)

    return tf.nest.map_structure(_pick, on_done, otherwise)
