"""MinAtar Seaquest as a TF-native task (`minatar/environments/seaquest.py`, minatar 1.0.15).

minatar keeps its bullets, enemies and divers in Python lists; here each list is a `Slots` of fixed capacity, in
list order, and the frame replays the package's loops (which walk the lists newest first) with masks.
"""

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
    observation_space,
    points_plane,
    randint,
    stack_planes,
)

MAX_OXYGEN = 200
INIT_SPAWN_SPEED = 20
DIVER_SPAWN_SPEED = 30
INIT_MOVE_INTERVAL = 5
SHOT_COOL_DOWN = 5
ENEMY_SHOT_INTERVAL = 10
DIVER_MOVE_INTERVAL = 5
MAX_DIVERS = 6  # carried at once
#: Slots per list. The sub fires at most once per 5 frames and a bullet lives at most 9: 2 bullets. A diver comes
#: every 30 frames and lives 59: 2 divers. Enemies come at most once a frame and, once the ramp is through (a spawn
#: every frame, a move every 3), cross the field in 29: about 30 of one kind at most, fewer before. A spawn beyond
#: the capacity would be dropped; `from_minatar` refuses such states.
NUM_BULLET_SLOTS = 2
NUM_DIVER_SLOTS = 2
NUM_ENEMY_SLOTS = 32
_ROWS = 8  # enemies and divers swim in rows 1..8
#: minatar's `reset`, its int attributes: the sub at the surface in column 5, full oxygen, no diver.
_RESET = {
    "sub_x": 5,
    "sub_y": 0,
    "oxygen": MAX_OXYGEN,
    "diver_count": 0,
    "shot_timer": 0,
    "e_spawn_speed": INIT_SPAWN_SPEED,
    "e_spawn_timer": INIT_SPAWN_SPEED,
    "d_spawn_timer": DIVER_SPAWN_SPEED,
    "move_speed": INIT_MOVE_INTERVAL,
    "ramp_index": 0,
}


class Slots(NamedTuple):
    """One of minatar's lists as [num_envs, capacity] slots in list order, occupied slots first; empty slots hold
    zeros. Fields the list's entries lack (a bullet's timers, a fish's shot timer) are zeros."""

    present: tf.Tensor  # bool
    x: tf.Tensor  # int32
    y: tf.Tensor  # int32
    right: tf.Tensor  # bool, heading right (minatar's entry[2])
    move_timer: tf.Tensor  # int32, frames until the next move (entry[3])
    shot_timer: tf.Tensor  # int32, frames until an enemy sub's next shot (entry[4])


class SeaquestState(NamedTuple):
    """minatar's `Env` attributes, [num_envs] each, its lists as `Slots`; the enemy bullets as bool [num_envs, 10,
    10] maps per heading (they never interact with each other, so two bullets in one cell and heading are one)."""

    sub_x: tf.Tensor  # int32
    sub_y: tf.Tensor  # int32
    sub_right: tf.Tensor  # bool, the sub faces right (minatar's sub_or)
    oxygen: tf.Tensor  # int32
    diver_count: tf.Tensor  # int32, divers on board (-1 and below after surfacing with 6, see `_breathe`)
    surface: tf.Tensor  # bool, at the surface since the last surfacing
    shot_timer: tf.Tensor  # int32, frames until the sub may fire again
    e_spawn_speed: tf.Tensor  # int32, frames between enemy spawns (ramps down)
    e_spawn_timer: tf.Tensor  # int32
    d_spawn_timer: tf.Tensor  # int32
    move_speed: tf.Tensor  # int32, an enemy's frames between moves (ramps down)
    ramp_index: tf.Tensor  # int32
    f_bullets: Slots
    e_fish: Slots
    e_subs: Slots
    divers: Slots
    e_bullets_left: tf.Tensor  # bool [num_envs, 10, 10] (row, column)
    e_bullets_right: tf.Tensor  # bool [num_envs, 10, 10]
    last_action: tf.Tensor  # int32, the action executed last (minimal-set index)
    rng: tf.Tensor  # int32 [num_envs, 2]


def _empty(num_envs: int, capacity: int) -> Slots:
    ints, bools = tf.zeros([num_envs, capacity], tf.int32), tf.zeros([num_envs, capacity], tf.bool)
    return Slots(bools, ints, ints, bools, ints, ints)


def _append(slots: Slots, add: tf.Tensor, entry: Sequence[tf.Tensor]) -> Slots:
    """Appends entry (x, y, right, move_timer, shot_timer, each [num_envs]) where `add`, after the occupied slots."""
    count = tf.reduce_sum(tf.cast(slots.present, tf.int32), axis=1)
    at = add[:, None] & tf.equal(tf.range(slots.x.shape[1]), count[:, None])
    fields = [tf.where(at, value[:, None], old) for value, old in zip(entry, slots[1:])]
    return Slots(slots.present | at, *fields)


def _compact(slots: Slots) -> Slots:
    """The occupied slots moved to the front in their order, the others zeroed (the list after its removals)."""
    capacity = slots.x.shape[1]
    rank = tf.cumsum(tf.cast(slots.present, tf.int32), axis=1, exclusive=True)
    moves = slots.present[:, :, None] & tf.equal(rank[:, :, None], tf.range(capacity))  # [N, from, to]

    def _move(field: tf.Tensor) -> tf.Tensor:
        if field.dtype == tf.bool:
            return tf.reduce_any(moves & field[:, :, None], axis=1)
        return tf.reduce_sum(tf.where(moves, field[:, :, None], 0), axis=1)

    return Slots(*[_move(field) for field in slots])


def _first(matches: tf.Tensor, reverse: bool = False) -> tf.Tensor:
    """bool [..., K]: the first True along the last axis (the last one with reverse)."""
    before = tf.cumsum(tf.cast(matches, tf.int32), axis=-1, exclusive=True, reverse=reverse)
    return matches & tf.equal(before, 0)


def _on_bullets(bullets: Slots, slots: Slots) -> tf.Tensor:
    """bool [N, bullets, slots]: the occupied slots in an occupied bullet slot's cell."""
    same_x = tf.equal(bullets.x[:, :, None], slots.x[:, None, :])
    same_y = tf.equal(bullets.y[:, :, None], slots.y[:, None, :])
    return bullets.present[:, :, None] & slots.present[:, None, :] & same_x & same_y


def _on_sub(state: SeaquestState, x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
    """bool, shaped as x: (x, y) is the player's cell."""
    return tf.equal(x, state.sub_x[:, None]) & tf.equal(y, state.sub_y[:, None])


def _spawn(state: SeaquestState, draws: tf.Tensor) -> SeaquestState:
    """minatar's `_spawn_enemy` then `_spawn_diver` where their timers are up. An enemy draws its side
    `rand() < 1/2`, kind `rand() < 1/3` (a sub) and row `randint(1, 9)`, and does not come where an enemy heads the
    other way in that row; a diver then draws side and row from the next draws (the first ones if no enemy was due)."""
    enemy_due, diver_due = tf.equal(state.e_spawn_timer, 0), tf.equal(state.d_spawn_timer, 0)
    right, is_sub, y = bernoulli(draws[:, 0], 1 / 2), bernoulli(draws[:, 1], 1 / 3), 1 + randint(draws[:, 2], _ROWS)
    opposed = [
        s.present & tf.equal(s.y, y[:, None]) & tf.not_equal(s.right, right[:, None])
        for s in (state.e_fish, state.e_subs)
    ]
    spawn = enemy_due & ~tf.reduce_any(tf.concat(opposed, axis=1), axis=1)
    ones = tf.ones_like(y)
    enemy = [tf.where(right, 0, GRID - 1), y, right, ones * state.move_speed]
    diver_right = bernoulli(tf.where(enemy_due, draws[:, 3], draws[:, 0]), 1 / 2)
    diver_y = 1 + randint(tf.where(enemy_due, draws[:, 4], draws[:, 1]), _ROWS)
    diver = [tf.where(diver_right, 0, GRID - 1), diver_y, diver_right, ones * DIVER_MOVE_INTERVAL, 0 * ones]
    return state._replace(
        e_fish=_append(state.e_fish, spawn & ~is_sub, [*enemy, 0 * ones]),
        e_subs=_append(state.e_subs, spawn & is_sub, [*enemy, ones * ENEMY_SHOT_INTERVAL]),
        divers=_append(state.divers, diver_due, diver),
        e_spawn_timer=tf.where(enemy_due, state.e_spawn_speed, state.e_spawn_timer),
        d_spawn_timer=tf.where(diver_due, DIVER_SPAWN_SPEED, state.d_spawn_timer),
    )


def _act(state: SeaquestState, action: tf.Tensor) -> SeaquestState:
    """The player's action: fire (when the cool-down is over) from the sub's cell and heading, or a move."""
    fire = tf.equal(action, 5) & tf.equal(state.shot_timer, 0)
    left, right = tf.equal(action, 1), tf.equal(action, 3)
    dy = tf.cast(tf.equal(action, 4), tf.int32) - tf.cast(tf.equal(action, 2), tf.int32)
    zeros = tf.zeros_like(state.sub_x)
    bullet = [state.sub_x, state.sub_y, state.sub_right, zeros, zeros]
    return state._replace(
        f_bullets=_append(state.f_bullets, fire, bullet),
        shot_timer=tf.where(fire, SHOT_COOL_DOWN, state.shot_timer),
        sub_x=tf.clip_by_value(state.sub_x + tf.cast(right, tf.int32) - tf.cast(left, tf.int32), 0, GRID - 1),
        sub_right=(state.sub_right | right) & ~left,
        sub_y=tf.clip_by_value(state.sub_y + dy, 0, GRID - 2),
    )


def _move_bullets(state: SeaquestState) -> tuple[SeaquestState, tf.Tensor]:
    """The player's bullets move; one that leaves the field goes, one that reaches an enemy takes the first fish
    of the list in its cell, else the first sub (+1). Two bullets never share a cell (one is fired at most every 5
    frames and both move a cell a frame), so the order they are walked in does not matter. Returns the reward."""
    b = state.f_bullets
    x = b.x + tf.where(b.right, 1, -1)
    b = b._replace(x=x, present=b.present & (x >= 0) & (x < GRID))
    fish = _first(_on_bullets(b, state.e_fish))
    hit_fish = tf.reduce_any(fish, axis=2)
    subs = _first(_on_bullets(b._replace(present=b.present & ~hit_fish), state.e_subs))
    hit = hit_fish | tf.reduce_any(subs, axis=2)
    next_state = state._replace(
        f_bullets=b._replace(present=b.present & ~hit),
        e_fish=state.e_fish._replace(present=state.e_fish.present & ~tf.reduce_any(fish, axis=1)),
        e_subs=state.e_subs._replace(present=state.e_subs.present & ~tf.reduce_any(subs, axis=1)),
    )
    return next_state, tf.reduce_sum(tf.cast(hit, tf.int32), axis=1)


def _move_divers(state: SeaquestState) -> SeaquestState:
    """minatar's diver loop, newest first: a diver on the sub's cell, before or after its move, is picked up while
    fewer than 6 are on board; the others move every 6 frames and go when they leave the field."""
    d = state.divers
    move = d.present & tf.equal(d.move_timer, 0)
    x = tf.where(move, d.x + tf.where(d.right, 1, -1), d.x)
    inside = (x >= 0) & (x < GRID)
    reached = (d.present & _on_sub(state, d.x, d.y)) | (move & inside & _on_sub(state, x, d.y))
    newer = tf.cumsum(tf.cast(reached, tf.int32), axis=1, exclusive=True, reverse=True)
    picked = reached & (newer < (MAX_DIVERS - state.diver_count)[:, None])
    divers = d._replace(
        present=d.present & ~picked & ~(move & ~inside),
        x=x,
        move_timer=tf.where(move, DIVER_MOVE_INTERVAL, d.move_timer - 1),
    )
    return state._replace(divers=divers, diver_count=state.diver_count + tf.reduce_sum(tf.cast(picked, tf.int32), 1))


def _move_enemies(enemies: Slots, bullets: Slots, state: SeaquestState) -> tuple[Slots, Slots, tf.Tensor, tf.Tensor]:
    """minatar's fish or sub loop, newest first: an enemy on the sub's cell ends the episode; every move_speed + 1
    frames it moves a cell, going when it leaves the field, ending the episode on the sub's cell, else taking a
    bullet in its new cell (+1; where several move onto one bullet, the newest, walked first, takes it).

    Returns (enemies, bullets, reward int32 [N], terminated bool [N]); the enemies' x also for those that went.
    """
    move = enemies.present & tf.equal(enemies.move_timer, 0)
    x = tf.where(move, enemies.x + tf.where(enemies.right, 1, -1), enemies.x)
    inside = (x >= 0) & (x < GRID)
    on_sub = _on_sub(state, x, enemies.y)
    taken = _first(_on_bullets(bullets, enemies._replace(x=x, present=move & inside & ~on_sub)), reverse=True)
    killed = tf.reduce_any(taken, axis=1)
    terminated = (enemies.present & _on_sub(state, enemies.x, enemies.y)) | (move & inside & on_sub)
    next_enemies = enemies._replace(
        present=enemies.present & ~(move & ~inside) & ~killed,
        x=x,
        move_timer=tf.where(move, state.move_speed[:, None], enemies.move_timer - 1),
    )
    reward = tf.reduce_sum(tf.cast(killed, tf.int32), axis=1)
    used = bullets._replace(present=bullets.present & ~tf.reduce_any(taken, axis=2))
    return next_enemies, used, reward, tf.reduce_any(terminated, axis=1)


def _enemy_shots(subs: Slots, moved: Slots) -> tuple[Slots, tf.Tensor, tf.Tensor]:
    """Every 11 frames a sub fires from its cell after its move, the subs it just lost included (minatar's quirk:
    a sub that took a bullet in its move still fires from that cell; one that left the field fires off it, which
    the bullet's own move removes at once). Returns (subs, new left-heading shots, new right-heading shots)."""
    shoot = subs.present & tf.equal(subs.shot_timer, 0) & (moved.x >= 0) & (moved.x < GRID)
    left, right = [
        tf.reshape(points_plane(subs.y, moved.x, shoot & heading), [-1, GRID, GRID])
        for heading in (~subs.right, subs.right)
    ]
    timers = tf.where(tf.equal(subs.shot_timer, 0), ENEMY_SHOT_INTERVAL, subs.shot_timer - 1)
    return moved._replace(shot_timer=timers), left, right


def _shift(grid: tf.Tensor, right: bool) -> tf.Tensor:
    """bool [N, 10, 10] moved one column right (or left), dropping the column pushed out."""
    empty = tf.zeros_like(grid[:, :, :1])
    return tf.concat([empty, grid[:, :, :-1]], axis=2) if right else tf.concat([grid[:, :, 1:], empty], axis=2)


def _move_enemy_bullets(state: SeaquestState, left: tf.Tensor, right: tf.Tensor) -> tuple[SeaquestState, tf.Tensor]:
    """The enemy bullets, the new ones included, move a cell; one on the sub's cell before or after ends the
    episode. Returns (state, terminated)."""
    sub = tf.reshape(points_plane(state.sub_y, state.sub_x), [-1, GRID, GRID])
    left, right = state.e_bullets_left | left, state.e_bullets_right | right
    hit = tf.reduce_any((left | right) & sub, axis=[1, 2])
    left, right = _shift(left, right=False), _shift(right, right=True)
    hit |= tf.reduce_any((left | right) & sub, axis=[1, 2])
    return state._replace(e_bullets_left=left, e_bullets_right=right), hit


def _breathe(state: SeaquestState, ramping: bool) -> tuple[SeaquestState, tf.Tensor, tf.Tensor]:
    """Timers, oxygen and surfacing (minatar's end of `act` and `_surface`). Oxygen drops a unit a frame under
    water; the episode ends when it was out at the frame's start. Surfacing with no diver ends the episode;
    with divers it refills the oxygen, gives oxygen * 10 // 200 when 6 were on board, takes one diver off (minatar's
    quirk: with 6 it empties the boat first, leaving -1) and ramps the difficulty (spawns one frame sooner, and
    every other time moves one frame sooner, down to 1 and 2). Returns (state, reward, terminated)."""
    below = state.sub_y > 0
    arriving = ~below & ~state.surface
    surfacing = arriving & tf.not_equal(state.diver_count, 0)
    full = surfacing & tf.equal(state.diver_count, MAX_DIVERS)
    ramp = surfacing & ((state.e_spawn_speed > 1) | (state.move_speed > 2)) & ramping
    faster_moves = ramp & (state.move_speed > 2) & tf.equal(state.ramp_index % 2, 1)
    oxygen = tf.where(below, state.oxygen - 1, tf.where(surfacing, MAX_OXYGEN, state.oxygen))
    next_state = state._replace(
        e_spawn_timer=state.e_spawn_timer - tf.cast(state.e_spawn_timer > 0, tf.int32),
        d_spawn_timer=state.d_spawn_timer - tf.cast(state.d_spawn_timer > 0, tf.int32),
        shot_timer=state.shot_timer - tf.cast(state.shot_timer > 0, tf.int32),
        oxygen=oxygen,
        surface=~below & (state.surface | surfacing),
        diver_count=tf.where(surfacing, tf.where(full, 0, state.diver_count) - 1, state.diver_count),
        move_speed=state.move_speed - tf.cast(faster_moves, tf.int32),
        e_spawn_speed=state.e_spawn_speed - tf.cast(ramp & (state.e_spawn_speed > 1), tf.int32),
        ramp_index=state.ramp_index + tf.cast(ramp, tf.int32),
    )
    reward = tf.where(full, state.oxygen * 10 // MAX_OXYGEN, 0)
    return next_state, reward, (state.oxygen <= 0) | (arriving & tf.equal(state.diver_count, 0))


def _gauges(state: SeaquestState) -> tuple[tf.Tensor, tf.Tensor]:
    """bool [N, 10, 10] each: the oxygen bar (row 9 from the left, a cell per 20 units) and the diver bar (row 9,
    a cell per diver ending at column 8; none for a count of 0 or below), as minatar's slices draw them."""
    columns, bottom = tf.range(GRID, dtype=tf.int32)[None, :], tf.equal(tf.range(GRID), GRID - 1)[None, :, None]
    oxygen = columns < (tf.maximum(state.oxygen, 0) * 10 // MAX_OXYGEN)[:, None]
    divers = (columns >= (GRID - 1 - state.diver_count)[:, None]) & (columns < GRID - 1)
    return bottom & oxygen[:, None, :], bottom & divers[:, None, :]


def _trail(slots: Slots) -> tf.Tensor:
    """bool [N, 100]: the cells behind the slots' entries, where on the field."""
    back = slots.x + tf.where(slots.right, -1, 1)
    return points_plane(slots.y, back, slots.present & (back >= 0) & (back < GRID))


def _slots(entries: Sequence[Sequence[Any]], capacity: int, name: str) -> Slots:
    """Slots from each env's list of minatar entries ([x, y, heading, move timer, shot timer], or a prefix)."""
    table = np.zeros((len(entries), capacity, len(Slots._fields)), np.int64)
    for i, entries_i in enumerate(entries):
        if len(entries_i) > capacity:
            raise ValueError(f"{name}: expected at most {capacity} entries, got {len(entries_i)}")
        for j, entry in enumerate(entries_i):
            table[i, j, : len(entry) + 1] = [1, *[int(v) for v in entry]]
    columns = [tf.constant(table[:, :, k], tf.int32) for k in range(table.shape[2])]
    return Slots(columns[0] != 0, columns[1], columns[2], columns[3] != 0, columns[4], columns[5])


class Seaquest(MinAtarTask):
    """Steer a sub that shoots enemy fish and subs (+1 each), picks up divers and has to surface with them before
    its oxygen runs out; 6 divers surfaced give a bonus for the oxygen left; the episode ends on touching an enemy
    or its bullet, when the oxygen runs out, or when surfacing with no diver; enemies come faster and move faster
    with each surfacing (MinAtar's Seaquest).

    The frame runs in minatar's order: spawns, the player, its bullets, divers, enemy subs (and their shots), enemy
    bullets, fish, then timers, oxygen and surfacing. minatar's quirks are kept: subs fire after their move, even
    the sub a bullet just hit; surfacing with 6 divers leaves -1 on board, so the next surfacing needs none.

    Observation channels: sub_front, sub_back, friendly_bullet, trail, enemy_bullet, enemy_fish, enemy_sub,
    oxygen_guage, diver_guage, diver. Actions: 0 no-op, 1 left, 2 up, 3 right, 4 down, 5 fire.
    """

    gym_id: str | None = "MinAtar/Seaquest-v1"
    observation_space = observation_space(10)
    action_space = gym.spaces.Discrete(6)
    minimal_actions = ("n", "l", "u", "r", "d", "f")
    num_draws = 5  # an enemy's side, kind and row, then a diver's side and row (see `_spawn`)

    def initial_state(self, key: tf.Tensor, num_envs: int) -> SeaquestState:
        """minatar's `reset`: the sub at the surface, column 5, facing left, full oxygen; no randomness."""
        no, grid = tf.zeros([num_envs], tf.bool), tf.zeros([num_envs, GRID, GRID], tf.bool)
        enemies = _empty(num_envs, NUM_ENEMY_SLOTS)
        return SeaquestState(
            **{name: tf.fill([num_envs], value) for name, value in _RESET.items()},
            sub_right=no,
            surface=~no,
            f_bullets=_empty(num_envs, NUM_BULLET_SLOTS),
            e_fish=enemies,
            e_subs=enemies,
            divers=_empty(num_envs, NUM_DIVER_SLOTS),
            e_bullets_left=grid,
            e_bullets_right=grid,
            last_action=tf.zeros([num_envs], tf.int32),
            rng=initial_rng(key, num_envs),
        )

    def observe(self, state: SeaquestState) -> tf.Tensor:
        """[num_envs, 10, 10, 10], minatar's `state()`; the sub's back is the cell behind its heading (always on the
        field: the sub faces left at column 0 and right at column 9)."""
        back_x = state.sub_x + tf.where(state.sub_right, -1, 1)
        trail = _trail(state.e_fish) | _trail(state.e_subs) | _trail(state.divers)
        oxygen, divers = _gauges(state)
        planes = [
            points_plane(state.sub_y, state.sub_x),
            points_plane(state.sub_y, back_x),
            points_plane(state.f_bullets.y, state.f_bullets.x, state.f_bullets.present),
            trail,
            state.e_bullets_left | state.e_bullets_right,
            points_plane(state.e_fish.y, state.e_fish.x, state.e_fish.present),
            points_plane(state.e_subs.y, state.e_subs.x, state.e_subs.present),
            oxygen,
            divers,
            points_plane(state.divers.y, state.divers.x, state.divers.present),
        ]
        return stack_planes(planes, self.dtype)

    def game_step(self, state: SeaquestState, action: tf.Tensor, draws: tf.Tensor):
        """minatar's `act` (see the class docstring for the order). Draws: see `_spawn`."""
        state = _act(_spawn(state, draws), action)
        state, reward = _move_bullets(state)
        state = _move_divers(state)
        subs, bullets, sub_reward, sub_hit = _move_enemies(state.e_subs, state.f_bullets, state)
        subs, shots_left, shots_right = _enemy_shots(state.e_subs, subs)
        state, bullet_hit = _move_enemy_bullets(state._replace(e_subs=subs), shots_left, shots_right)
        fish, bullets, fish_reward, fish_hit = _move_enemies(state.e_fish, bullets, state)
        state, surface_reward, out = _breathe(state._replace(e_fish=fish, f_bullets=bullets), self.difficulty_ramping)
        state = state._replace(
            f_bullets=_compact(state.f_bullets),
            e_fish=_compact(state.e_fish),
            e_subs=_compact(state.e_subs),
            divers=_compact(state.divers),
        )
        reward = reward + sub_reward + fish_reward + surface_reward
        return state, reward, sub_hit | bullet_hit | fish_hit | out

    def from_minatar(
        self, games: Sequence[Any], last_action: Sequence[int] | None = None, rng: tf.Tensor | None = None
    ) -> SeaquestState:
        """The state of minatar Seaquest games (`minatar.Environment(...).env`), one env each.

        Args:
            games: minatar `seaquest.Env` objects.
            last_action: the executed actions before, minimal-set indices; defaults to zeros (no-op).
            rng: int32 [num_envs, 2] generator states; defaults to zeros.

        Raises:
            ValueError: a list holds more entries than its slots.
        """
        num_envs = len(games)
        bullets = np.zeros((2, num_envs, GRID, GRID), bool)  # heading left, right
        for i, game in enumerate(games):
            for x, y, right in game.e_bullets:
                bullets[int(right), i, y, x] = True
        return SeaquestState(
            **{name: tf.constant([int(getattr(g, name)) for g in games], tf.int32) for name in _RESET},
            sub_right=tf.constant([bool(g.sub_or) for g in games]),
            surface=tf.constant([bool(g.surface) for g in games]),
            f_bullets=_slots([g.f_bullets for g in games], NUM_BULLET_SLOTS, "f_bullets"),
            e_fish=_slots([g.e_fish for g in games], NUM_ENEMY_SLOTS, "e_fish"),
            e_subs=_slots([g.e_subs for g in games], NUM_ENEMY_SLOTS, "e_subs"),
            divers=_slots([g.divers for g in games], NUM_DIVER_SLOTS, "divers"),
            e_bullets_left=tf.constant(bullets[0]),
            e_bullets_right=tf.constant(bullets[1]),
            last_action=tf.constant(np.zeros(num_envs) if last_action is None else np.asarray(last_action), tf.int32),
            rng=tf.zeros([num_envs, 2], tf.int32) if rng is None else rng,
        )


class SeaquestGymnax(Seaquest):
    """Seaquest as gymnax's "Seaquest-MinAtar" plays it: no sticky actions, episodes cut at 1000 steps."""

    gym_id = None
    max_episode_steps = GYMNAX_MAX_EPISODE_STEPS
    sticky_action_prob = 0.0
