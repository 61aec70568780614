"""The compiled TF-native rollout (`kppo.rollout.native`): trajectory layout, GAE targets, and the evaluation round."""

import numpy as np

from kppo.training.runners.settings import agent_spec
import kppo
from kppo import envs
from kppo._tf import tf
from kppo.agent.agent import make_agent
from kppo.rollout.native import collect_rollout, evaluation_episodes, initial_rollout_state
from kppo.training.runners.settings import rollout_settings


def _setup(**changes):
    config = kppo.Config(num_envs=3, num_steps=40, num_hidden_units=8, **changes)
    env = envs.make("CartPole-v1")
    agent = make_agent(agent_spec(config), 4, env.action_space)
    state = initial_rollout_state(env, agent, tf.constant([0, 1]), config.num_envs, config.normalize_obs)
    return config, env, agent, state


def test_a_rollout_is_time_major_and_its_returns_are_advantages_plus_values():
    config, env, agent, state = _setup()
    state, rollout = collect_rollout(env, agent, rollout_settings(config), state, tf.constant([2, 3]))
    traj = rollout.trajectory
    assert traj.obs.shape == (40, 3, 4) and traj.action.shape == (40, 3) and rollout.advantages.shape == (40, 3)
    np.testing.assert_allclose(rollout.returns.numpy(), (rollout.advantages + traj.value).numpy(), rtol=1e-6)
    ended = (traj.terminated | traj.truncated).numpy()
    assert ended.any()  # a random CartPole policy ends episodes within 40 steps
    # episode statistics only where an episode ended; CartPole's reward is 1 per step, so return == length
    np.testing.assert_array_equal(traj.episode_return.numpy() != 0, ended)
    np.testing.assert_array_equal(traj.episode_return.numpy(), traj.episode_length.numpy())
    assert state.obs.shape == (3, 4)


def test_normalized_observations_are_counted_once_per_step():
    config, env, agent, state = _setup(normalize_obs=True)
    state, _ = collect_rollout(env, agent, rollout_settings(config), state, tf.constant([2, 3]))
    assert float(state.obs_stats.count) == np.float32(1e-4 + 3 + 3 * 40)  # reset obs + one per env step


def test_the_configs_clips_bound_normalized_observations_and_scaled_rewards():
    config, env, agent, state = _setup(normalize_obs=True, normalize_reward=True, clip_obs=0.5, clip_reward=0.2)
    _, rollout = collect_rollout(env, agent, rollout_settings(config), state, tf.constant([2, 3]))
    obs, reward = np.abs(rollout.trajectory.obs.numpy()), np.abs(rollout.trajectory.reward.numpy())
    assert obs.max() == np.float32(0.5) and reward.max() == np.float32(0.2)  # both clips bind
    assert (obs < 0.5).any() and (reward < 0.2).any()  # and pass what lies inside them
    unclipped = collect_rollout(env, agent, rollout_settings(config.replace(clip_obs=10.0)), state, tf.constant([2, 3]))
    assert np.abs(unclipped[1].trajectory.obs.numpy()).max() > 0.5


def test_evaluation_plays_each_envs_first_episode_deterministically():
    _, env, agent, state = _setup()
    result, trajectory = evaluation_episodes(env, agent, state.obs_stats, tf.constant([4, 5]), 5, False)
    again, _ = evaluation_episodes(env, agent, state.obs_stats, tf.constant([4, 5]), 5, False)
    np.testing.assert_array_equal(result.returns.numpy(), again.returns.numpy())
    np.testing.assert_array_equal(result.lengths.numpy(), trajectory.active.numpy().sum(axis=0))
    assert trajectory.obs.shape[1] == 5 and result.finished.numpy().all()


def test_a_tf_native_task_with_action_masks_acts_within_them_and_evaluates_with_them():
    from tests.helpers.masked_envs import MaskedChoiceTask

    config = kppo.Config(num_envs=4, num_steps=40, num_hidden_units=8, action_masks=True, num_eval_envs=3)
    env = envs.wrap(MaskedChoiceTask())
    agent = make_agent(agent_spec(config), 5, env.action_space)
    state = initial_rollout_state(env, agent, tf.constant([0, 1]), config.num_envs, config.normalize_obs)
    _, rollout = collect_rollout(env, agent, rollout_settings(config), state, tf.constant([2, 3]))
    traj = rollout.trajectory
    target = np.argmax(traj.obs.numpy(), axis=-1)  # the task's mask: the target and target + 2
    want = np.eye(5, dtype=bool)[target] | np.eye(5, dtype=bool)[(target + 2) % 5]
    np.testing.assert_array_equal(traj.action_mask.numpy(), want)
    assert np.take_along_axis(want, traj.action.numpy()[..., None], axis=2).all()
    assert (traj.reward.numpy() >= 0).all()  # -1 only for a masked action
    result, records = evaluation_episodes(env, agent, state.obs_stats, tf.constant([4, 5]), 3, False, action_masks=True)
    assert (records.reward.numpy() >= 0).all()
    unmasked, _ = evaluation_episodes(env, agent, state.obs_stats, tf.constant([4, 5]), 3, False)
    assert (result.returns.numpy() >= unmasked.returns.numpy()).all()
