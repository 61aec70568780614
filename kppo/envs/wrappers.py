"""Episode bookkeeping around a `Task`: time limit + same-step auto-reset, fixed initial states,
staggered step counters, and episode statistics. Each keeps its state explicit (purejaxrl-style wrappers)."""

from __future__ import annotations

from typing import Any, NamedTuple

from kppo._tf import tf
from kppo.envs.base import StepResult, Task, VecEnv, select


class EnvState(NamedTuple):
    """State of a `TimeLimitAutoReset` env. `init` is the task state each env started its first episode from."""

    task: Any
    time: tf.Tensor  # int32 [num_envs], steps taken in the current episode
    init: Any


class EpisodeStatsState(NamedTuple):
    """Per-env running episode return and length, beside the wrapped env's state (carried by `EpisodeStatistics`)."""

    env: Any
    episode_return: tf.Tensor  # float32 [num_envs], running return of the current episode
    episode_length: tf.Tensor  # int32 [num_envs]
    returned_episode_return: tf.Tensor  # float32 [num_envs], return of the last finished episode
    returned_episode_length: tf.Tensor  # int32 [num_envs]


class Wrapper(VecEnv):
    """Delegates everything to `env`; subclasses override what they change."""

    def __init__(self, env: VecEnv):
        self.env = env
        self.observation_space = env.observation_space
        self.action_space = env.action_space
        self.max_episode_steps = env.max_episode_steps
        self.dtype = env.dtype

    def reset(self, key, num_envs):
        return self.env.reset(key, num_envs)

    def step(self, state, action, key):
        return self.env.step(state, action, key)

    def action_mask(self, state):
        return self.env.action_mask(state)

    @property
    def unwrapped(self) -> VecEnv:
        return self.env.unwrapped

    def __getattr__(self, name: str):
        # Only reached for attributes not found normally (e.g. `task`).
        if name == "env":
            raise AttributeError(name)
        return getattr(self.env, name)


class TimeLimitAutoReset(VecEnv):
    """Time limit like gymnasium's TimeLimit, except that `truncated` is False where `terminated` (gymnasium sets
    both when an episode terminates on its last allowed step); resets finished environments on the same step and
    returns the final observation separately."""

    def __init__(self, task: Task, max_episode_steps: int | None = None):
        self.task = task
        self.observation_space = task.observation_space
        self.action_space = task.action_space
        self.max_episode_steps = int(max_episode_steps or task.max_episode_steps)
        if self.max_episode_steps <= 0:
            raise ValueError(f"max_episode_steps: expected a positive int, got {self.max_episode_steps}")
        self.dtype = task.dtype

    def reset(self, key, num_envs):
        task_state = self.task.initial_state(key, num_envs)
        state = EnvState(task=task_state, time=tf.zeros([num_envs], tf.int32), init=task_state)
        return state, self.task.observe(task_state)

    def action_mask(self, state):
        return self.task.action_mask(state.task)

    def step(self, state, action, key):
        num_envs = state.time.shape[0] or tf.shape(state.time)[0]  # static when known, else dynamic
        return self.step_with_reset(state, action, self.task.initial_state(key, num_envs))

    def step_with_reset(self, state: EnvState, action: tf.Tensor, reset_task_state: Any) -> StepResult:
        """`step`, with the task state that finished environments restart from given explicitly."""
        next_task, reward, terminated = self.task.transition(state.task, action)
        time = state.time + 1
        truncated = tf.logical_and(time >= self.max_episode_steps, tf.logical_not(terminated))
        done = tf.logical_or(terminated, truncated)
        final_obs = self.task.observe(next_task)
        task_state = select(done, reset_task_state, next_task)
        new_state = EnvState(task=task_state, time=tf.where(done, tf.zeros_like(time), time), init=state.init)
        obs = select(done, self.task.observe(reset_task_state), final_obs)
        return StepResult(new_state, obs, reward, terminated, truncated, final_obs)


class FixedInit(Wrapper):
    """rex's FIXED_INIT: every environment restarts from the initial state it sampled at `reset`."""

    def __init__(self, env: TimeLimitAutoReset):
        if not isinstance(env, TimeLimitAutoReset):
            raise TypeError(f"FixedInit: expected a TimeLimitAutoReset env, got {type(env).__name__}")
        super().__init__(env)

    def step(self, state, action, key):
        del key  # nothing is sampled: the reset state is the stored initial state
        return self.env.step_with_reset(state, action, state.init)


class OffsetStep(Wrapper):
    """rex's OFFSET_STEP: env i's step counter starts at i * max_episode_steps // num_envs, so time-limit
    truncations are staggered across environments instead of all landing on the same step."""

    def reset(self, key, num_envs):
        state, obs = self.env.reset(key, num_envs)
        offsets = tf.range(num_envs, dtype=tf.int32) * self.max_episode_steps // num_envs
        return state._replace(time=offsets), obs


class EpisodeStatistics(Wrapper):
    """Tracks each environment's running episode return/length and keeps those of its last finished episode
    (purejaxrl's LogWrapper). Read `state.returned_episode_*` where `terminated | truncated`."""

    def reset(self, key, num_envs):
        env_state, obs = self.env.reset(key, num_envs)
        zeros_f, zeros_i = tf.zeros([num_envs], tf.float32), tf.zeros([num_envs], tf.int32)
        return EpisodeStatsState(env_state, zeros_f, zeros_i, zeros_f, zeros_i), obs

    def action_mask(self, state):
        return self.env.action_mask(state.env)

    def step(self, state, action, key):
        result = self.env.step(state.env, action, key)
        done = tf.logical_or(result.terminated, result.truncated)
        episode_return = state.episode_return + tf.cast(result.reward, tf.float32)
        episode_length = state.episode_length + 1
        new_state = EpisodeStatsState(
            env=result.state,
            episode_return=tf.where(done, tf.zeros_like(episode_return), episode_return),
            episode_length=tf.where(done, tf.zeros_like(episode_length), episode_length),
            returned_episode_return=tf.where(done, episode_return, state.returned_episode_return),
            returned_episode_length=tf.where(done, episode_length, state.returned_episode_length),
        )
        return result._replace(state=new_state)


def wrap(
    task: Task,
    *,
    max_episode_steps: int | None = None,
    fixed_init: bool = False,
    offset_step: bool = False,
    episode_statistics: bool = True,
) -> VecEnv:
    """Turns a `Task` into a trainable `VecEnv`: time limit + auto-reset, then the optional wrappers."""
    limited = TimeLimitAutoReset(task, max_episode_steps)
    env: VecEnv = FixedInit(limited) if fixed_init else limited
    if offset_step:
        env = OffsetStep(env)
    if episode_statistics:
        env = EpisodeStatistics(env)
    return env
