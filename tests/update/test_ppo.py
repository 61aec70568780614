import gymnasium as gym
import keras
import numpy as np
import pytest

from kppo.training.runners.settings import agent_spec
from kppo._tf import tf
from kppo.config.options import Config
from kppo.core.distributions import make_distribution
from kppo.agent.networks import make_networks
from kppo.core.types import Batch
from kppo.agent.agent import Agent
from kppo.update.ppo import UpdateSettings, minibatch_indices, ppo_update, shuffle_noise, shuffled_rows


def test_minibatch_indices_are_one_permutation_per_epoch():
    idx = minibatch_indices(tf.constant([3, 4]), 12, num_epochs=3, num_minibatches=4).numpy()
    assert idx.shape == (12, 3)
    epochs = idx.reshape(3, 12)
    for perm in epochs:
        np.testing.assert_array_equal(np.sort(perm), np.arange(12))
    assert not np.array_equal(epochs[0], epochs[1])


def test_the_sorting_network_shuffles_as_argsort_under_xla_and_vectorized_map():
    keys = tf.random.experimental.stateless_split(tf.constant([3, 4]), 3)

    def shuffles(network):
        draw = lambda key: minibatch_indices(key, 2048, 4, 4, network=network)  # noqa: E731
        return tf.function(lambda k: tf.vectorized_map(draw, k), jit_compile=True)(keys).numpy()

    np.testing.assert_array_equal(shuffles(True), shuffles(False))


def test_a_populations_shuffle_sorted_outside_the_vectorized_map_is_each_members():
    keys = tf.random.experimental.stateless_split(tf.constant([5, 6]), 3)
    noise = tf.vectorized_map(lambda key: shuffle_noise(key, 64, 3), keys)  # [members, epochs, rows]
    for network in (False, True):
        rows = tf.function(lambda n: shuffled_rows(n, 4, network), jit_compile=True)(noise).numpy()  # noqa: B023
        assert rows.shape == (3, 12, 16)
        for member, key in enumerate(keys):
            np.testing.assert_array_equal(rows[member], minibatch_indices(key, 64, 3, 4).numpy())


def _learner(seed=0, lr=1e-3):
    space = gym.spaces.Discrete(3)
    dist = make_distribution(space)
    actor, critic, _ = make_networks(agent_spec(Config(num_hidden_units=16)), 4, dist, seed)
    opt = keras.optimizers.Adam(learning_rate=lr, epsilon=1e-5)
    learner = Agent(dist, actor, critic, opt)
    opt.build(learner.variables)
    return learner


def _batch(learner, n=64, seed=0):
    rng = np.random.default_rng(seed)
    obs = tf.constant(rng.normal(size=(n, 4)), tf.float32)
    action = tf.constant(rng.integers(0, 3, n), tf.int32)
    logits = learner.actor(obs)
    return Batch(
        obs=obs,
        action=action,
        log_prob=learner.dist.log_prob(logits, action),
        value=learner.critic(obs),
        advantage=tf.constant(rng.normal(size=n), tf.float32),
        returns=tf.constant(rng.normal(size=n) + 1.0, tf.float32),
        action_mask=tf.zeros([n, 0], tf.bool),
    )


def _settings(**changes):
    base = dict(
        num_epochs=4,
        num_minibatches=4,
        clip_range=0.2,
        clip_range_vf=None,
        vf_clip_mode="max",
        ent_coef=0.0,
        vf_coef=0.5,
        max_grad_norm=0.5,
        normalize_advantage=True,
        target_kl=None,
    )
    base.update(changes)
    return UpdateSettings(**base)


def test_all_minibatch_steps_run_and_the_value_loss_falls():
    learner = _learner()
    batch = _batch(learner)

    def value_error():
        return float(tf.reduce_mean(tf.square(learner.critic(batch.obs) - batch.returns)))

    before = value_error()
    stats = tf.function(lambda b, k: ppo_update(learner, _settings(), b, k))(batch, tf.constant([1, 2]))
    assert int(stats.minibatches) == int(stats.steps) == 16
    assert int(learner.optimizer.iterations) == 16
    assert value_error() < before


def test_target_kl_stops_the_update_before_the_violating_step():
    learner = _learner(lr=3e-2)
    batch = _batch(learner)
    stats = ppo_update(learner, _settings(target_kl=1e-6), batch, tf.constant([1, 2]))
    # the first minibatch has KL 0 (policy unchanged) and is applied; a later one exceeds 1.5 * 1e-6 and stops
    assert 1 <= int(stats.steps) < 16
    assert int(stats.minibatches) == int(stats.steps) + 1
    assert int(learner.optimizer.iterations) == int(stats.steps)


def test_gradients_are_clipped_by_global_norm():
    learner = _learner(lr=1.0)
    batch = _batch(learner)
    opt = keras.optimizers.SGD(learning_rate=1.0)
    learner = learner._replace(optimizer=opt)
    opt.build(learner.variables)
    before = [v.numpy().copy() for v in learner.variables]
    stats = ppo_update(
        learner, _settings(num_epochs=1, num_minibatches=1, max_grad_norm=1e-3), batch, tf.constant([0, 1])
    )
    step = np.sqrt(sum(np.sum((v.numpy() - b) ** 2) for v, b in zip(learner.variables, before)))
    assert float(stats.grad_norm) > 1e-3  # the raw gradient was larger than the limit ...
    assert step == pytest.approx(1e-3, rel=1e-3)  # ... and SGD(lr=1) moved the parameters by exactly the limit
