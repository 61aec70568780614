"""MinAtar Breakout as a TF-native task (`minatar/environments/breakout.py`, minatar 1.0.15)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np

from kppo._tf import tf
from kppo.core import counter_rng
from kppo.envs.tasks.minatar import (
    GRID,
    GYMNAX_MAX_EPISODE_STEPS,
    MinAtarTask,
    initial_rng,
    observation_space,
    points_plane,
    stack_planes,
)

_BRICK_ROWS = (1, 4)  # bricks only ever fill rows 1..3 (reset and refill both set brick_map[1:4, :])
_NUM_BRICKS = (_BRICK_ROWS[1] - _BRICK_ROWS[0]) * GRID
_ALL_BRICKS = 2**_NUM_BRICKS - 1


def _brick_bits() -> np.ndarray:
    """int32 [100]: the bit of each grid cell in the brick mask (0 outside the brick rows)."""
    bits = np.zeros((GRID, GRID), np.int64)
    bits[_BRICK_ROWS[0] : _BRICK_ROWS[1]] = 1 << np.arange(_NUM_BRICKS).reshape(-1, GRID)
    return bits.reshape(-1).astype(np.int32)


class BreakoutState(NamedTuple):
    """minatar's `Env` attributes, each [num_envs]; the brick map is a 30-bit mask over rows 1..3."""

    ball_x: tf.Tensor  # int32
    ball_y: tf.Tensor  # int32
    ball_dir: tf.Tensor  # int32: 0 up-left, 1 up-right, 2 down-right, 3 down-left
    pos: tf.Tensor  # int32, the paddle's column (row 9)
    last_x: tf.Tensor  # int32, the ball's previous cell (the trail)
    last_y: tf.Tensor  # int32
    bricks: tf.Tensor  # int32, bit 10 * (row - 1) + column set where a brick stands
    strike: tf.Tensor  # bool, the ball hit a brick on the previous frame
    last_action: tf.Tensor  # int32, the action executed last (minimal-set index)
    rng: tf.Tensor  # int32 [num_envs, 2]


class Breakout(MinAtarTask):
    """Bounce a ball off a paddle to break three rows of bricks; +1 per brick, a new wall once all are broken;
    the episode ends when the ball reaches the bottom row (MinAtar's Breakout).

    Observation channels: paddle, ball, trail, brick. Actions: 0 no-op, 1 left, 2 right.
    """

    gym_id: str | None = "MinAtar/Breakout-v1"
    observation_space = observation_space(4)
    action_space = gym.spaces.Discrete(3)
    minimal_actions = ("n", "l", "r")
    num_draws = 0

    def initial_state(self, key: tf.Tensor, num_envs: int) -> BreakoutState:
        """The ball at row 3, at column 0 heading down-right or column 9 heading down-left, with equal odds."""
        key_start, key_rng = tf.unstack(counter_rng.split(key, 2))
        start = counter_rng.uniform_int(key_start, [num_envs], 0, 2)
        ball_x, zeros = start * (GRID - 1), tf.zeros_like(start)
        return BreakoutState(
            ball_x=ball_x,
            ball_y=zeros + 3,
            ball_dir=start + 2,
            pos=zeros + 4,
            last_x=ball_x,
            last_y=zeros + 3,
            bricks=zeros + _ALL_BRICKS,
            strike=tf.zeros([num_envs], tf.bool),
            last_action=zeros,
            rng=initial_rng(key_rng, num_envs),
        )

    def observe(self, state: BreakoutState) -> tf.Tensor:
        """[num_envs, 10, 10, 4]: paddle, ball, trail and brick planes."""
        bricks = tf.not_equal(tf.bitwise.bitwise_and(state.bricks[:, None], tf.constant(_brick_bits())), 0)
        paddle = points_plane(tf.fill(tf.shape(state.pos), GRID - 1), state.pos)
        ball = points_plane(state.ball_y, state.ball_x)
        trail = points_plane(state.last_y, state.last_x)
        return stack_planes([paddle, ball, trail, bricks], self.dtype)

    def game_step(self, state: BreakoutState, action: tf.Tensor, draws: tf.Tensor):
        """minatar's `act`: paddle, then the ball's diagonal move with its if/elif chain of bounces
        (side wall; else top wall / brick / bottom row, where the paddle bounces it or the episode ends)."""
        del draws  # Breakout is deterministic
        pos = tf.clip_by_value(state.pos + tf.cast(action == 2, tf.int32) - tf.cast(action == 1, tf.int32), 0, 9)
        direction = state.ball_dir
        new_x = state.ball_x + tf.where((direction == 1) | (direction == 2), 1, -1)
        new_y = state.ball_y + tf.where(direction >= 2, 1, -1)
        side = (new_x < 0) | (new_x > GRID - 1)
        new_x = tf.clip_by_value(new_x, 0, GRID - 1)
        direction = tf.where(side, tf.bitwise.bitwise_xor(direction, 1), direction)  # [1, 0, 3, 2][dir]

        top = new_y < 0
        row = new_y - _BRICK_ROWS[0]
        in_rows = (row >= 0) & (new_y < _BRICK_ROWS[1])
        bit = tf.bitwise.left_shift(1, tf.clip_by_value(row, 0, 2) * GRID + new_x)
        brick = ~top & in_rows & (tf.bitwise.bitwise_and(state.bricks, bit) != 0)
        bottom = ~top & ~brick & (new_y == GRID - 1)
        breaks = brick & ~state.strike  # a brick hit right after another one is passed through
        bricks = tf.where(breaks, tf.bitwise.bitwise_and(state.bricks, tf.bitwise.invert(bit)), state.bricks)
        bricks = tf.where(bottom & (bricks == 0), _ALL_BRICKS, bricks)
        straight = bottom & (state.ball_x == pos)  # the paddle was under the ball: straight back up
        angled = bottom & ~straight & (new_x == pos)  # the paddle is where the ball lands: back the way it came
        terminated = bottom & ~straight & ~angled

        direction = tf.where(top | breaks | straight, 3 - direction, direction)  # [3, 2, 1, 0][dir]
        direction = tf.where(angled, tf.bitwise.bitwise_xor(direction, 2), direction)  # [2, 3, 0, 1][dir]
        new_y = tf.where(top, 0, tf.where(breaks | straight | angled, state.ball_y, new_y))
        next_state = state._replace(
            ball_x=new_x,
            ball_y=new_y,
            ball_dir=direction,
            pos=pos,
            last_x=state.ball_x,
            last_y=state.ball_y,
            bricks=bricks,
            strike=brick,
        )
        return next_state, tf.cast(breaks, tf.int32), terminated

    def from_minatar(
        self, games: Sequence[Any], last_action: Sequence[int] | None = None, rng: tf.Tensor | None = None
    ) -> BreakoutState:
        """The state of minatar Breakout games (`minatar.Environment(...).env`), one env each.

        Args:
            games: minatar `breakout.Env` objects.
            last_action: the executed actions before, minimal-set indices; defaults to zeros (no-op).
            rng: int32 [num_envs, 2] generator states; defaults to zeros.
        """
        bricks = []
        for game in games:
            brick_map = np.asarray(game.brick_map)
            if brick_map.sum() != brick_map[_BRICK_ROWS[0] : _BRICK_ROWS[1]].sum():
                raise ValueError(f"brick_map: expected bricks in rows 1..3 only, got {np.argwhere(brick_map)}")
            bricks.append(int(np.sum(brick_map.reshape(-1).astype(bool) * _brick_bits())))
        num_envs = len(games)

        def _ints(name: str) -> tf.Tensor:
            return tf.constant([int(getattr(g, name)) for g in games], tf.int32)

        return BreakoutState(
            ball_x=_ints("ball_x"),
            ball_y=_ints("ball_y"),
            ball_dir=_ints("ball_dir"),
            pos=_ints("pos"),
            last_x=_ints("last_x"),
            last_y=_ints("last_y"),
            bricks=tf.constant(bricks, tf.int32),
            strike=tf.constant([bool(g.strike) for g in games]),
            last_action=tf.constant(np.zeros(num_envs) if last_action is None else np.asarray(last_action), tf.int32),
            rng=tf.zeros([num_envs, 2], tf.int32) if rng is None else rng,
        )


class BreakoutGymnax(Breakout):
    """Breakout as gymnax's "Breakout-MinAtar" plays it: no sticky actions, episodes cut at 1000 steps (gymnax
    ends them as terminal there; `kppo.envs.wrap` truncates them, so the value is bootstrapped)."""

    gym_id = None
    max_episode_steps = GYMNAX_MAX_EPISODE_STEPS
    sticky_action_prob = 0.0
