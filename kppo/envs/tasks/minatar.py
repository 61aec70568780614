"""What the TF-native MinAtar games share: sticky actions, per-env random draws and 10x10 grid observations.

MinAtar: Young & Tian 2019, https://arxiv.org/abs/1903.03176; reproduced from the `minatar` package 1.0.15
(`minatar/environment.py` for sticky actions, `minatar/environments/*.py` for the games).
"""

from __future__ import annotations

import abc
import math
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from kppo._tf import tf
from kppo.core import counter_rng
from kppo.envs.base import Task

#: `max_episode_steps` of the MinAtar tasks: int32's largest value, which the step counter of
#: `kppo.envs.TimeLimitAutoReset` never reaches in practice, so episodes end only where the game ends them.
NO_TIME_LIMIT = 2**31 - 1
#: gymnax's `max_steps_in_episode` for its MinAtar ports (its `EnvParams` default).
GYMNAX_MAX_EPISODE_STEPS = 1000
#: Cells per side of MinAtar's square grid.
GRID = 10
#: Bits of each random draw: draws are int32 in [0, 2**DRAW_BITS).
DRAW_BITS = 24
#: MinAtar's full action set (`Env.action_map`): no-op, left, up, right, down, fire.
ACTION_MAP = ("n", "l", "u", "r", "d", "f")

_GOLDEN = 0x9E3779B9  # 2**32 / golden ratio: consecutive counters of one env land far apart before mixing


def observation_space(num_channels: int) -> gym.spaces.Box:
    """Box(0, 1, (10, 10, num_channels), float32): MinAtar's boolean state() as floats."""
    return gym.spaces.Box(0.0, 1.0, (GRID, GRID, num_channels), np.float32)


def _mix(x: tf.Tensor) -> tf.Tensor:
    """A bijective 32-bit integer hash (Wellons' "lowbias32", https://nullprogram.com/blog/2018/07/31/)."""
    x = tf.bitwise.bitwise_xor(x, tf.bitwise.right_shift(x, 16))
    x = x * tf.constant(0x7FEB352D, tf.uint32)
    x = tf.bitwise.bitwise_xor(x, tf.bitwise.right_shift(x, 15))
    x = x * tf.constant(0x846CA68B, tf.uint32)
    return tf.bitwise.bitwise_xor(x, tf.bitwise.right_shift(x, 16))


def initial_rng(key: tf.Tensor, num_envs: int) -> tf.Tensor:
    """int32 [num_envs, 2]: each env's (stream key, counter), the key drawn from the stateless seed `key`."""
    stream = counter_rng.uniform_int(key, [num_envs])
    return tf.stack([stream, tf.zeros_like(stream)], axis=1)


def draw(rng: tf.Tensor, num_draws: int) -> tuple[tf.Tensor, tf.Tensor]:
    """`num_draws` uniform draws per env from the counter-based generator in `rng`.

    Each env owns a stream: draw k at counter c is the top 24 bits of mix(mix(c + k) ^ key), so the draws are the
    same eagerly, in `tf.function` and under XLA, and envs with different keys are independent.

    Args:
        rng: int32 [num_envs, 2], (key, counter) per env (see `initial_rng`).
        num_draws: draws per env, a Python int.

    Returns:
        (draws, next_rng): int32 [num_envs, num_draws] uniform in [0, 2**DRAW_BITS), and `rng` with the counter
        advanced by `num_draws`.
    """
    key, counter = tf.unstack(tf.bitcast(rng, tf.uint32), axis=1)
    offsets = np.arange(num_draws, dtype=np.uint64) * _GOLDEN % 2**32
    counters = counter[:, None] + tf.constant(offsets.astype(np.uint32))[None, :]
    bits = _mix(tf.bitwise.bitwise_xor(_mix(counters), key[:, None]))
    draws = tf.bitcast(tf.bitwise.right_shift(bits, 32 - DRAW_BITS), tf.int32)
    next_counter = counter + tf.constant((num_draws * _GOLDEN) % 2**32, tf.uint32)
    return draws, tf.bitcast(tf.stack([key, next_counter], axis=1), tf.int32)


def bernoulli(draws: tf.Tensor, p: float) -> tf.Tensor:
    """bool, True with probability p: draws below the number of 24-bit grid midpoints (m + 0.5) / 2**24 under p,
    which is where numpy's `rand() < p` is True when rand() returns those midpoints (the parity tests do)."""
    return draws < math.ceil(p * 2**DRAW_BITS - 0.5)


def randint(draws: tf.Tensor, n: tf.Tensor | int) -> tf.Tensor:
    """int32 uniform in [0, n) (n >= 1, at most 127): floor(draws * n / 2**24)."""
    return tf.bitwise.right_shift(draws * n, DRAW_BITS)


def points_plane(y: tf.Tensor, x: tf.Tensor, present: tf.Tensor | None = None) -> tf.Tensor:
    """bool [num_envs, 100]: the grid cells (row-major) holding a point (y, x) of some env.

    Args:
        y: int32 [num_envs] (one point per env) or [num_envs, k] (k points per env), the rows.
        x: int32, the columns, shaped as `y`.
        present: bool shaped as `y`, which points to draw; None: all.
    """
    cells = y * GRID + x
    if present is not None:
        cells = tf.where(present, cells, -1)
    all_cells = tf.range(GRID * GRID, dtype=tf.int32)
    if len(cells.shape) == 1:
        return tf.equal(cells[:, None], all_cells)
    return tf.reduce_any(tf.equal(cells[..., None], all_cells), axis=1)


def lanes_plane(x: tf.Tensor, present: tf.Tensor | None = None) -> tf.Tensor:
    """bool [num_envs, 10, 10]: one point per lane, lane i along row i + 1 (Asterix's slots, Freeway's cars).

    Args:
        x: int32 [num_envs, 8], each lane's column (outside 0..9: not drawn).
        present: bool [num_envs, 8], which lanes to draw; None: all.
    """
    lanes = tf.equal(x[..., None], tf.range(GRID, dtype=tf.int32))  # [num_envs, 8, 10]
    if present is not None:
        lanes &= present[..., None]
    empty = tf.zeros_like(lanes[:, :1])
    return tf.concat([empty, lanes, empty], axis=1)


def stack_planes(planes: Sequence[tf.Tensor], dtype: tf.DType) -> tf.Tensor:
    """[num_envs, 10, 10, C] in `dtype` from C bool planes, each [num_envs, 100] or [num_envs, 10, 10]."""
    flat = [tf.reshape(p, [-1, GRID * GRID]) for p in planes]
    return tf.cast(tf.reshape(tf.stack(flat, axis=-1), [-1, GRID, GRID, len(planes)]), dtype)


class MinAtarTask(Task):
    """A MinAtar game as a batched task: sticky actions around the game's own step.

    As in minatar's `Environment.act`, with probability `sticky_action_prob` the action executed is the previous
    one instead of the agent's (Machado et al. 2018, https://arxiv.org/abs/1709.06009). Actions index the game's
    minimal action set (minatar's `minimal_action_set()`, the ids `MinAtar/<Game>-v1`), int32 [num_envs].

    Subclasses set `observation_space`, `action_space`, `minimal_actions` and `num_draws`, and implement
    `initial_state`, `observe` and `game_step`; their state NamedTuples carry `last_action` (int32 [num_envs],
    the action executed last) and `rng` (int32 [num_envs, 2], see `draw`).
    """

    max_episode_steps = NO_TIME_LIMIT
    #: The game's minimal action set as minatar's action letters, in minatar's order.
    minimal_actions: tuple[str, ...]
    #: Random draws the game itself needs per step (the sticky-action draw comes on top).
    num_draws: int = 0
    #: Defaults of the constructor's arguments, which a variant such as the gymnax one overrides.
    sticky_action_prob: float = 0.1
    difficulty_ramping: bool = True

    def __init__(
        self,
        dtype: tf.DType = tf.float32,
        *,
        sticky_action_prob: float | None = None,
        difficulty_ramping: bool | None = None,
    ):
        """Validates and stores the settings.

        Args:
            dtype: float dtype of observations and rewards. Defaults to `tf.float32`.
            sticky_action_prob: probability of repeating the previous action. Defaults to the class's (0.1, minatar's).
            difficulty_ramping: whether the game speeds up over time where it does (Asterix, SpaceInvaders).
                Defaults to the class's (True, minatar's).

        Raises:
            ValueError: `sticky_action_prob` is outside [0, 1].
        """
        super().__init__(dtype)
        p = type(self).sticky_action_prob if sticky_action_prob is None else sticky_action_prob
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"sticky_action_prob: expected a probability in [0, 1], got {p!r}")
        self.sticky_action_prob = float(p)
        ramping = type(self).difficulty_ramping if difficulty_ramping is None else difficulty_ramping
        self.difficulty_ramping = bool(ramping)

    def minatar_actions(self) -> list[int]:
        """Indices into minatar's full action set of this task's actions (minatar's `minimal_action_set()`)."""
        return [ACTION_MAP.index(a) for a in self.minimal_actions]

    def draws(self, state: Any) -> tf.Tensor:
        """int32 [num_envs, 1 + num_draws]: the draws `transition(state, ...)` uses (column 0: sticky action)."""
        return draw(state.rng, 1 + self.num_draws)[0]

    def transition(self, state: Any, action: tf.Tensor) -> tuple[Any, tf.Tensor, tf.Tensor]:
        """One frame: the sticky action, then the game's step (see `transition_from_draws`)."""
        draws, rng = draw(state.rng, 1 + self.num_draws)
        return self.transition_from_draws(state._replace(rng=rng), action, draws)

    def transition_from_draws(
        self, state: Any, action: tf.Tensor, draws: tf.Tensor
    ) -> tuple[Any, tf.Tensor, tf.Tensor]:
        """`transition` with its random draws given: int32 [num_envs, 1 + num_draws] in [0, 2**24).

        Column 0 decides the sticky action (`bernoulli(draws[:, 0], sticky_action_prob)`); the game consumes the
        others in the order minatar calls its random generator (see each game's `game_step`).
        """
        action = tf.cast(action, tf.int32)
        if self.sticky_action_prob > 0.0:
            action = tf.where(bernoulli(draws[:, 0], self.sticky_action_prob), state.last_action, action)
        next_state, reward, terminated = self.game_step(state._replace(last_action=action), action, draws[:, 1:])
        return next_state, tf.cast(reward, self.dtype), terminated

    @abc.abstractmethod
    def game_step(self, state: Any, action: tf.Tensor, draws: tf.Tensor) -> tuple[Any, tf.Tensor, tf.Tensor]:
        """The game's `Env.act` on the executed action (int32 [num_envs], minimal-set index) and its draws
        (int32 [num_envs, num_draws]): returns (next_state, reward int32 [num_envs], terminated bool [num_envs])."""
