"""The gymnasium path of `kppo.train`: host rollout, every supported space kind, truncation bootstrapping."""

import gymnasium as gym
import numpy as np
import pytest

from kppo.training.runners.settings import agent_spec
import kppo
from kppo._tf import tf
from kppo.gym_envs.make import gym_vec_env
from kppo.rollout.gymnasium import HostRolloutState, collect_host_rollout
from kppo.rollout.finish import finish_rollout
from kppo.core import normalization
from kppo.agent.agent import make_agent
from kppo.training.runners.settings import rollout_settings

TINY = dict(num_envs=4, num_steps=16, total_timesteps=4 * 16 * 4, eval_freq=2, num_eval_envs=2, num_hidden_units=16)


class GridEnv(gym.Env):
    """Box(2, 3) observations and a MultiDiscrete([3, 2]) action; episodes of at most 10 steps."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2, 3), np.float32)
    action_space = gym.spaces.MultiDiscrete([3, 2])

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self.observation_space.sample(), {}

    def step(self, action):
        assert self.action_space.contains(np.asarray(action)), action
        self.t += 1
        reward = float(action[0] == 2) + float(action[1] == 0)
        return self.observation_space.sample(), reward, False, self.t >= 10, {}


class DictEnv(gym.Env):
    """Dict-of-Box observations and a MultiBinary(3) action; terminates at random."""

    observation_space = gym.spaces.Dict(
        {"position": gym.spaces.Box(-1.0, 1.0, (2,), np.float32), "speed": gym.spaces.Box(0.0, 1.0, (1,), np.float32)}
    )
    action_space = gym.spaces.MultiBinary(3)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self.observation_space.sample(), {}

    def step(self, action):
        assert self.action_space.contains(np.asarray(action, np.int8)), action
        return self.observation_space.sample(), float(np.sum(action)), bool(self.np_random.random() < 0.1), False, {}


@pytest.mark.parametrize(
    "env, changes",
    [
        ("CartPole-v1", {"env_backend": "gymnasium"}),
        ("Pendulum-v1", {"env_backend": "gymnasium", "squash": True, "normalize_obs": True, "normalize_reward": True}),
        (lambda: gym.wrappers.TimeLimit(GridEnv(), 10), {}),
        (lambda: gym.wrappers.TimeLimit(DictEnv(), 20), {"normalize_obs": True}),
    ],
    ids=["discrete", "box", "multidiscrete-box2d-obs", "multibinary-dict-obs"],
)
def test_every_space_kind_trains_and_predicts_inside_the_space(env, changes):
    result = kppo.train(env, kppo.Config(**{**TINY, **changes}))
    assert np.all(np.isfinite(result.metrics["train/total_loss"]))
    assert result.metrics["train/total_steps"][-1] == 256
    space = result.observation_space
    batch = [space.sample() for _ in range(5)]
    for rng in (None, 3):
        if isinstance(space, gym.spaces.Dict):
            actions = result.policy.get_action({k: np.stack([b[k] for b in batch]) for k in space.keys()}, rng=rng)
            single = result.policy.get_action(batch[0], rng=rng)
        else:
            actions = result.policy.get_action(np.stack(batch), rng=rng)
            single = result.policy.get_action(batch[0], rng=rng)
        assert all(result.action_space.contains(np.asarray(a).astype(result.action_space.dtype)) for a in actions)
        if np.issubdtype(np.asarray(single).dtype, np.floating):
            # A matmul over 1 row and over 5 may take different oneDNN kernels: equal up to float rounding (CI's
            # CPU differed by 1 ulp); a wrong row, normalization or squash differs by far more.
            np.testing.assert_allclose(single, actions[0], rtol=1e-6, atol=1e-7)
        else:
            np.testing.assert_array_equal(single, actions[0])


def test_gymnasium_cartpole_learns_a_little():
    config = kppo.Config(
        num_envs=8,
        num_steps=128,
        total_timesteps=8 * 128 * 20,
        eval_freq=1,
        num_eval_envs=8,
        env_backend="gymnasium",
        learning_rate=1e-3,
    )
    result = kppo.train("CartPole-v1", config, seed=0)
    assert result.metrics["rollout/ep_rew_mean"][-1] > 40  # random policy: ~22


class ConstantEnv(gym.Env):
    """obs [0] during the episode, [1] as the final observation; reward 1; time limit 3 (truncation only)."""

    observation_space = gym.spaces.Box(-5.0, 5.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(1, np.float32), {}

    def step(self, action):
        self.t += 1
        return np.full(1, float(self.t == 3), np.float32), 1.0, False, self.t >= 3, {}


def test_truncated_episodes_bootstrap_from_the_final_observation():
    config = kppo.Config(
        num_envs=2, num_steps=4, total_timesteps=8, eval_freq=1, gamma=0.5, gae_lambda=1.0, num_hidden_units=8
    )
    vec_env = gym_vec_env(lambda: gym.wrappers.TimeLimit(ConstantEnv(), 3), 2, seed=0)
    agent = make_agent(agent_spec(config), 1, vec_env.action_space)
    settings = rollout_settings(config)

    def finish(*a):
        return finish_rollout(agent, settings, *a)

    obs = vec_env.reset(seed=0)
    state = HostRolloutState(
        obs,
        tf.zeros([2]),
        normalization.to_numpy(normalization.initial_stats([1])),
        normalization.initial_stats(()),
        np.zeros(2),
        np.zeros(2, np.int32),
    )
    _, rollout = collect_host_rollout(vec_env, agent, settings, finish, state, tf.constant([0, 1]))
    v0, v1 = (float(agent.critic(tf.constant([[x]]))[0]) for x in (0.0, 1.0))
    np.testing.assert_array_equal(rollout.trajectory.truncated.numpy()[:, 0], [False, False, True, False])
    # step 2 is truncated: its target is r + gamma * V(final obs [1]) = 1 + 0.5 * v1, not V of the reset obs [0]
    np.testing.assert_allclose(rollout.trajectory.final_value.numpy()[2], [v1, v1], rtol=1e-5)
    np.testing.assert_allclose(rollout.returns.numpy()[2], 1 + 0.5 * v1, rtol=1e-5)
    # lambda = 1, no end before: step 1 -> 1 + 0.5 * (1 + 0.5 * v1); step 3 bootstraps from V(obs [0]) at the end
    np.testing.assert_allclose(rollout.returns.numpy()[1], 1 + 0.5 * (1 + 0.5 * v1), rtol=1e-5)
    np.testing.assert_allclose(rollout.returns.numpy()[3], 1 + 0.5 * v0, rtol=1e-5)
    np.testing.assert_array_equal(rollout.trajectory.episode_return.numpy()[2], [3.0, 3.0])


class NanEnv(ConstantEnv):
    def step(self, action):
        _, *rest = super().step(action)
        return np.full(1, np.nan, np.float32), *rest


def test_nan_observations_stop_training_with_a_clear_error():
    with pytest.raises(ValueError, match="non-finite observation at step 1 in env 0"):
        kppo.train(NanEnv, kppo.Config(**TINY))


def test_unsupported_spaces_are_named():
    class TupleEnv(ConstantEnv):
        observation_space = gym.spaces.Tuple((gym.spaces.Discrete(2),))

    with pytest.raises(
        ValueError,
        match="observation_space: expected a Box, Discrete, MultiDiscrete or MultiBinary, or a Dict of those",
    ):
        kppo.train(TupleEnv, kppo.Config(**TINY))


@pytest.mark.parametrize("backend", ["tf", "gymnasium"])
def test_gsde_trains_on_both_paths(backend):
    config = kppo.Config(
        **{**TINY, "env_backend": backend, "use_sde": True, "sde_sample_freq": 4, "squash": True, "log_std_init": -1.0}
    )
    result = kppo.train("Pendulum-v1", config)
    assert np.all(np.isfinite(result.metrics["train/total_loss"]))
    names = [v.name for v in result.agent.actor.trainable_variables]
    assert any("sde_log_std" in n for n in names)
    actions = result.policy.get_action(np.zeros((4, 3), np.float32), rng=1)
    assert actions.shape == (4, 1) and np.all(np.abs(actions) <= 2.0)
