"""MinAtar Asterix as a TF-native task (`minatar/environments/asterix.py`, minatar 1.0.15)."""

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
    bernoulli,
    initial_rng,
    lanes_plane,
    observation_space,
    points_plane,
    randint,
    stack_planes,
)

RAMP_INTERVAL = 100
INIT_SPAWN_SPEED = 10
INIT_MOVE_INTERVAL = 5
NUM_SLOTS = 8  # entity slot i moves along row i + 1


def _rows() -> tf.Tensor:
    """int32 [8]: the slots' rows."""
    return tf.range(1, NUM_SLOTS + 1, dtype=tf.int32)


class AsterixState(NamedTuple):
    """minatar's `Env` attributes; the entity slots are [num_envs, 8] (slot i in row i + 1), the rest [num_envs].
    An empty slot (minatar's None) has x = 0, right = gold = False."""

    player_x: tf.Tensor  # int32
    player_y: tf.Tensor  # int32
    present: tf.Tensor  # bool [num_envs, 8], the slot holds an enemy or treasure
    x: tf.Tensor  # int32 [num_envs, 8]
    right: tf.Tensor  # bool [num_envs, 8], moving right (spawned at column 0)
    gold: tf.Tensor  # bool [num_envs, 8], a treasure (else an enemy)
    spawn_speed: tf.Tensor  # int32, frames between spawns (ramps down)
    spawn_timer: tf.Tensor  # int32
    move_speed: tf.Tensor  # int32, frames between the entities' moves (ramps down)
    move_timer: tf.Tensor  # int32
    ramp_timer: tf.Tensor  # int32
    ramp_index: tf.Tensor  # int32
    last_action: tf.Tensor  # int32, the action executed last (minimal-set index)
    rng: tf.Tensor  # int32 [num_envs, 2]


def _spawn(state: AsterixState, draws: tf.Tensor) -> AsterixState:
    """minatar's `_spawn_entity` where the spawn timer is up: side `rand() < 1/2`, treasure `rand() < 1/3`, then
    a uniformly chosen empty slot (`randint(len(empty slots))`, slots in order); nothing if every slot is full."""
    right, gold = bernoulli(draws[:, 0], 1 / 2), bernoulli(draws[:, 1], 1 / 3)
    empty = ~state.present
    num_empty = tf.reduce_sum(tf.cast(empty, tf.int32), axis=1)
    choice = randint(draws[:, 2], tf.maximum(num_empty, 1))
    slot = empty & (tf.cumsum(tf.cast(empty, tf.int32), axis=1) - 1 == choice[:, None])
    slot &= (state.spawn_timer == 0)[:, None]
    return state._replace(
        present=state.present | slot,
        x=tf.where(slot, tf.where(right, 0, GRID - 1)[:, None], state.x),
        right=tf.where(slot, right[:, None], state.right),
        gold=tf.where(slot, gold[:, None], state.gold),
        spawn_timer=tf.where(state.spawn_timer == 0, state.spawn_speed, state.spawn_timer),
    )


def _touch(state: AsterixState, active: tf.Tensor) -> tuple[AsterixState, tf.Tensor, tf.Tensor]:
    """Entities (where `active`) on the player's cell: a treasure is collected (+1), an enemy ends the episode
    (and stays). Returns (state, reward int32 [N], terminated bool [N])."""
    on_player = active & state.present & (state.x == state.player_x[:, None]) & (_rows() == state.player_y[:, None])
    collected = on_player & state.gold
    reward = tf.reduce_sum(tf.cast(collected, tf.int32), axis=1)
    return state._replace(present=state.present & ~collected), reward, tf.reduce_any(on_player & ~state.gold, axis=1)


def _ramp(state: AsterixState) -> AsterixState:
    """Once every 102 frames (a timer counting from 100 down past 0) spawns come one frame sooner, and every other
    time the entities also move one frame sooner, until both happen every frame."""
    ramping = (state.spawn_speed > 1) | (state.move_speed > 1)
    wait = state.ramp_timer >= 0
    step_up = ramping & ~wait
    faster_move = step_up & (state.move_speed > 1) & (state.ramp_index % 2 == 1)
    faster_spawn = step_up & (state.spawn_speed > 1)
    return state._replace(
        move_speed=state.move_speed - tf.cast(faster_move, tf.int32),
        spawn_speed=state.spawn_speed - tf.cast(faster_spawn, tf.int32),
        ramp_index=state.ramp_index + tf.cast(step_up, tf.int32),
        ramp_timer=tf.where(ramping, tf.where(wait, state.ramp_timer - 1, RAMP_INTERVAL), state.ramp_timer),
    )


class Asterix(MinAtarTask):
    """Move around a field crossed by enemies and treasure coming in from the sides; +1 per treasure; the episode
    ends on touching an enemy; spawns and moves speed up over time (MinAtar's Asterix).

    Observation channels: player, enemy, trail, gold. Actions: 0 no-op, 1 left, 2 up, 3 right, 4 down.
    """

    gym_id: str | None = "MinAtar/Asterix-v1"
    observation_space = observation_space(4)
    action_space = gym.spaces.Discrete(5)
    minimal_actions = ("n", "l", "u", "r", "d")
    num_draws = 3  # a spawn's side, kind and slot, drawn every frame and used when one is due

    def initial_state(self, key: tf.Tensor, num_envs: int) -> AsterixState:
        """minatar's `reset`: the player at (5, 5), no entities; no randomness."""
        zeros, empty = tf.zeros([num_envs], tf.int32), tf.zeros([num_envs, NUM_SLOTS], tf.bool)
        return AsterixState(
            player_x=zeros + 5,
            player_y=zeros + 5,
            present=empty,
            x=tf.zeros([num_envs, NUM_SLOTS], tf.int32),
            right=empty,
            gold=empty,
            spawn_speed=zeros + INIT_SPAWN_SPEED,
            spawn_timer=zeros + INIT_SPAWN_SPEED,
            move_speed=zeros + INIT_MOVE_INTERVAL,
            move_timer=zeros + INIT_MOVE_INTERVAL,
            ramp_timer=zeros + RAMP_INTERVAL,
            ramp_index=zeros,
            last_action=zeros,
            rng=initial_rng(key, num_envs),
        )

    def observe(self, state: AsterixState) -> tf.Tensor:
        """[num_envs, 10, 10, 4]: player, enemies, the entities' trails (the cell behind each), treasure."""
        back_x = state.x + tf.where(state.right, -1, 1)  # off the grid at the edges: not drawn
        trail = lanes_plane(back_x, state.present)
        enemy = lanes_plane(state.x, state.present & ~state.gold)
        gold = lanes_plane(state.x, state.present & state.gold)
        return stack_planes([points_plane(state.player_y, state.player_x), enemy, trail, gold], self.dtype)

    def game_step(self, state: AsterixState, action: tf.Tensor, draws: tf.Tensor):
        """minatar's `act`: spawn, the player's move, contacts, the entities' move (leaving the field or meeting
        the player), timers, the difficulty ramp. Draws: a spawn's side, kind and slot (see `_spawn`)."""
        state = _spawn(state, draws)
        dx = tf.cast(action == 3, tf.int32) - tf.cast(action == 1, tf.int32)
        dy = tf.cast(action == 4, tf.int32) - tf.cast(action == 2, tf.int32)
        state = state._replace(
            player_x=tf.clip_by_value(state.player_x + dx, 0, GRID - 1),
            player_y=tf.clip_by_value(state.player_y + dy, 1, GRID - 2),
        )
        state, reward, terminated = _touch(state, tf.ones_like(state.present))

        move = (state.move_timer == 0)[:, None]
        x = tf.where(move, state.x + tf.where(state.right, 1, -1), state.x)
        present = state.present & ~(move & ((x < 0) | (x >= GRID)))
        state = state._replace(present=present, move_timer=tf.where(move[:, 0], state.move_speed, state.move_timer))
        state, moved_reward, moved_terminated = _touch(state._replace(x=x), move)

        state = state._replace(
            x=tf.where(state.present, state.x, 0),
            right=state.right & state.present,
            gold=state.gold & state.present,
            spawn_timer=state.spawn_timer - 1,
            move_timer=state.move_timer - 1,
        )
        if self.difficulty_ramping:
            state = _ramp(state)
        return state, reward + moved_reward, terminated | moved_terminated

    def from_minatar(
        self, games: Sequence[Any], last_action: Sequence[int] | None = None, rng: tf.Tensor | None = None
    ) -> AsterixState:
        """The state of minatar Asterix games (`minatar.Environment(...).env`), one env each; `last_action`
        (minimal-set indices) defaults to zeros, `rng` (int32 [num_envs, 2]) to zeros."""
        slots = np.zeros((len(games), NUM_SLOTS, 4), np.int64)  # present, x, right, gold
        for i, game in enumerate(games):
            for j, entity in enumerate(game.entities):
                if entity is not None:
                    if entity[1] != j + 1:
                        raise ValueError(f"entities[{j}]: expected row {j + 1}, got {entity}")
                    slots[i, j] = [1, entity[0], entity[2], entity[3]]

        def _ints(name: str) -> tf.Tensor:
            return tf.constant([int(getattr(g, name)) for g in games], tf.int32)

        num_envs = len(games)
        return AsterixState(
            player_x=_ints("player_x"),
            player_y=_ints("player_y"),
            present=tf.constant(slots[:, :, 0] != 0),
            x=tf.constant(slots[:, :, 1], tf.int32),
            right=tf.constant(slots[:, :, 2] != 0),
            gold=tf.constant(slots[:, :, 3] != 0),
            spawn_speed=_ints("spawn_speed"),
            spawn_timer=_ints("spawn_timer"),
            move_speed=_ints("move_speed"),
            move_timer=_ints("move_timer"),
            ramp_timer=_ints("ramp_timer"),
            ramp_index=_ints("ramp_index"),
            last_action=tf.constant(np.zeros(num_envs) if last_action is None else np.asarray(last_action), tf.int32),
            rng=tf.zeros([num_envs, 2], tf.int32) if rng is None else rng,
        )


class AsterixGymnax(Asterix):
    """Asterix as gymnax's "Asterix-MinAtar" plays it: no sticky actions, episodes cut at 1000 steps."""

    gym_id = None
    max_episode_steps = GYMNAX_MAX_EPISODE_STEPS
    sticky_action_prob = 0.0
