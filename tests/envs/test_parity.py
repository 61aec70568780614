"""The TF-native tasks reproduce gymnasium's classic-control environments step for step (in float64)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import kppo.envs
from kppo._tf import tf

NUM_ENVS = 16
MIN_STEPS = 650  # x 16 envs = 10,400 steps per env id, more where needed to reach the time limit
DISCRETE = ("CartPole-v1", "Acrobot-v1", "MountainCar-v0")
#: Last-bit differences between TF's and numpy's sin/cos grow exponentially in these: gymnasium is set to
#: the TF state before every step rather than only at the start of each episode.
CHAOTIC = ("CartPole-v1", "Acrobot-v1")


def _gym_obs_f64(env_id: str, s: np.ndarray) -> np.ndarray:
    """gymnasium's observation of internal states s [N, k], computed in float64 (gymnasium rounds to float32)."""
    if env_id == "Acrobot-v1":
        return np.stack([np.cos(s[:, 0]), np.sin(s[:, 0]), np.cos(s[:, 1]), np.sin(s[:, 1]), s[:, 2], s[:, 3]], 1)
    if env_id == "Pendulum-v1":
        return np.stack([np.cos(s[:, 0]), np.sin(s[:, 0]), s[:, 1]], 1)
    return s


def _policy(env_id: str, obs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Uniformly random actions for the first half of the envs; the others follow a noisy heuristic so that
    episodes also reach the goal (Acrobot, mountain cars) or the time limit (CartPole)."""
    if env_id == "CartPole-v1":
        random, greedy = rng.integers(0, 2, NUM_ENVS), (obs @ [0.1, 0.5, 10.0, 2.0] > 0).astype(np.int64)
    elif env_id == "Acrobot-v1":
        random, greedy = rng.integers(0, 3, NUM_ENVS), np.where(obs[:, 5] > 0, 2, 0)
    elif env_id == "MountainCar-v0":
        random, greedy = rng.integers(0, 3, NUM_ENVS), np.where(obs[:, 1] > 0, 2, 0)
    elif env_id == "MountainCarContinuous-v0":
        # Within [-1, 1]: gymnasium's clipping returns a Python float, which turns its arithmetic to float32.
        random, greedy = rng.uniform(-1, 1, (NUM_ENVS, 1)), np.sign(obs[:, 1:]) * rng.uniform(0.5, 1, (NUM_ENVS, 1))
    else:  # Pendulum: beyond the torque bounds, to exercise the clipping
        random, greedy = rng.uniform(-3, 3, (NUM_ENVS, 1)), np.clip(-3 * obs[:, 2:], -3, 3)
    use_greedy = (np.arange(NUM_ENVS) >= NUM_ENVS // 2) & (rng.random(NUM_ENVS) > 0.1)
    return np.where(use_greedy.reshape((-1,) + (1,) * (random.ndim - 1)), greedy, random)


@pytest.mark.parametrize("env_id", list(kppo.envs.TASKS))
def test_matches_gymnasium(env_id):
    """Runs 16 TF envs and 16 gymnasium envs side by side on the same actions for >= 650 steps.

    Each gymnasium env is reset with its TF env and set to the TF env's initial internal state, then
    follows on its own (for CHAOTIC envs it is set to the TF state before every step, its TimeLimit counter
    running on). Compared at every step: flags exactly, rewards, next states and observations to 1e-9
    (float64), and gymnasium's float32 observations to 1e-6.
    """
    env = kppo.envs.make(env_id, dtype=tf.float64, episode_statistics=False)
    task = env.unwrapped.task

    @tf.function(autograph=False)  # as kppo's runners trace the envs
    def step(state, action, key):
        next_task_state, _, _ = task.transition(state.task, action)  # the pre-reset state, for comparison
        return env.step(state, action, key), next_task_state

    rng = np.random.default_rng(0)
    gym_envs = [gym.make(env_id) for _ in range(NUM_ENVS)]
    state, obs = env.reset(tf.constant([0, 0]), NUM_ENVS)
    for i, gym_env in enumerate(gym_envs):
        gym_env.reset(seed=i)
    action_dtype = tf.int32 if env_id in DISCRETE else tf.float64
    num_terminated = num_truncated = 0
    sync = np.ones(NUM_ENVS, bool)
    for t in range(max(MIN_STEPS, env.max_episode_steps + 1)):
        action = _policy(env_id, obs.numpy(), rng)
        tf_state = task.to_gym_state(state.task)
        for i in np.flatnonzero(sync):
            gym_envs[i].unwrapped.state = tf_state[i]
        result, next_task_state = step(state, tf.constant(action, action_dtype), tf.constant([1, t]))
        gym_steps = [e.step(int(a) if env_id in DISCRETE else a) for e, a in zip(gym_envs, action)]
        gym_obs, gym_reward, gym_terminated, gym_truncated, _ = map(np.array, zip(*gym_steps))
        gym_state = np.stack([np.asarray(e.unwrapped.state, np.float64) for e in gym_envs])

        np.testing.assert_array_equal(result.terminated.numpy(), gym_terminated)
        np.testing.assert_array_equal(result.truncated.numpy(), gym_truncated & ~gym_terminated)
        np.testing.assert_allclose(result.reward.numpy(), gym_reward, rtol=0, atol=1e-9)
        np.testing.assert_allclose(task.to_gym_state(next_task_state), gym_state, rtol=0, atol=1e-9)
        np.testing.assert_allclose(result.final_obs.numpy(), _gym_obs_f64(env_id, gym_state), rtol=0, atol=1e-9)
        np.testing.assert_allclose(result.final_obs.numpy(), gym_obs, rtol=1e-6, atol=1e-6)

        done = (result.terminated | result.truncated).numpy()
        for i in np.flatnonzero(done):
            gym_envs[i].reset()  # restarts the TimeLimit counter; the state is set before the next step
        sync = done | (env_id in CHAOTIC)
        reset_state = task.to_gym_state(result.state.task)[done]
        np.testing.assert_allclose(result.obs.numpy()[done], _gym_obs_f64(env_id, reset_state), rtol=0, atol=1e-12)
        num_terminated += int(gym_terminated.sum())
        num_truncated += int((gym_truncated & ~gym_terminated).sum())
        state, obs = result.state, result.obs

    assert num_truncated > 0
    assert num_terminated > 0 or env_id == "Pendulum-v1"


@pytest.mark.parametrize("env_id", list(kppo.envs.TASKS))
def test_spaces_and_time_limit_match_gymnasium(env_id):
    gym_env = gym.make(env_id)
    task = kppo.envs.TASKS[env_id]()
    assert task.gym_id == env_id
    assert task.observation_space == gym_env.observation_space
    assert task.action_space == gym_env.action_space
    assert task.max_episode_steps == gym_env.spec.max_episode_steps


EDGE_CASES = {  # env id: (gymnasium states [N, k], actions [N]), hitting bounds, wrapping, walls and goals
    "CartPole-v1": ([[2.39, 1.0, 0.0, 0.0], [0.0, 0.0, -0.2, -1.0], [0.1, -0.3, 0.05, 0.4]], [1, 0, 0]),
    "Acrobot-v1": (
        [[3.1, -3.1, 12.0, 27.0], [-3.1, 3.1, -12.5, -28.0], [1.9, -2.5, 7.6, 23.2], [2.0, 0.3, 0.0, 0.0]],
        [2, 0, 1, 1],
    ),
    "MountainCar-v0": ([[-1.19, -0.069], [0.4, 0.0699], [0.49, 0.02], [-1.2, 0.0]], [0, 2, 1, 0]),
    "MountainCarContinuous-v0": ([[-1.19, -0.069], [0.4, 0.0699], [0.44, 0.02], [-1.2, 0.0]], [-1, 1, 0.5, -0.7]),
    "Pendulum-v1": ([[3.1, 7.9], [-40.0, -7.95], [0.0, 0.0]], [2.0, -1.5, 0.3]),
}


@pytest.mark.parametrize("env_id", list(EDGE_CASES))
def test_edge_states_match_gymnasium(env_id):
    """Clipping, wrapping, the left wall and the goal, from hand-picked states (one step each, float64)."""
    gym_states, actions = EDGE_CASES[env_id]
    task = kppo.envs.TASKS[env_id](dtype=tf.float64)
    gym_states = task.to_gym_state(task.from_gym_state(np.array(gym_states)))  # MountainCarContinuous: float32
    actions = np.array(actions) if env_id in DISCRETE else np.array(actions, np.float64)[:, None]
    next_state, reward, terminated = task.transition(task.from_gym_state(gym_states), tf.constant(actions))
    for i, gym_state in enumerate(gym_states):
        gym_env = gym.make(env_id).unwrapped
        gym_env.reset(seed=0)
        gym_env.state = gym_state
        _, gym_reward, gym_terminated, _, _ = gym_env.step(int(actions[i]) if env_id in DISCRETE else actions[i])
        assert terminated[i].numpy() == gym_terminated
        np.testing.assert_allclose(reward[i].numpy(), gym_reward, rtol=0, atol=1e-9)
        np.testing.assert_allclose(task.to_gym_state(next_state)[i], gym_env.state, rtol=0, atol=1e-9)


def test_mountain_car_continuous_clips_the_force_not_the_reward():
    task = kppo.envs.MountainCarContinuous(dtype=tf.float64)
    state = task.from_gym_state(np.array([[-0.5, 0.01]] * 4))
    next_state, reward, _ = task.transition(state, tf.constant([[1.0], [1.5], [-1.0], [-2.0]], tf.float64))
    np.testing.assert_array_equal(task.to_gym_state(next_state)[0::2], task.to_gym_state(next_state)[1::2])
    np.testing.assert_allclose(reward, [-0.1, -0.225, -0.1, -0.4], rtol=0, atol=1e-12)
    gym_env = gym.make("MountainCarContinuous-v0").unwrapped
    gym_env.reset(seed=0)
    gym_env.state = task.to_gym_state(state)[1]
    # an out-of-range action makes gymnasium compute in float32 (its clipping returns a Python float)
    assert gym_env.step(np.array([1.5]))[1] == pytest.approx(reward[1].numpy(), abs=1e-9)
    np.testing.assert_allclose(gym_env.state, task.to_gym_state(next_state)[1], rtol=0, atol=1e-7)


def _random_actions(space: gym.spaces.Space, num_envs: int, rng: np.random.Generator) -> tf.Tensor:
    if isinstance(space, gym.spaces.Discrete):
        return tf.constant(rng.integers(0, space.n, num_envs), tf.int32)
    return tf.constant(rng.uniform(space.low, space.high, (num_envs, *space.shape)), tf.float32)


def _assert_nests_close(a, b):
    for x, y in zip(tf.nest.flatten(a), tf.nest.flatten(b)):
        if x.dtype.is_floating:
            np.testing.assert_allclose(x.numpy(), y.numpy(), rtol=1e-5, atol=1e-5)
        else:
            np.testing.assert_array_equal(x.numpy(), y.numpy())


@pytest.mark.parametrize("env_id", list(kppo.envs.TASKS))
def test_step_under_xla_matches_eager(env_id):
    """float32 steps under `tf.function(jit_compile=True)` equal eager ones, auto-resets included.

    FixedInit makes the reset states deterministic: stateless RNG samples differ between eager and XLA."""
    rng = np.random.default_rng(0)
    key = tf.constant([0, 1])
    env = kppo.envs.make(env_id, max_episode_steps=3, fixed_init=True)
    xla_step = tf.function(env.step, jit_compile=True, autograph=False)
    eager_state = xla_state = env.reset(key, 4)[0]
    num_truncated = 0
    for _ in range(7):
        action = _random_actions(env.action_space, 4, rng)
        eager, xla = env.step(eager_state, action, key), xla_step(xla_state, action, key)
        _assert_nests_close(eager, xla)
        eager_state, xla_state = eager.state, xla.state
        num_truncated += int(eager.truncated.numpy().sum())
    assert num_truncated > 0

    env = kppo.envs.make(env_id)  # the plain env, which samples its reset states, compiles too
    state = env.reset(key, 4)[0]
    action = _random_actions(env.action_space, 4, rng)
    eager, xla = (
        env.step(state, action, key),
        tf.function(env.step, jit_compile=True, autograph=False)(state, action, key),
    )
    _assert_nests_close(eager[1:], xla[1:])  # all but the state: obs, reward, flags, final_obs
