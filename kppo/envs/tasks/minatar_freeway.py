"""MinAtar Freeway as a TF-native task (`minatar/environments/freeway.py`, minatar 1.0.15)."""

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
    bernoulli,
    initial_rng,
    lanes_plane,
    observation_space,
    points_plane,
    randint,
    stack_planes,
)

PLAYER_SPEED = 3
TIME_LIMIT = 2500
NUM_CARS = 8  # car i drives along row i + 1
MAX_CAR_SPEED = 5  # a car moves every |speed| + 1 frames
_CHICKEN_COLUMN = 4


def _rows() -> tf.Tensor:
    """int32 [8]: the cars' rows."""
    return tf.range(1, NUM_CARS + 1, dtype=tf.int32)


class FreewayState(NamedTuple):
    """minatar's `Env` attributes; cars are [num_envs, 8] (car i in row i + 1), the rest [num_envs]."""

    pos: tf.Tensor  # int32, the chicken's row (column 4)
    move_timer: tf.Tensor  # int32, frames until the chicken may move again
    terminate_timer: tf.Tensor  # int32, frames left (the episode ends when it drops below 0)
    car_x: tf.Tensor  # int32 [num_envs, 8]
    car_timer: tf.Tensor  # int32 [num_envs, 8], frames until the car moves
    car_speed: tf.Tensor  # int32 [num_envs, 8], +-1..5: direction, and the car moves every |speed| + 1 frames
    last_action: tf.Tensor  # int32, the action executed last (minimal-set index)
    rng: tf.Tensor  # int32 [num_envs, 2]


def _car_speeds(speed_draws: tf.Tensor, direction_draws: tf.Tensor) -> tf.Tensor:
    """minatar's `_randomize_cars`: `randint(1, 6, 8) * sign(rand(8) - 0.5)`, from int32 [N, 8] draws each."""
    speeds = 1 + randint(speed_draws, MAX_CAR_SPEED)
    return tf.where(bernoulli(direction_draws, 0.5), -speeds, speeds)


class Freeway(MinAtarTask):
    """Lead a chicken up across eight lanes of traffic; +1 per crossing (the cars then change speed), back to the
    bottom when hit; the episode ends after 2500 frames (MinAtar's Freeway).

    Observation channels: chicken, car, speed1..speed5 (a car's trail, in the channel of its speed).
    Actions: 0 no-op, 1 up, 2 down.
    """

    gym_id: str | None = "MinAtar/Freeway-v1"
    observation_space = observation_space(7)
    action_space = gym.spaces.Discrete(3)
    minimal_actions = ("n", "u", "d")
    num_draws = 2 * NUM_CARS  # new car speeds after a crossing, drawn every frame and used only then

    def initial_state(self, key: tf.Tensor, num_envs: int) -> FreewayState:
        """minatar's `reset`: cars at column 0 with random speeds and directions, the chicken at the bottom."""
        key_cars, key_rng = tf.unstack(counter_rng.split(key, 2))
        draws = counter_rng.uniform_int(key_cars, [num_envs, 2 * NUM_CARS], 0, 2**24)
        speed = _car_speeds(draws[:, :NUM_CARS], draws[:, NUM_CARS:])
        zeros = tf.zeros([num_envs], tf.int32)
        return FreewayState(
            pos=zeros + GRID - 1,
            move_timer=zeros + PLAYER_SPEED,
            terminate_timer=zeros + TIME_LIMIT,
            car_x=tf.zeros_like(speed),
            car_timer=tf.abs(speed),
            car_speed=speed,
            last_action=zeros,
            rng=initial_rng(key_rng, num_envs),
        )

    def observe(self, state: FreewayState) -> tf.Tensor:
        """[num_envs, 10, 10, 7]: the chicken, the cars, and each car's trail in the channel of its |speed|."""
        chicken = points_plane(state.pos, tf.fill(tf.shape(state.pos), _CHICKEN_COLUMN))
        back_x = tf.math.floormod(state.car_x - tf.sign(state.car_speed), GRID)
        speed = tf.abs(state.car_speed)
        trails = [lanes_plane(back_x, speed == s) for s in range(1, MAX_CAR_SPEED + 1)]
        return stack_planes([chicken, lanes_plane(state.car_x), *trails], self.dtype)

    def game_step(self, state: FreewayState, action: tf.Tensor, draws: tf.Tensor):
        """minatar's `act`: the chicken's move, a crossing (reward, new car speeds), the cars' moves (a car hitting
        the chicken, before or after its move, sends it back to the bottom), timers.

        Draws: columns 0..7 the speeds (minatar's `randint(1, 6, 8)`), 8..15 the directions (`rand(8)`)."""
        can_move = state.move_timer == 0
        up, down = (action == 1) & can_move, (action == 2) & can_move
        move_timer = tf.where(up | down, PLAYER_SPEED, state.move_timer)
        pos = tf.clip_by_value(state.pos - tf.cast(up, tf.int32) + tf.cast(down, tf.int32), 0, GRID - 1)
        crossed = pos == 0
        new_speed = _car_speeds(draws[:, :NUM_CARS], draws[:, NUM_CARS:])
        car_speed = tf.where(crossed[:, None], new_speed, state.car_speed)
        car_timer = tf.where(crossed[:, None], tf.abs(new_speed), state.car_timer)
        pos = tf.where(crossed, GRID - 1, pos)

        in_lane = _rows() == pos[:, None]  # each lane holds one car, so the cars' order does not matter
        moves = car_timer == 0
        car_x = tf.where(moves, tf.math.floormod(state.car_x + tf.where(car_speed > 0, 1, -1), GRID), state.car_x)
        hit = in_lane & ((state.car_x == _CHICKEN_COLUMN) | (moves & (car_x == _CHICKEN_COLUMN)))
        pos = tf.where(tf.reduce_any(hit, axis=1), GRID - 1, pos)

        terminate_timer = state.terminate_timer - 1
        next_state = state._replace(
            pos=pos,
            move_timer=move_timer - tf.cast(move_timer > 0, tf.int32),
            terminate_timer=terminate_timer,
            car_x=car_x,
            car_timer=tf.where(moves, tf.abs(car_speed), car_timer - 1),
            car_speed=car_speed,
        )
        return next_state, tf.cast(crossed, tf.int32), terminate_timer < 0

    def from_minatar(
        self, games: Sequence[Any], last_action: Sequence[int] | None = None, rng: tf.Tensor | None = None
    ) -> FreewayState:
        """The state of minatar Freeway games (`minatar.Environment(...).env`), one env each; `last_action`
        (minimal-set indices) defaults to zeros, `rng` (int32 [num_envs, 2]) to zeros."""
        cars = np.array([g.cars for g in games], np.int64)  # [N, 8, (x, y, timer, speed)]
        if not (cars[:, :, 1] == np.arange(1, NUM_CARS + 1)).all():
            raise ValueError(f"cars: expected car i in row i + 1, got rows {cars[:, :, 1].tolist()}")
        num_envs = len(games)
        return FreewayState(
            pos=tf.constant([int(g.pos) for g in games], tf.int32),
            move_timer=tf.constant([int(g.move_timer) for g in games], tf.int32),
            terminate_timer=tf.constant([int(g.terminate_timer) for g in games], tf.int32),
            car_x=tf.constant(cars[:, :, 0], tf.int32),
            car_timer=tf.constant(cars[:, :, 2], tf.int32),
            car_speed=tf.constant(cars[:, :, 3], tf.int32),
            last_action=tf.constant(np.zeros(num_envs) if last_action is None else np.asarray(last_action), tf.int32),
            rng=tf.zeros([num_envs, 2], tf.int32) if rng is None else rng,
        )


class FreewayGymnax(Freeway):
    """Freeway as gymnax's "Freeway-MinAtar" plays it: no sticky actions, episodes cut at 1000 steps (before the
    game's own end at 2500 frames)."""

    gym_id = None
    max_episode_steps = GYMNAX_MAX_EPISODE_STEPS
    sticky_action_prob = 0.0
