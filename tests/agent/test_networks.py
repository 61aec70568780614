import numpy as np
import pytest

from kppo._tf import tf
from kppo.config.options import ACTIVATIONS, KERNEL_INITS
from kppo.agent.networks import Actor, Critic


def _count(model):
    return sum(int(np.prod(v.shape)) for v in model.trainable_variables)


def test_shapes_and_weight_counts():
    actor = Actor(3, num_hidden_layers=2, num_hidden_units=64, gaussian=True)
    actor.build((None, 5))
    mean, log_std = actor(tf.zeros([7, 5]))
    assert mean.shape == log_std.shape == (7, 3)
    # (5*64 + 64) + (64*64 + 64) + (64*3 + 3) + log_std 3
    assert _count(actor) == 384 + 4160 + 195 + 3
    critic = Critic(num_hidden_layers=1, num_hidden_units=16)
    critic.build((None, 5))
    assert critic(tf.zeros([7, 5])).shape == (7,)
    assert _count(critic) == (5 * 16 + 16) + (16 + 1)


def test_state_dependent_std_is_a_head_on_the_features():
    actor = Actor(2, gaussian=True, state_independent_std=False, log_std_init=-0.5)
    actor.build((None, 4))
    _mean, log_std = actor(tf.random.stateless_normal([6, 4], seed=[1, 2]))
    assert log_std.shape == (6, 2)
    assert not np.allclose(log_std.numpy()[0], log_std.numpy()[1])  # depends on the observation
    np.testing.assert_allclose(log_std.numpy(), -0.5, atol=0.05)  # small head gain, bias = log_std_init


def test_state_independent_std_starts_at_log_std_init():
    actor = Actor(2, gaussian=True, log_std_init=-1.0)
    actor.build((None, 4))
    np.testing.assert_allclose(actor(tf.ones([3, 4]))[1].numpy(), -1.0)


def test_orthogonal_gains():
    actor = Actor(2, num_hidden_units=64)
    actor.build((None, 64))
    hidden = actor.hidden[1].kernel.numpy()  # 64 x 64, orthogonal with gain sqrt(2)
    np.testing.assert_allclose(hidden.T @ hidden, 2.0 * np.eye(64), atol=1e-4)
    head = actor.head.kernel.numpy()
    np.testing.assert_allclose(np.linalg.norm(head, axis=0), 0.01, rtol=1e-4)


@pytest.mark.parametrize("kernel_init", KERNEL_INITS)
@pytest.mark.parametrize("activation", ["tanh", "relu"])
def test_every_initializer_builds(kernel_init, activation):
    actor = Actor(2, kernel_init=kernel_init, activation=activation, seed=3)
    actor.build((None, 4))
    assert np.all(np.isfinite(actor(tf.ones([2, 4])).numpy()))


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_every_activation_builds(activation):
    critic = Critic(activation=activation)
    critic.build((None, 4))
    assert np.all(np.isfinite(critic(tf.ones([2, 4])).numpy()))


def test_config_round_trip_and_seeded_init():
    actor = Actor(3, num_hidden_layers=1, num_hidden_units=8, gaussian=True, state_independent_std=False, seed=7)
    actor.build((None, 4))
    clone = Actor.from_config(actor.get_config())
    clone.build((None, 4))
    assert clone.get_config() == actor.get_config()
    for a, b in zip(actor.weights, clone.weights):  # same seed -> same initial weights
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_torch_default_init_has_torchs_bound():
    """torch.nn.Linear's default kernel init is U(-1/sqrt(fan_in), 1/sqrt(fan_in)): max close to the bound, std
    bound / sqrt(3)."""
    from kppo.agent.networks import make_initializer

    kernel = make_initializer("torch_default", 1.0, seed=0)((256, 512)).numpy()
    bound = 1.0 / np.sqrt(256)
    assert np.abs(kernel).max() <= bound and np.abs(kernel).max() > 0.99 * bound
    assert kernel.std() == pytest.approx(bound / np.sqrt(3), rel=0.01)


def test_torch_default_biases_are_uniform_within_one_over_sqrt_fan_in_in_every_layer_and_head():
    """SB3 with ortho_init=False leaves torch.nn.Linear's biases: U(+-1/sqrt(fan_in)), heads included."""
    actor = Actor(
        2, num_hidden_units=256, gaussian=True, kernel_init="torch_default", bias_init="torch_default", seed=1
    )
    critic = Critic(num_hidden_units=256, kernel_init="torch_default", bias_init="torch_default", seed=2)
    actor.build((None, 17))
    critic.build((None, 17))
    for net in (actor, critic):
        for layer, fan_in in zip([*net.hidden, net.head], [17, 256, 256]):
            bias, bound = layer.bias.numpy(), 1 / np.sqrt(fan_in)
            assert np.abs(bias).max() <= bound and np.all(bias != 0), layer.name
            if bias.size > 100:  # uniform: std bound / sqrt(3)
                assert bias.std() == pytest.approx(bound / np.sqrt(3), rel=0.2)
    zero = Actor(2, seed=1)
    zero.build((None, 17))
    assert all(not layer.bias.numpy().any() for layer in [*zero.hidden, zero.head])


def test_sb3s_ortho_init_false_gives_torch_default_kernels_and_biases():
    from kppo.sb3.arguments import policy_config

    assert policy_config({"ortho_init": False})["bias_init"] == "torch_default"
    assert policy_config({})["bias_init"] == "zeros"
