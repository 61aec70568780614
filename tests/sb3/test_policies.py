"""`model.policy` as SB3's `ActorCriticPolicy`: against models SB3 2.9.2 saved (`tests/fixtures/sb3/saved`), its
`state_dict()` is SB3's (names, torch layouts, values) and its `get_distribution(...).mode()` / `predict_values`
are SB3's recorded outputs; weights move both ways; forward / evaluate_actions agree with each other and with the
distribution; gSDE's `reset_noise` fixes the exploration matrix as SB3's does."""

import numpy as np
import pytest

import kppo
from kppo.core.errors import ArgumentError
from kppo.sb3.saves.sb3_save import read_sb3_save
from tests.helpers.sb3_reference import SAVED, SAVED_CASES

CASES = {case: getattr(kppo, name) for case, name in SAVED_CASES.items() if case != "pendulum_vecnorm"}
TOL = 1e-5


@pytest.mark.parametrize("case", list(CASES))
def test_state_dict_is_sb3s_own(case):
    """Names, shapes and values of SB3's policy.pth, read back from kppo's Keras variables."""
    model = CASES[case].load(SAVED / f"{case}.zip")
    sb3 = read_sb3_save(SAVED / f"{case}.zip").state_dict
    ours = model.policy.state_dict()
    assert set(ours) == {name for name in sb3 if name != "critic.weight" and name != "critic.bias"}
    for name, value in ours.items():
        np.testing.assert_allclose(value, sb3[name], rtol=0, atol=1e-7, err_msg=name)


def test_weights_move_from_sb3_into_a_fresh_kppo_model_and_back():
    """A fresh kppo model takes SB3's state_dict (as SB3's users move weights between policies) and then acts as
    the saved SB3 model did; its own state_dict goes back unchanged."""
    data = dict(np.load(SAVED / "cartpole.npz"))
    sb3 = read_sb3_save(SAVED / "cartpole.zip").state_dict
    saved_kwargs = kppo.PPO.load(SAVED / "cartpole.zip").policy_kwargs  # the saved model's net_arch
    model = kppo.PPO("MlpPolicy", "CartPole-v1", policy_kwargs=saved_kwargs, seed=0)
    model.policy.load_state_dict(sb3)
    actions, _ = model.predict(data["obs"], deterministic=True)
    np.testing.assert_array_equal(np.asarray(actions).reshape(-1), data["actions"].reshape(-1))
    again = model.policy.state_dict()
    for name, value in again.items():
        np.testing.assert_array_equal(value, np.asarray(sb3[name], np.float32), err_msg=name)
    with pytest.raises(ValueError, match=r"state_dict: expected the tensor 'action_net\.bias'"):
        model.policy.load_state_dict({k: v for k, v in sb3.items() if k != "action_net.bias"})


@pytest.mark.parametrize("case", ["cartpole", "gsde", "multidiscrete", "multibinary"])
def test_mode_and_values_are_sb3s_recorded_outputs(case):
    model = CASES[case].load(SAVED / f"{case}.zip")
    data = dict(np.load(SAVED / f"{case}.npz"))
    obs = data["obs"].astype(np.float32)
    tensor, vectorized = model.policy.obs_to_tensor(obs)
    assert vectorized and tensor.shape[0] == len(obs)
    values = model.policy.predict_values(obs).numpy()
    np.testing.assert_allclose(values.reshape(-1), data["values"].reshape(-1), rtol=0, atol=TOL * 10)
    mode = model.policy.get_distribution(obs).mode().numpy()
    if case == "gsde":  # SB3's mode is the mean (recorded before predict clips it)
        np.testing.assert_allclose(mode, data["mean_actions"], rtol=0, atol=TOL * 10)
    else:
        np.testing.assert_array_equal(mode.reshape(data["actions"].shape), data["actions"])


def test_forward_and_evaluate_actions_agree_with_the_distribution():
    model = kppo.PPO("MlpPolicy", "Pendulum-v1", seed=0)
    obs = np.random.default_rng(0).normal(size=(5, 3)).astype(np.float32)
    actions, values, log_prob = model.policy.forward(obs)
    assert actions.shape == (5, 1) and values.shape == (5, 1) and log_prob.shape == (5,)
    again, log_prob2, entropy = model.policy.evaluate_actions(obs, actions.numpy())
    np.testing.assert_allclose(again.numpy(), values.numpy(), rtol=1e-6)
    np.testing.assert_allclose(log_prob2.numpy(), log_prob.numpy(), rtol=1e-5)
    distribution = model.policy.get_distribution(obs)
    np.testing.assert_allclose(entropy.numpy(), distribution.entropy().numpy(), rtol=1e-6)
    mode, _, _ = model.policy(obs, deterministic=True)
    np.testing.assert_array_equal(mode.numpy(), distribution.mode().numpy())
    predicted = model.policy.predict(obs, deterministic=True)[0]  # numpy acting: float32 rounding apart
    np.testing.assert_allclose(predicted, np.clip(mode.numpy(), -2, 2), rtol=1e-5, atol=1e-7)


def test_the_policys_attributes_are_sb3s():
    model = kppo.PPO("MlpPolicy", "CartPole-v1", policy_kwargs=dict(net_arch=dict(pi=[32], vf=[16])), seed=0)
    policy = model.policy
    assert policy.net_arch == dict(pi=[32], vf=[16]) and policy.features_extractor is None
    assert policy.action_net.kernel.shape == (32, 2) and policy.value_net.kernel.shape == (16, 1)
    assert policy.optimizer is model.agent.optimizer and policy.observation_space == model.observation_space
    policy.set_training_mode(False)
    assert policy.training is False
    with pytest.raises(ArgumentError, match="reset_noise\\(\\) is only available when using gSDE"):
        policy.reset_noise()
    assert isinstance(model.kppo_policy, kppo.Policy)


def test_gsde_reset_noise_fixes_the_exploration_matrix_until_the_next_reset():
    """As SB3's: between two reset_noise calls a state's sampled action is the same; after one it changes."""
    model = kppo.PPO("MlpPolicy", "Pendulum-v1", use_sde=True, seed=0)
    obs = np.ones((1, 3), np.float32)
    model.policy.reset_noise(1)
    first = [model.policy.forward(obs)[0].numpy() for _ in range(2)]
    np.testing.assert_array_equal(first[0], first[1])
    model.policy.reset_noise(1)
    assert not np.array_equal(model.policy.forward(obs)[0].numpy(), first[0])


class TwoLayers(kppo.BaseFeaturesExtractor):
    """An extractor written as SB3's docs write one (forward, features_dim), in Keras."""

    def __init__(self, observation_space, features_dim: int = 12):
        super().__init__(observation_space, features_dim)
        import keras

        self.net = keras.Sequential(kppo.create_mlp(4, features_dim, [16], activation_fn="tanh"))

    def forward(self, observations):
        return self.net(observations)


def test_a_users_sb3_style_extractor_trains_and_reports_its_features_dim():
    model = kppo.PPO(
        "MlpPolicy",
        "CartPole-v1",
        n_steps=32,
        batch_size=32,
        n_epochs=1,
        policy_kwargs=dict(features_extractor_class=TwoLayers, features_extractor_kwargs=dict(features_dim=12)),
        seed=0,
    )
    model.learn(32)
    extractor = model.policy.features_extractor
    assert getattr(extractor, "extractor", extractor).features_dim == 12
    assert model.agent.actor.head.kernel.shape[0] == 64  # net_arch's default [64, 64] after the 12 features


def test_create_mlp_is_sb3s_layer_list_and_refuses_torch_modules():
    import keras

    layers = kppo.create_mlp(4, 2, [8, 8], squash_output=True)
    kinds = [type(layer).__name__ for layer in layers]
    assert kinds == ["Dense", "Activation", "Dense", "Activation", "Dense", "Activation"]
    out = keras.Sequential(layers)(np.zeros((3, 4), np.float32))
    assert out.shape == (3, 2)
    assert kppo.create_mlp(4, -1, [8])[-1].__class__.__name__ == "Activation"  # output_dim <= 0: no last layer

    class ReLU:  # a torch.nn module class stands here for torch's, which kppo never imports
        pass

    with pytest.raises(ArgumentError, match="activation_fn: expected a Keras activation"):
        kppo.create_mlp(4, 2, [8], activation_fn=ReLU)
    with pytest.raises(ArgumentError, match="features_dim: expected an integer > 0, got 0"):
        kppo.BaseFeaturesExtractor(None, 0)
