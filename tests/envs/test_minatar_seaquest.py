"""The TF-native MinAtar Seaquest reproduces the `minatar` package frame for frame, sticky actions included."""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Iterator

import numpy as np
import pytest

import kppo.envs
from kppo._tf import tf
from kppo.envs.tasks import minatar_seaquest
from kppo.envs.tasks.minatar import NO_TIME_LIMIT, initial_rng
from kppo.envs.tasks.minatar_seaquest import Seaquest, SeaquestGymnax
from tests.envs.test_minatar import NUM_ENVS, _minatar_envs, _ReplayedRandom

minatar = pytest.importorskip("minatar")
minatar_gym = pytest.importorskip("minatar.gym")


#: Random play's action odds: no-op, left, up, right, down, fire; firing often, so that shots hit enemies.
ACTION_ODDS = [0.12, 0.12, 0.12, 0.12, 0.12, 0.4]


def _scramble(env, rng: np.random.Generator) -> None:
    """Moves a freshly reset minatar Seaquest to a random mid-game situation (sub a few rows down with divers on
    board, little oxygen, a late difficulty), so that surfacings, full boats, ramps, crowded rows and running out
    of oxygen happen within a few hundred frames. The sub faces left at column 0 and right at column 9, as in play."""
    g = env.env
    g.sub_x, g.sub_y = int(rng.integers(0, 10)), int(rng.integers(1, 4))
    g.sub_or, g.surface = g.sub_x == 9 or (g.sub_x > 0 and bool(rng.random() < 0.5)), False
    g.diver_count = int(rng.choice([-2, -1, 0, 1, 3, 5, 6, 6, 6]))
    g.oxygen = int(rng.integers(1, 30)) if rng.random() < 0.3 else int(rng.integers(1, 201))
    g.e_spawn_speed, g.move_speed = int(rng.integers(1, 21)), int(rng.integers(2, 6))
    g.e_spawn_timer, g.ramp_index = int(rng.integers(0, g.e_spawn_speed + 1)), int(rng.integers(0, 20))
    g.d_spawn_timer, g.shot_timer = int(rng.integers(0, 31)), int(rng.integers(0, 6))


def _fields(state, prefix: str = "") -> Iterator[tuple[str, tf.Tensor]]:
    """(dotted name, tensor) of every leaf of a nest of NamedTuples."""
    for name, value in zip(state._fields, state):
        if isinstance(value, tuple):
            yield from _fields(value, f"{prefix}{name}.")
        else:
            yield prefix + name, value


def _assert_states_equal(actual, expected, where: str) -> None:
    for (name, a), (_, e) in zip(_fields(actual), _fields(expected)):
        np.testing.assert_array_equal(a.numpy(), e.numpy(), err_msg=f"{where}: field {name}")


def _count_events(events: Counter, before: list[tuple], games: list, rewards: np.ndarray, terminal: np.ndarray):
    """Tallies what the frame did in minatar's games, to show that the runs reach every rule."""
    for (count, oxygen, ramp), g, reward, done in zip(before, games, rewards, terminal):
        full = count == 6 and g.diver_count == -1
        events["full_surfacings"] += int(full)
        events["ramps"] += int(g.ramp_index > ramp)
        events["pickups"] += max(g.diver_count - count, 0)
        events["out_of_oxygen"] += int(bool(done) and oxygen <= 0)
        events["kills"] += int(reward) - (oxygen * 10 // 200 if full else 0)
        events["enemy_bullets"] += len(g.e_bullets)
        events["max_enemies"] = max(events["max_enemies"], len(g.e_fish), len(g.e_subs))


def _run_parity(task: Seaquest, num_frames: int, seed: int = 0) -> Counter:
    """Steps NUM_ENVS minatar Seaquest games and the TF task side by side on the same random actions and draws.

    As tests/envs/test_minatar.py's `_run_parity`: before every frame each minatar env's generator is replaced by
    the TF task's draws for that frame; compared at every frame are reward, terminal, observation and the whole next
    state as converted from minatar's attributes. Finished episodes restart from minatar's `reset`, half of them
    scrambled. Returns the events tallied by `_count_events`, plus episodes, reward and sticky frames."""
    rng = np.random.default_rng(seed)
    envs = _minatar_envs("seaquest", task, seed)
    for env in envs[::2]:
        _scramble(env, rng)
    reset_randoms = [env.random for env in envs]

    def convert(rng_state):
        return task.from_minatar([env.env for env in envs], [env.last_action for env in envs], rng_state)

    @tf.function(autograph=False)  # plain TF ops; autograph's conversion would take longer than the frames
    def frame(state, actions):
        next_state, reward, terminated = task.transition(state, actions)
        return task.draws(state), next_state, reward, terminated, task.observe(next_state)

    state, events = convert(initial_rng(tf.constant([seed, 2]), NUM_ENVS)), Counter()
    for t in range(num_frames):
        actions = rng.choice(6, NUM_ENVS, p=ACTION_ODDS)
        draws, next_state, reward, terminated, obs = frame(state, tf.constant(actions, tf.int32))
        before = [(e.env.diver_count, e.env.oxygen, e.env.ramp_index) for e in envs]
        results = []
        for env, action, env_draws in zip(envs, actions, draws.numpy()):
            env.random = env.env.random = _ReplayedRandom(env_draws)
            results.append(env.act(int(action)))
        minatar_reward, minatar_terminal = map(np.array, zip(*results))

        where = f"seaquest frame {t}"
        np.testing.assert_array_equal(reward.numpy(), minatar_reward, err_msg=where)
        np.testing.assert_array_equal(terminated.numpy(), minatar_terminal, err_msg=where)
        np.testing.assert_array_equal(obs.numpy(), np.stack([e.state() for e in envs]), err_msg=where)
        state = convert(next_state.rng)
        _assert_states_equal(next_state, state, where)
        _count_events(events, before, [e.env for e in envs], minatar_reward, minatar_terminal)

        for i in np.flatnonzero(minatar_terminal):
            envs[i].random = envs[i].env.random = reset_randoms[i]
            envs[i].reset()
            if rng.random() < 0.5:
                _scramble(envs[i], rng)
        if minatar_terminal.any():
            state = convert(next_state.rng)
        events["episodes"] += int(minatar_terminal.sum())
        events["reward"] += int(minatar_reward.sum())
        events["sticky"] += int(np.sum(next_state.last_action.numpy() != actions))
    return events


def _assert_every_rule_was_reached(events: Counter) -> None:
    for name in ["full_surfacings", "ramps", "pickups", "out_of_oxygen", "kills", "enemy_bullets"]:
        assert events[name] >= 5, (name, dict(events))
    assert events["max_enemies"] >= 10, dict(events)  # crowded rows: the slot capacity and list order matter


def test_matches_minatar_frame_by_frame():
    """minatar's defaults (sticky actions, difficulty ramping): 16 envs x 400 frames, compared exactly."""
    events = _run_parity(Seaquest(), 400, seed=1)  # a seed whose 400 frames reach every rule at least 5 times
    assert events["episodes"] >= 100 and events["ramps"] >= 20
    _assert_every_rule_was_reached(events)
    assert 0.05 < events["sticky"] / (NUM_ENVS * 400) < 0.1  # repeats of another action: 0.1 * (1 - sum(p**2))


def test_matches_minatar_without_sticky_actions_or_ramping():
    """The gymnax variant (no sticky actions) with difficulty_ramping=False: 16 envs x 200 frames."""
    events = _run_parity(SeaquestGymnax(difficulty_ramping=False), 200, seed=1)
    assert events["episodes"] >= 30 and events["sticky"] == 0 and events["ramps"] == 0
    assert events["full_surfacings"] > 0 and events["kills"] > 0


@pytest.mark.slow
@pytest.mark.parametrize("seed", [2, 3, 4])
def test_matches_minatar_over_long_runs(seed):
    """16 envs x 2,000 frames per seed."""
    events = _run_parity(Seaquest(), 2000, seed=seed)
    assert events["episodes"] >= 500
    _assert_every_rule_was_reached(events)


def test_initial_state_equals_minatar_reset():
    env = minatar.Environment("seaquest")
    env.seed(0)
    env.reset()
    task = Seaquest()
    state = task.initial_state(tf.constant([0, 10]), 3)
    _assert_states_equal(state, task.from_minatar([env.env] * 3, rng=state.rng), "reset")
    np.testing.assert_array_equal(task.observe(state).numpy(), np.stack([env.state()] * 3))


def test_steps_eagerly_and_under_xla_alike():
    """From scrambled mid-game states the task steps and observes eagerly as under XLA, exactly."""
    task, rng = Seaquest(), np.random.default_rng(6)
    games = _minatar_envs("seaquest", task, 6)
    for game in games:
        _scramble(game, rng)
    eager = xla = task.from_minatar([g.env for g in games], rng=initial_rng(tf.constant([0, 8]), NUM_ENVS))
    xla_transition = tf.function(task.transition, jit_compile=True, autograph=False)
    for _ in range(12):
        action = tf.constant(rng.choice(6, NUM_ENVS, p=ACTION_ODDS), tf.int32)
        eager_result, xla_result = task.transition(eager, action), xla_transition(xla, action)
        for a, b in zip(tf.nest.flatten(eager_result), tf.nest.flatten(xla_result)):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
        eager, xla = eager_result[0], xla_result[0]
    np.testing.assert_array_equal(
        task.observe(eager).numpy(), tf.function(task.observe, jit_compile=True, autograph=False)(xla).numpy()
    )


def test_registry_spaces_and_time_limits():
    env = kppo.envs.make("seaquest_minatar")
    task = env.unwrapped.task
    assert isinstance(task, Seaquest) and task.sticky_action_prob == 0.1 and task.difficulty_ramping
    assert env.max_episode_steps == NO_TIME_LIMIT and kppo.envs.resolve_name("seaquest_minatar") == task.gym_id
    gym_env = minatar_gym.BaseEnv("seaquest", use_minimal_action_set=True)
    assert task.gym_id == "MinAtar/Seaquest-v1" and task.action_space == gym_env.action_space
    assert task.observation_space.shape == gym_env.observation_space.shape == (10, 10, 10)
    assert task.minatar_actions() == gym_env.action_set
    assert kppo.envs.resolve_name("seaquest_minatar_gymnax") == "Seaquest-MinAtar"
    gymnax = kppo.envs.make("Seaquest-MinAtar")
    assert isinstance(gymnax.unwrapped.task, SeaquestGymnax) and gymnax.max_episode_steps == 1000
    assert gymnax.unwrapped.task.sticky_action_prob == 0.0
    assert Seaquest(tf.float64).observe(task.initial_state(tf.constant([0, 9]), 2)).dtype == tf.float64


def test_from_minatar_refuses_more_entries_than_slots():
    game = minatar.Environment("seaquest").env
    game.divers = [[0, 1, 1, 5]] * 3
    with pytest.raises(ValueError, match="divers: expected at most 2 entries, got 3"):
        Seaquest().from_minatar([game])


#: Hand-made frames: (what, minatar attributes after `reset`, action, the five spawn draws). The sub is at (x, y)
#: = (0, 6) facing left unless set; no spawn is due unless set.
_Y3 = 2 * 2**21 + 5  # randint(1, 9) draws row 3
EDGE_CASES = [
    (
        "a bullet takes the fish before the sub",
        {"f_bullets": [[3, 4, 1]], "e_fish": [[4, 4, 1, 3]], "e_subs": [[4, 4, 1, 3, 5]]},
        0,
    ),
    (
        "a bullet takes the first fish of the list",
        {"f_bullets": [[3, 4, 1]], "e_fish": [[4, 4, 1, 3], [4, 4, 1, 2]]},
        0,
    ),
    (
        "the newest of two subs moving onto a bullet takes it",
        {"f_bullets": [[6, 4, 0]], "e_subs": [[4, 4, 1, 0, 5], [4, 4, 1, 0, 7]]},
        0,
    ),
    ("a sub hit in its move still fires", {"f_bullets": [[6, 4, 0]], "e_subs": [[4, 4, 1, 0, 0], [8, 4, 1, 0, 0]]}, 0),
    (
        "a fish moves onto a bullet",
        {"f_bullets": [[6, 4, 0]], "e_fish": [[4, 4, 1, 0]], "e_subs": [[2, 4, 1, 1, 3]]},
        5,
    ),
    (
        "the newest diver is picked up by the fifth",
        {"sub_x": 3, "sub_y": 2, "diver_count": 5, "divers": [[3, 2, 1, 2], [3, 2, 1, 4]]},
        0,
    ),
    ("no seventh diver", {"sub_x": 3, "sub_y": 2, "diver_count": 6, "divers": [[2, 2, 1, 0]]}, 0),
    ("surfacing with 6 divers", {"sub_x": 5, "sub_y": 1, "diver_count": 6, "oxygen": 130, "ramp_index": 3}, 2),
    ("surfacing with -1 divers", {"sub_x": 5, "sub_y": 1, "diver_count": -1, "e_spawn_speed": 1, "move_speed": 3}, 2),
    ("surfacing with no diver", {"sub_x": 5, "sub_y": 1}, 2),
    ("an enemy bullet passes through the sub", {"sub_x": 3, "sub_y": 4, "e_bullets": [[3, 4, 1]]}, 0),
    ("an enemy bullet meets the sub", {"sub_x": 3, "sub_y": 4, "e_bullets": [[4, 4, 0]]}, 5),
    ("the sub swims into a fish", {"sub_x": 3, "sub_y": 4, "sub_or": True, "e_fish": [[4, 4, 0, 2]]}, 3),
    ("the oxygen is out", {"sub_y": 4, "oxygen": 0}, 0),
    ("a spawn is blocked by an enemy heading the other way", {"e_spawn_timer": 0, "e_fish": [[5, 3, 0, 2]]}, 0),
    ("a spawn beside an enemy heading the same way", {"e_spawn_timer": 0, "e_subs": [[5, 3, 1, 2, 4]]}, 1),
    ("a diver draws first when no enemy is due", {"d_spawn_timer": 0}, 4),
    ("an enemy and a diver spawn", {"e_spawn_timer": 0, "d_spawn_timer": 0}, 4),
]


def _check_edge_cases(task: Seaquest) -> None:
    """Plays each of EDGE_CASES once in minatar and in `task`; asserts equal reward, terminal, obs and state."""
    draws = np.array([[0, 3, 1, _Y3, 2**23 + 7, 0]])  # sticky (unused), right, a sub, row 3; left, row 1
    for what, attributes, action in EDGE_CASES:
        game = minatar.Environment("seaquest", sticky_action_prob=0.0).env
        game.reset()
        game.e_spawn_timer = game.d_spawn_timer = 3
        game.sub_x, game.sub_y, game.surface = 0, 6, False
        game.__dict__.update(copy.deepcopy(attributes))
        state = task.from_minatar([game])
        next_state, reward, terminated = task.transition_from_draws(
            state, tf.constant([action]), tf.constant(draws, tf.int32)
        )
        game.random = _ReplayedRandom(draws[0, 1:])
        minatar_reward, minatar_terminal = game.act(action)
        assert (reward.numpy()[0], terminated.numpy()[0]) == (minatar_reward, minatar_terminal), what
        np.testing.assert_array_equal(task.observe(next_state).numpy()[0], game.state(), err_msg=what)
        _assert_states_equal(next_state, task.from_minatar([game], next_state.last_action, next_state.rng), what)


def test_edge_cases_match_minatar():
    _check_edge_cases(SeaquestGymnax())


def _leaky_breathe(state, ramping):
    """`_breathe` with oxygen running out twice as fast under water."""
    state, reward, terminated = _BREATHE(state, ramping)
    return state._replace(oxygen=state.oxygen - tf.cast(state.sub_y > 0, tf.int32)), reward, terminated


def _tidy_breathe(state, ramping):
    """`_breathe` without minatar's full-boat quirk: surfacing with 6 divers leaves 0 on board, not -1."""
    next_state, reward, terminated = _BREATHE(state, ramping)
    tidied = tf.equal(state.diver_count, 6) & tf.equal(next_state.diver_count, -1)
    return next_state._replace(diver_count=tf.where(tidied, 0, next_state.diver_count)), reward, terminated


def _hit_subs_hold_fire(subs, moved):
    """`_enemy_shots` without minatar's quirk: a sub hit by a bullet in its move does not fire."""
    return _ENEMY_SHOTS(subs._replace(present=subs.present & moved.present), moved)


def _oldest_first(matches, reverse=False):
    """`_first` that ignores `reverse`: the oldest enemy moving onto a bullet would take it."""
    return _FIRST(matches)


_BREATHE, _ENEMY_SHOTS, _FIRST = minatar_seaquest._breathe, minatar_seaquest._enemy_shots, minatar_seaquest._first


@pytest.mark.parametrize(
    ("name", "broken", "frames", "message"),
    [
        ("_breathe", _leaky_breathe, 300, "field oxygen"),  # random play
        ("_breathe", _tidy_breathe, 300, "field diver_count"),
        ("_enemy_shots", _hit_subs_hold_fire, 0, "a sub hit in its move still fires"),  # too rare for random play
        ("_first", _oldest_first, 0, "the newest of two subs"),
    ],
)
def test_a_broken_rule_fails_the_comparison(monkeypatch, name, broken, frames, message):
    """The comparisons are strict enough to catch one rule played differently: they fail, naming what differs
    (the random runs for everyday rules, the hand-made frames for the rare ones)."""
    monkeypatch.setattr(minatar_seaquest, name, broken)
    with pytest.raises(AssertionError, match=message):
        if frames:
            _run_parity(Seaquest(), frames, seed=5)
        else:
            _check_edge_cases(SeaquestGymnax())
