"""The TF-native MinAtar games reproduce the `minatar` package frame for frame, sticky actions included."""

from __future__ import annotations

import numpy as np
import pytest

import kppo.envs
from kppo._tf import tf
from kppo.envs.tasks.minatar import DRAW_BITS, NO_TIME_LIMIT, draw, initial_rng
from kppo.envs.tasks.minatar_asterix import Asterix, AsterixGymnax
from kppo.envs.tasks.minatar_breakout import Breakout, BreakoutGymnax
from kppo.envs.tasks.minatar_freeway import Freeway, FreewayGymnax
from kppo.envs.tasks.minatar_space_invaders import SpaceInvaders, SpaceInvadersGymnax

minatar = pytest.importorskip("minatar")
minatar_gym = pytest.importorskip("minatar.gym")

NUM_ENVS = 16
#: game module name in minatar -> (task class, frames per parity run); 16 envs x frames >= 6,400 frames per game.
GAMES = {
    "breakout": (Breakout, 400),
    "asterix": (Asterix, 400),
    "freeway": (Freeway, 400),
    "space_invaders": (SpaceInvaders, 400),
}
GYMNAX = {
    "breakout": BreakoutGymnax,
    "asterix": AsterixGymnax,
    "freeway": FreewayGymnax,
    "space_invaders": SpaceInvadersGymnax,
}


class _ReplayedRandom:
    """Stands in for minatar's numpy RandomState for one frame: hands out the TF task's draws in call order.

    A draw m (an int in [0, 2**24)) is the float (m + 0.5) / 2**24 for `rand` and low + m * (high - low) // 2**24
    for `randint`, the mappings `kppo.envs.tasks.minatar.bernoulli` and `randint` assume."""

    def __init__(self, draws: np.ndarray):
        self.draws = [int(m) for m in draws]
        self.used = 0

    def _take(self, size):
        count = 1 if size is None else int(np.prod(size))
        if self.used + count > len(self.draws):
            raise AssertionError(f"minatar drew more than the task's {len(self.draws)} draws this frame")
        values = np.array(self.draws[self.used : self.used + count], np.int64)
        self.used += count
        return values if size is not None else values[0]

    def rand(self, *size):
        return (self._take(size or None) + 0.5) / 2**DRAW_BITS

    def randint(self, low, high=None, size=None):
        low, high = (0, low) if high is None else (low, high)
        return low + (self._take(size) * (high - low) >> DRAW_BITS)


def _scramble(game: str, env, rng: np.random.Generator) -> None:
    """Moves a freshly reset minatar game to a random mid-game situation, so that the rare events (crossings and
    time-outs, difficulty ramps, cleared waves) happen within a few hundred frames."""
    g = env.env
    if game == "freeway":
        g.pos, g.terminate_timer = int(rng.integers(1, 4)), int(rng.integers(0, 200))
    elif game == "asterix":
        g.spawn_speed, g.move_speed = int(rng.integers(1, 11)), int(rng.integers(1, 6))
        g.spawn_timer, g.move_timer = int(rng.integers(0, g.spawn_speed + 1)), int(rng.integers(0, g.move_speed + 1))
        g.ramp_timer, g.ramp_index = int(rng.integers(-1, 30)), int(rng.integers(0, 20))
    elif game == "space_invaders":
        aliens = g.alien_map * (rng.random((10, 10)) < 0.1)
        aliens[rng.integers(0, 4), rng.integers(2, 8)] = 1
        g.alien_map, g.enemy_move_interval = aliens, int(rng.integers(6, 13))
        g.alien_move_timer = int(rng.integers(0, g.enemy_move_interval + 1))


def _minatar_envs(game: str, task, seed: int) -> list:
    envs = []
    for i in range(NUM_ENVS):
        env = minatar.Environment(
            game, sticky_action_prob=task.sticky_action_prob, difficulty_ramping=task.difficulty_ramping
        )
        env.seed(seed * 1000 + i)
        env.reset()
        envs.append(env)
    return envs


def _assert_states_equal(actual, expected, where: str):
    for name, a, e in zip(actual._fields, actual, expected):
        np.testing.assert_array_equal(a.numpy(), e.numpy(), err_msg=f"{where}: field {name}")


def _run_parity(game: str, task, num_frames: int, seed: int = 0) -> tuple[int, float]:
    """Steps NUM_ENVS minatar envs and the TF task side by side on the same random actions and random draws.

    Before every frame each minatar env's random generator is replaced by the TF task's draws for that frame
    (`_ReplayedRandom`), the sticky-action draw first, as minatar's `Environment.act` draws it first. Compared at
    every frame: reward, terminal, observation, and the whole next state as converted from minatar's attributes.
    Finished minatar episodes are reset with minatar's own generator and the TF state is converted from them.
    Returns (episodes finished, total reward, frames where the previous action was executed instead)."""
    rng = np.random.default_rng(seed)
    envs = _minatar_envs(game, task, seed)
    for env in envs[::2]:
        _scramble(game, env, rng)
    full_actions = task.minatar_actions()
    reset_randoms = [env.random for env in envs]

    def convert(rng_state):
        last_action = [full_actions.index(env.last_action) for env in envs]
        return task.from_minatar([env.env for env in envs], last_action, rng_state)

    @tf.function(autograph=False)  # as kppo's runners trace the tasks
    def frame(state, actions):
        next_state, reward, terminated = task.transition(state, actions)
        return task.draws(state), next_state, reward, terminated, task.observe(next_state)

    state = convert(initial_rng(tf.constant([seed, 1]), NUM_ENVS))
    num_episodes, total_reward, num_sticky = 0, 0.0, 0
    for t in range(num_frames):
        actions = rng.integers(0, len(full_actions), NUM_ENVS)
        draws, next_state, reward, terminated, obs = frame(state, tf.constant(actions, tf.int32))
        results = []
        for env, action, env_draws in zip(envs, actions, draws.numpy()):
            env.random = env.env.random = _ReplayedRandom(env_draws)
            results.append(env.act(full_actions[action]))
        minatar_reward, minatar_terminal = map(np.array, zip(*results))

        where = f"{game} frame {t}"
        np.testing.assert_array_equal(reward.numpy(), minatar_reward, err_msg=where)
        np.testing.assert_array_equal(terminated.numpy(), minatar_terminal, err_msg=where)
        np.testing.assert_array_equal(obs.numpy(), np.stack([e.state() for e in envs]), err_msg=where)
        state = convert(next_state.rng)
        _assert_states_equal(next_state, state, where)

        for i in np.flatnonzero(minatar_terminal):
            envs[i].random = envs[i].env.random = reset_randoms[i]
            envs[i].reset()
            if rng.random() < 0.5:
                _scramble(game, envs[i], rng)
        if minatar_terminal.any():
            state = convert(next_state.rng)
        num_episodes += int(minatar_terminal.sum())
        total_reward += float(minatar_reward.sum())
        num_sticky += int(np.sum(next_state.last_action.numpy() != actions))
    return num_episodes, total_reward, num_sticky


@pytest.mark.parametrize("game", list(GAMES))
def test_matches_minatar_frame_by_frame(game):
    """minatar's defaults (sticky actions, difficulty ramping): 16 envs x 400 frames per game, compared exactly."""
    task_class, num_frames = GAMES[game]
    num_episodes, total_reward, num_sticky = _run_parity(game, task_class(), num_frames)
    assert num_episodes >= 10 and total_reward > 0
    assert 0.05 < num_sticky / (NUM_ENVS * num_frames) < 0.1  # repeats of a different action: 0.1 * (1 - 1/n)


@pytest.mark.parametrize("game", list(GAMES))
def test_matches_minatar_without_sticky_actions_or_ramping(game):
    """The gymnax variants (no sticky actions) with difficulty_ramping=False."""
    num_episodes, _, num_sticky = _run_parity(game, GYMNAX[game](difficulty_ramping=False), 150, seed=1)
    assert num_episodes >= 5 and num_sticky == 0


@pytest.mark.slow
@pytest.mark.parametrize("game", list(GAMES))
@pytest.mark.parametrize("seed", [2, 3, 4])
def test_matches_minatar_over_long_runs(game, seed):
    """16 envs x 2,000 frames per seed: late-game states (fast Asterix spawns, later SpaceInvaders waves)."""
    num_episodes, total_reward, _ = _run_parity(game, GAMES[game][0](), 2000, seed=seed)
    assert num_episodes >= 10 and total_reward > 0


def test_breakout_edge_cases_match_minatar():
    """Hand-made frames: a brick right after a brick (passed through), the last brick (refill at the bottom), the
    paddle under the ball (straight back) or where it lands (angled back), and the corners."""
    game = minatar.Environment("breakout", sticky_action_prob=0.0).env
    cases = []  # (ball_x, ball_y, ball_dir, pos, strike, bricks-to-keep, action)
    cases += [(4, 4, 0, 4, True, None, 0), (4, 4, 0, 4, False, None, 0)]  # brick at (3, 3): strike or not
    cases += [(3, 8, 2, 4, False, [(1, 0)], 0), (3, 8, 2, 3, False, [], 0), (3, 8, 2, 2, False, [], 2)]
    cases += [(0, 0, 0, 0, False, None, 1), (9, 8, 2, 9, False, None, 2), (9, 8, 2, 8, False, None, 0)]
    cases += [(9, 1, 1, 4, False, [], 0), (0, 4, 0, 4, False, [(3, 0)], 0)]
    task = Breakout(sticky_action_prob=0.0)
    for ball_x, ball_y, ball_dir, pos, strike, keep, action in cases:
        game.reset()
        game.ball_x, game.ball_y, game.ball_dir, game.pos, game.strike = ball_x, ball_y, ball_dir, pos, strike
        game.last_x, game.last_y = ball_x, ball_y
        if keep is not None:
            game.brick_map[:] = 0
            for y, x in keep:
                game.brick_map[y, x] = 1
        state = task.from_minatar([game])
        next_state, reward, terminated = task.transition(state, tf.constant([action]))
        minatar_reward, minatar_terminal = game.act(task.minatar_actions()[action])
        where = f"case {(ball_x, ball_y, ball_dir, pos, strike, keep, action)}"
        assert (reward.numpy()[0], terminated.numpy()[0]) == (minatar_reward, minatar_terminal), where
        np.testing.assert_array_equal(task.observe(next_state).numpy()[0], game.state(), where)
        _assert_states_equal(next_state, task.from_minatar([game], next_state.last_action, next_state.rng), where)


def test_breakout_initial_states_are_distributed_as_minatar():
    """minatar starts the ball at (3, 0) heading down-right or at (3, 9) heading down-left, each with odds 1/2."""
    minatar_obs = set()
    for seed in range(40):
        env = minatar.Environment("breakout")
        env.seed(seed)
        env.reset()
        minatar_obs.add(env.state().tobytes())
    assert len(minatar_obs) == 2
    task = Breakout()
    state = task.initial_state(tf.constant([3, 4]), 20_000)
    obs = task.observe(state).numpy().astype(bool)
    assert {o.tobytes() for o in obs} == minatar_obs
    start_right = (state.ball_x.numpy() == 9).mean()
    assert abs(start_right - 0.5) < 0.02  # 7 standard deviations (0.0035)
    np.testing.assert_array_equal(state.ball_dir.numpy(), np.where(state.ball_x.numpy() == 9, 3, 2))


@pytest.mark.parametrize("game", ["asterix", "space_invaders"])
def test_deterministic_initial_states_equal_minatar_reset(game):
    env = minatar.Environment(game)
    env.seed(0)
    env.reset()
    task = GAMES[game][0]()
    state = task.initial_state(tf.constant([0, 10]), 3)
    expected = task.from_minatar([env.env] * 3, rng=state.rng)
    _assert_states_equal(state, expected, game)
    np.testing.assert_array_equal(task.observe(state).numpy(), np.stack([env.state()] * 3))


def test_freeway_initial_car_speeds_are_distributed_as_minatar():
    """minatar draws each car's speed uniformly from +-1..5 and starts every car at column 0."""
    minatar_speeds = []
    for seed in range(200):
        env = minatar.Environment("freeway")
        env.seed(seed)
        env.reset()
        minatar_speeds += [car[3] for car in env.env.cars]
    task = Freeway()
    state = task.initial_state(tf.constant([0, 11]), 4096)
    speeds = state.car_speed.numpy().reshape(-1)
    values = [-5, -4, -3, -2, -1, 1, 2, 3, 4, 5]
    assert set(speeds) == set(minatar_speeds) == set(values)
    frequencies = np.array([(speeds == v).mean() for v in values])
    assert np.abs(frequencies - 0.1).max() < 0.01  # 6 standard deviations (0.0017) over 32,768 cars
    env = minatar.Environment("freeway")
    env.reset()
    for car, speed in zip(env.env.cars, state.car_speed.numpy()[0]):
        car[2:4] = [abs(int(speed)), int(speed)]
    _assert_states_equal(_slice(state, 0), task.from_minatar([env.env], rng=state.rng[:1]), "freeway")


@pytest.mark.parametrize("prob", [0.1, 0.25, 0.0])
def test_sticky_actions_repeat_the_previous_action_at_their_rate(prob):
    """Asking for a different action than the last every frame, the last one is executed at rate `prob`."""
    task = Breakout(sticky_action_prob=prob)
    state = task.initial_state(tf.constant([0, 5]), 4096)
    transition = tf.function(task.transition, autograph=False)
    repeats = trials = 0
    for _ in range(20):
        previous = state.last_action
        state, _, _ = transition(state, (previous + 1) % 3)
        repeats += int(tf.reduce_sum(tf.cast(state.last_action == previous, tf.int32)))
        trials += 4096
    sd = np.sqrt(prob * (1 - prob) / trials)
    assert abs(repeats / trials - prob) <= 6 * sd + 1e-12  # 0.1: sd = 0.0010 over 81,920 trials


def test_draws_are_uniform_deterministic_and_independent_across_envs():
    rng = initial_rng(tf.constant([0, 6]), 1024)
    eager, next_rng = draw(rng, 8)
    xla, xla_next_rng = tf.function(draw, jit_compile=True, autograph=False)(rng, 8)
    np.testing.assert_array_equal(eager.numpy(), xla.numpy())
    np.testing.assert_array_equal(next_rng.numpy(), xla_next_rng.numpy())
    values = eager.numpy().reshape(-1) / 2**DRAW_BITS
    assert values.min() >= 0 and values.max() < 1
    counts = np.histogram(values, bins=16, range=(0, 1))[0]  # 8192 draws, 512 expected per bin (sd 22)
    assert counts.min() > 512 - 6 * 22 and counts.max() < 512 + 6 * 22
    assert len(np.unique(eager.numpy()[:, 0])) > 1000  # envs draw from different streams
    again, _ = draw(next_rng, 8)
    assert not np.any(again.numpy() == eager.numpy()).all()


def _slice(state, i: int):
    return tf.nest.map_structure(lambda x: x[i : i + 1], state)


@pytest.mark.parametrize("game", list(GAMES))
def test_batched_envs_are_independent(game):
    """Each env of a batch steps exactly as it does alone in a batch of one (its own random stream included)."""
    task = GAMES[game][0]()
    state = task.initial_state(tf.constant([0, 7]), 4)
    actions = tf.constant(np.random.default_rng(0).integers(0, task.action_space.n, (25, 4)), tf.int32)
    transition = tf.function(task.transition, autograph=False)
    batched = state
    for t in range(25):
        batched = transition(batched, actions[t])[0]
    for i in range(4):
        alone = _slice(state, i)
        for t in range(25):
            alone = transition(alone, actions[t, i : i + 1])[0]
        _assert_states_equal(alone, _slice(batched, i), f"env {i}")


@pytest.mark.parametrize("name", ["breakout_minatar", "asterix_minatar", "freeway_minatar", "space_invaders_minatar"])
def test_env_steps_eagerly_and_under_xla_alike(name):
    """The wrapped env (auto-reset, time limit 5) resets and steps eagerly as under XLA, exactly: every draw is
    counter-based (`kppo.envs.counter_rng`)."""
    env = kppo.envs.make(name, max_episode_steps=5)
    state, obs = env.reset(tf.constant([0, 8]), 32)
    assert obs.shape == (32, *env.observation_space.shape) and obs.dtype == tf.float32
    xla_step = tf.function(env.step, jit_compile=True, autograph=False)
    eager_state = xla_state = state
    rng = np.random.default_rng(0)
    num_done = 0
    for t in range(8):
        action = tf.constant(rng.integers(0, env.action_space.n, 32), tf.int32)
        eager, xla = (
            env.step(eager_state, action, tf.constant([1, t])),
            xla_step(xla_state, action, tf.constant([1, t])),
        )
        for a, b in zip(tf.nest.flatten(eager), tf.nest.flatten(xla)):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
        eager_state, xla_state = eager.state, xla.state
        num_done += int(tf.reduce_sum(tf.cast(eager.terminated | eager.truncated, tf.int32)))
    assert num_done >= 32
    plain = kppo.envs.make(name)  # sampling its reset states, compiled
    state, _ = plain.reset(tf.constant([0, 8]), 32)
    result = tf.function(plain.step, jit_compile=True, autograph=False)(
        state, tf.zeros([32], tf.int32), tf.constant([1, 2])
    )
    assert result.obs.shape == (32, *plain.observation_space.shape)


@pytest.mark.parametrize("game", list(GAMES))
def test_registry_spaces_and_time_limits(game):
    short = f"{game}_minatar"
    env = kppo.envs.make(short)
    task = env.unwrapped.task
    assert isinstance(task, GAMES[game][0]) and task.sticky_action_prob == 0.1 and task.difficulty_ramping
    assert env.max_episode_steps == NO_TIME_LIMIT
    gym_env = minatar_gym.BaseEnv(game, use_minimal_action_set=True)
    assert kppo.envs.resolve_name(short) == task.gym_id
    assert task.gym_id.startswith("MinAtar/") and task.gym_id.endswith("-v1")
    assert task.action_space == gym_env.action_space
    assert task.observation_space.shape == gym_env.observation_space.shape
    assert task.minatar_actions() == gym_env.action_set
    gymnax_id = kppo.envs.resolve_name(f"{short}_gymnax")
    assert gymnax_id == task.gym_id[len("MinAtar/") : -len("-v1")] + "-MinAtar"
    gymnax = kppo.envs.make(gymnax_id)
    assert gymnax.max_episode_steps == 1000 and gymnax.unwrapped.task.sticky_action_prob == 0.0
    state = task.initial_state(tf.constant([0, 9]), 3)
    assert task.observe(state).dtype == tf.float32
    assert GAMES[game][0](tf.float64).observe(state).dtype == tf.float64


def test_rejects_a_sticky_probability_outside_0_1():
    with pytest.raises(ValueError, match=r"sticky_action_prob: expected a probability in \[0, 1\], got 1.5"):
        Breakout(sticky_action_prob=1.5)


def test_a_cnn_trained_in_the_compiled_loop_saves_loads_and_exports(tmp_path):
    """A TF-native image task's frames [B, 10, 10, 4] reach the statistics, checkpoints and artifacts as rows of 400
    (they were kept in the frame's shape, which `load_agent` and `kppo.export` refused)."""
    import kppo
    from kppo.agent import checkpoint
    from kppo.training.agents import load_agent

    config = kppo.Config(
        features_extractor="small_cnn",
        normalize_images=False,
        num_envs=4,
        num_steps=8,
        total_timesteps=64,
        num_minibatches=1,
        num_epochs=1,
        eval_freq=1,
        num_eval_envs=2,
    )
    result = kppo.train("breakout_minatar_gymnax", config)
    stats = result.runner_state.rollout.obs_stats
    assert tuple(stats.mean.shape) == (400,)
    path = tmp_path / "agent"
    checkpoint.save(
        path,
        result.config.to_yaml(),
        result.agent,
        stats,
        result.runner_state.rollout.return_stats,
        result.observation_space,
        result.action_space,
    )
    loaded = load_agent(path)
    frames = np.random.default_rng(0).random((3, 10, 10, 4)) < 0.2
    np.testing.assert_array_equal(
        loaded.policy.get_action(frames.astype(np.float32)), result.policy.get_action(frames.astype(np.float32))
    )
    artifact = kppo.export(result, tmp_path / "policy.tflite")
    assert artifact.path.stat().st_size > 0
