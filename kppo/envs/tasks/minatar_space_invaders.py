"""MinAtar SpaceInvaders as a TF-native task (`minatar/environments/space_invaders.py`, minatar 1.0.15)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np

from kppo._tf import tf
from kppo.envs.tasks.minatar import (
    GRID,
    GYMNAX_MAX_EPISODE_STEPS,
    MinAtarTask,
    initial_rng,
    observation_space,
    points_plane,
    stack_planes,
)

SHOT_COOL_DOWN = 5
ENEMY_MOVE_INTERVAL = 12
ENEMY_SHOT_INTERVAL = 10
_MIN_MOVE_INTERVAL = 6  # the ramp stops once a wave moves every 6 frames


def _initial_aliens() -> np.ndarray:
    """bool [10, 10]: a new wave, rows 0..3 x columns 2..7."""
    aliens = np.zeros((GRID, GRID), bool)
    aliens[0:4, 2:8] = True
    return aliens


class SpaceInvadersState(NamedTuple):
    """minatar's `Env` attributes; maps are bool [num_envs, 10, 10] (row, column), the rest [num_envs]."""

    pos: tf.Tensor  # int32, the cannon's column (row 9)
    f_bullets: tf.Tensor  # bool, the player's bullets
    e_bullets: tf.Tensor  # bool, the aliens' bullets
    aliens: tf.Tensor  # bool
    alien_dir: tf.Tensor  # int32, -1 (left) or +1 (right)
    enemy_move_interval: tf.Tensor  # int32, frames between the moves of a full wave (ramps down per wave)
    alien_move_timer: tf.Tensor  # int32
    alien_shot_timer: tf.Tensor  # int32
    ramp_index: tf.Tensor  # int32
    shot_timer: tf.Tensor  # int32, frames until the cannon may fire again
    last_action: tf.Tensor  # int32, the action executed last (minimal-set index)
    rng: tf.Tensor  # int32 [num_envs, 2]


def _shift_rows(grid: tf.Tensor, down: bool) -> tf.Tensor:
    """Moves every cell of bool [N, 10, 10] one row down (or up), dropping the row pushed out."""
    empty = tf.zeros_like(grid[:, :1])
    return tf.concat([empty, grid[:, :-1]], axis=1) if down else tf.concat([grid[:, 1:], empty], axis=1)


def _at(grid: tf.Tensor, row: int, column: tf.Tensor) -> tf.Tensor:
    """bool [N]: grid[n, row, column[n]]."""
    return tf.gather(grid[:, row], column[:, None], batch_dims=1)[:, 0]


def _nearest_alien_shot(aliens: tf.Tensor, pos: tf.Tensor) -> tf.Tensor:
    """bool [N, 10, 10]: the cell of minatar's `_nearest_alien`, the lowest alien of the column nearest the cannon
    (columns in order of |column - pos|, ties to the left, as Python's stable sort leaves them)."""
    columns = tf.range(GRID, dtype=tf.int32)
    occupied = tf.reduce_any(aliens, axis=1)  # [N, 10] columns
    order = 2 * tf.abs(columns - pos[:, None]) + tf.cast(columns > pos[:, None], tf.int32)
    column = tf.argmin(tf.where(occupied, order, 4 * GRID), axis=1, output_type=tf.int32)
    in_column = tf.gather(tf.transpose(aliens, [0, 2, 1]), column[:, None], batch_dims=1)[:, 0]  # [N, 10] rows
    row = tf.reduce_max(tf.where(in_column, columns, -1), axis=1)
    present = tf.reduce_any(occupied, axis=1)  # a wave is refilled before the next shot, so always True
    return tf.reshape(points_plane(row, column, present), [-1, GRID, GRID])


class SpaceInvaders(MinAtarTask):
    """Shoot down a wave of aliens that marches sideways and down while shooting back; +1 per alien, a faster
    wave once one is cleared; the episode ends when an alien or bullet reaches the cannon (MinAtar's SpaceInvaders).

    Observation channels: cannon, alien, alien_left, alien_right, friendly_bullet, enemy_bullet.
    Actions: 0 no-op, 1 left, 2 right, 3 fire.
    """

    gym_id: str | None = "MinAtar/SpaceInvaders-v1"
    observation_space = observation_space(6)
    action_space = gym.spaces.Discrete(4)
    minimal_actions = ("n", "l", "r", "f")
    num_draws = 0

    def initial_state(self, key: tf.Tensor, num_envs: int) -> SpaceInvadersState:
        """minatar's `reset`: cannon at column 5, a full wave heading left; no randomness."""
        zeros = tf.zeros([num_envs], tf.int32)
        grid = tf.zeros([num_envs, GRID, GRID], tf.bool)
        return SpaceInvadersState(
            pos=zeros + 5,
            f_bullets=grid,
            e_bullets=grid,
            aliens=grid | tf.constant(_initial_aliens()),
            alien_dir=zeros - 1,
            enemy_move_interval=zeros + ENEMY_MOVE_INTERVAL,
            alien_move_timer=zeros + ENEMY_MOVE_INTERVAL,
            alien_shot_timer=zeros + ENEMY_SHOT_INTERVAL,
            ramp_index=zeros,
            shot_timer=zeros,
            last_action=zeros,
            rng=initial_rng(key, num_envs),
        )

    def observe(self, state: SpaceInvadersState) -> tf.Tensor:
        """[num_envs, 10, 10, 6]; the aliens also appear in the channel of their direction."""
        cannon = points_plane(tf.fill(tf.shape(state.pos), GRID - 1), state.pos)
        left = (state.alien_dir < 0)[:, None, None]
        planes = [cannon, state.aliens, state.aliens & left, state.aliens & ~left, state.f_bullets, state.e_bullets]
        return stack_planes(planes, self.dtype)

    def _move_aliens(self, state: SpaceInvadersState, pos: tf.Tensor) -> tuple[SpaceInvadersState, tf.Tensor]:
        """The wave's move when its timer is up: down a row (wrapping, as np.roll does) and turn at a wall, else
        one column sideways. Returns the state and whether an alien reached the cannon or the bottom."""
        move = state.alien_move_timer == 0
        count = tf.reduce_sum(tf.cast(state.aliens, tf.int32), axis=[1, 2])
        at_wall = (tf.reduce_any(state.aliens[:, :, 0], axis=1) & (state.alien_dir < 0)) | (
            tf.reduce_any(state.aliens[:, :, GRID - 1], axis=1) & (state.alien_dir > 0)
        )
        down, sideways = move & at_wall, move & ~at_wall
        landed = down & tf.reduce_any(state.aliens[:, GRID - 1], axis=1)
        shifted = tf.where(
            (state.alien_dir < 0)[:, None, None], tf.roll(state.aliens, -1, 2), tf.roll(state.aliens, 1, 2)
        )
        aliens = tf.where(down[:, None, None], tf.roll(state.aliens, 1, 1), state.aliens)
        aliens = tf.where(sideways[:, None, None], shifted, aliens)
        next_state = state._replace(
            aliens=aliens,
            alien_dir=tf.where(down, -state.alien_dir, state.alien_dir),
            alien_move_timer=tf.where(move, tf.minimum(count, state.enemy_move_interval), state.alien_move_timer),
        )
        return next_state, landed | (move & _at(aliens, GRID - 1, pos))

    def game_step(self, state: SpaceInvadersState, action: tf.Tensor, draws: tf.Tensor):
        """minatar's `act`: cannon, bullets, the wave's move and shot, hits, timers, and a new wave once cleared."""
        del draws  # SpaceInvaders is deterministic
        fire = (action == 3) & (state.shot_timer == 0)
        pos = tf.clip_by_value(state.pos + tf.cast(action == 2, tf.int32) - tf.cast(action == 1, tf.int32), 0, 9)
        cannon = tf.reshape(points_plane(tf.fill(tf.shape(pos), GRID - 1), pos), [-1, GRID, GRID])
        f_bullets = _shift_rows(state.f_bullets | (cannon & fire[:, None, None]), down=False)
        e_bullets = _shift_rows(state.e_bullets, down=True)
        terminated = _at(e_bullets, GRID - 1, pos) | _at(state.aliens, GRID - 1, pos)
        state, hit = self._move_aliens(state._replace(shot_timer=tf.where(fire, SHOT_COOL_DOWN, state.shot_timer)), pos)
        terminated |= hit

        shoot = state.alien_shot_timer == 0
        e_bullets |= _nearest_alien_shot(state.aliens, pos) & shoot[:, None, None]
        kills = state.aliens & f_bullets
        reward = tf.reduce_sum(tf.cast(kills, tf.int32), axis=[1, 2])
        aliens, f_bullets = state.aliens & ~kills, f_bullets & ~kills

        cleared = ~tf.reduce_any(aliens, axis=[1, 2])
        ramp = cleared & (state.enemy_move_interval > _MIN_MOVE_INTERVAL) & self.difficulty_ramping
        next_state = state._replace(
            pos=pos,
            f_bullets=f_bullets,
            e_bullets=e_bullets,
            aliens=aliens | (cleared[:, None, None] & tf.constant(_initial_aliens())),
            enemy_move_interval=state.enemy_move_interval - tf.cast(ramp, tf.int32),
            alien_move_timer=state.alien_move_timer - 1,
            alien_shot_timer=tf.where(shoot, ENEMY_SHOT_INTERVAL, state.alien_shot_timer) - 1,
            ramp_index=state.ramp_index + tf.cast(ramp, tf.int32),
            shot_timer=state.shot_timer - tf.cast(state.shot_timer > 0, tf.int32),
        )
        return next_state, reward, terminated

    def from_minatar(
        self, games: Sequence[Any], last_action: Sequence[int] | None = None, rng: tf.Tensor | None = None
    ) -> SpaceInvadersState:
        """The state of minatar SpaceInvaders games (`minatar.Environment(...).env`), one env each; `last_action`
        (minimal-set indices) defaults to zeros, `rng` (int32 [num_envs, 2]) to zeros."""

        def _ints(name: str) -> tf.Tensor:
            return tf.constant([int(getattr(g, name)) for g in games], tf.int32)

        def _grid(name: str) -> tf.Tensor:
            return tf.constant(np.stack([np.asarray(getattr(g, name)) != 0 for g in games]))

        num_envs = len(games)
        return SpaceInvadersState(
            pos=_ints("pos"),
            f_bullets=_grid("f_bullet_map"),
            e_bullets=_grid("e_bullet_map"),
            aliens=_grid("alien_map"),
            alien_dir=_ints("alien_dir"),
            enemy_move_interval=_ints("enemy_move_interval"),
            alien_move_timer=_ints("alien_move_timer"),
            alien_shot_timer=_ints("alien_shot_timer"),
            ramp_index=_ints("ramp_index"),
            shot_timer=_ints("shot_timer"),
            last_action=tf.constant(np.zeros(num_envs) if last_action is None else np.asarray(last_action), tf.int32),
            rng=tf.zeros([num_envs, 2], tf.int32) if rng is None else rng,
        )


class SpaceInvadersGymnax(SpaceInvaders):
    """SpaceInvaders as gymnax's "SpaceInvaders-MinAtar" plays it: no sticky actions, episodes cut at 1000 steps."""

    gym_id = None
    max_episode_steps = GYMNAX_MAX_EPISODE_STEPS
    sticky_action_prob = 0.0
