"""SB3's `get_parameters` / `set_parameters` (issue 54, item 6) and the smaller SB3 2.x differences its own tests
meet (item 9): SB3's parameter names both ways, torch's RuntimeError for a missing tensor, `clip_range` as a
`FloatSchedule`, a continued TensorBoard run. Written as SB3's tests/test_save_load.py and test_tensorboard.py are."""

from pathlib import Path

import numpy as np
import pytest

from kppo import PPO, RecurrentPPO
from kppo.sb3.utils import FloatSchedule

SAVED = Path(__file__).parents[1] / "fixtures" / "sb3" / "saved"
TINY = dict(n_steps=16, batch_size=16, n_epochs=1, policy_kwargs=dict(net_arch=[8]))
OBS = np.random.default_rng(0).normal(size=(8, 4)).astype(np.float32)


def _actions(model):
    return model.predict(OBS, deterministic=True)[0]


def test_get_parameters_speaks_sb3s_names_and_layouts():
    model = PPO("MlpPolicy", "CartPole-v1", seed=0, **TINY)
    params = model.get_parameters()
    assert set(params) == {"policy", "policy.optimizer"}
    policy = params["policy"]
    assert set(policy) == set(model.policy.state_dict())  # SB3's `policy.state_dict()` names
    assert policy["mlp_extractor.value_net.0.bias"].shape == (8,)
    assert policy["action_net.weight"].shape == (2, 8)  # torch's [out, in]
    assert all(isinstance(v, np.ndarray) for group in params.values() for v in group.values())


@pytest.mark.parametrize("model_class, policy", [(PPO, "MlpPolicy"), (RecurrentPPO, "MlpLstmPolicy")])
def test_set_parameters_round_trips_sb3s_dict(model_class, policy):
    """SB3's test_save_load.py::test_set_parameters: edit one tensor of get_parameters() and set it back."""
    kwargs = dict(
        TINY, policy_kwargs=dict(net_arch=[8], **({"lstm_hidden_size": 4} if model_class is RecurrentPPO else {}))
    )
    model = model_class(policy, "CartPole-v1", seed=0, **kwargs)
    other = model_class(policy, "CartPole-v1", seed=1, **kwargs)
    params = model.get_parameters()
    other.set_parameters(params)
    np.testing.assert_array_equal(_actions(other), _actions(model))
    for name, value in other.get_parameters()["policy"].items():
        np.testing.assert_array_equal(value, params["policy"][name], err_msg=name)
    params["policy"]["value_net.bias"] = params["policy"]["value_net.bias"] + 1.0  # SB3 programs edit by name
    other.set_parameters({"policy": {"value_net.bias": params["policy"]["value_net.bias"]}}, exact_match=False)
    np.testing.assert_allclose(other.agent.critic.head.bias.numpy(), params["policy"]["value_net.bias"])


def test_set_parameters_still_takes_kppos_keras_names():
    model = PPO("MlpPolicy", "CartPole-v1", seed=0, **TINY)
    other = PPO("MlpPolicy", "CartPole-v1", seed=1, **TINY)
    keras_names = {v.path: v.numpy() for v in model.agent.variables}
    other.set_parameters({"policy": keras_names}, exact_match=False)
    np.testing.assert_array_equal(_actions(other), _actions(model))
    optimizer = model.get_parameters()["policy.optimizer"]
    other.set_parameters({"policy": keras_names, "policy.optimizer": optimizer})  # exact: both groups


def test_a_missing_tensor_is_torchs_runtime_error():
    """torch's `load_state_dict(strict=True)`: RuntimeError naming the missing key (SB3's set_parameters)."""
    model = PPO("MlpPolicy", "CartPole-v1", seed=0, **TINY)
    params = model.get_parameters()
    del params["policy"]["action_net.bias"]
    with pytest.raises(RuntimeError, match=r'Missing key\(s\) in state_dict: "action_net.bias"') as err:
        model.set_parameters(params)
    assert isinstance(err.value, ValueError) and "\n" not in str(err.value)
    params["policy"]["action_net.bias"], params["policy"]["not_a_layer.weight"] = np.zeros(2), np.zeros(1)
    with pytest.raises(RuntimeError, match=r'Unexpected key\(s\) in state_dict: "not_a_layer.weight"'):
        model.set_parameters(params, exact_match=False)
    with pytest.raises(RuntimeError, match=r"Missing key\(s\) in state_dict"):  # kppo's names alike
        model.set_parameters({"policy": {}, "policy.optimizer": params["policy.optimizer"]})


def test_torchs_optimizer_state_dict_is_refused_in_one_line():
    model = PPO("MlpPolicy", "CartPole-v1", seed=0, **TINY)
    params = model.get_parameters()
    params["policy.optimizer"] = {"state": {}, "param_groups": []}
    with pytest.raises(ValueError, match=r"^params\['policy.optimizer'\]: expected kppo's optimizer variables"):
        model.set_parameters(params)


def test_set_parameters_from_an_sb3_zip_takes_its_policy():
    data = np.load(SAVED / "cartpole.npz")
    saved = PPO.load(SAVED / "cartpole.zip")
    fresh = PPO(
        "MlpPolicy", "CartPole-v1", seed=3, n_steps=16, batch_size=16, policy_kwargs=saved.policy_kwargs or None
    )
    fresh.set_parameters(str(SAVED / "cartpole.zip"))
    obs = data["obs"][:50]
    np.testing.assert_array_equal(fresh.predict(obs, deterministic=True)[0], data["actions"][:50])


def test_clip_range_is_a_float_schedule_as_sb3_2():
    """SB3 2.x wraps clip_range (and clip_range_vf) in a FloatSchedule; programs call `model.clip_range(1.0)`."""
    model = PPO("MlpPolicy", "CartPole-v1", clip_range=0.3, clip_range_vf=0.5, seed=0, **TINY)
    assert isinstance(model.clip_range, FloatSchedule) and model.clip_range(1.0) == 0.3
    assert isinstance(model.clip_range(0.5), float) and model.clip_range_vf(0.0) == 0.5
    assert PPO("MlpPolicy", "CartPole-v1", seed=0, **TINY).clip_range_vf is None
    linear = PPO("MlpPolicy", "CartPole-v1", clip_range=lambda p: 0.2 * p, seed=0, **TINY)
    assert linear.clip_range(0.5) == pytest.approx(0.1) and linear.config.clip_range == pytest.approx(0.2)
    model.clip_range = 0.1  # a number set later is read at the next rollout
    model.learn(16)
    assert float(model._schedules.clip_range) == pytest.approx(0.1)
    with pytest.raises(AssertionError, match="clip_range_vf: expected a positive number"):
        model.clip_range_vf = -1.0


def test_a_constant_clip_range_is_saved_as_the_number_given(tmp_path):
    """SB3's test_save_load_clip_range_portable: after learn, save and load, clip_range's constant is 0.2 itself
    (not the float32 the update reads, 0.20000000298...), and so is clip_range_vf's."""
    model = PPO("MlpPolicy", "CartPole-v1", clip_range_vf=0.3, seed=0, **TINY)
    model.learn(16)
    model.save(tmp_path / "model.zip")
    loaded = PPO.load(tmp_path / "model.zip")
    assert loaded.clip_range.value_schedule.val == 0.2 and loaded.clip_range_vf(1.0) == 0.3


def test_save_leaves_out_what_exclude_names_unless_include_names_it_and_load_takes_custom_objects(tmp_path):
    """SB3's test_exclude_include_saved_params: an attribute `exclude` names is its default after a load (verbose
    0), unless `include` names it too; `custom_objects` replace the saved values of their names, and only those."""
    model = PPO("MlpPolicy", "CartPole-v1", verbose=2, gamma=0.9, seed=0, **TINY)
    model.save(tmp_path / "model", exclude=["verbose", "gamma", "policy_kwargs"])  # the networks' are always saved
    loaded = PPO.load(tmp_path / "model.zip")
    assert loaded.verbose == 0 and loaded.gamma == 0.99 and loaded.policy_kwargs == model.policy_kwargs
    model.save(tmp_path / "model", exclude=["verbose"], include=["verbose"])
    loaded = PPO.load(tmp_path / "model.zip", custom_objects=dict(learning_rate=2e-5, dummy=1.0))
    assert loaded.verbose == 2 and loaded.gamma == 0.9 and loaded.learning_rate == 2e-5
    assert not hasattr(loaded, "dummy")
    np.testing.assert_array_equal(_actions(loaded), _actions(model))
    with pytest.raises(TypeError, match="exclude: expected a list of attribute names, got 3"):
        model.save(tmp_path / "model", exclude=3)


def test_learn_with_reset_num_timesteps_false_continues_the_tensorboard_run(tmp_path):
    """SB3's configure_logger: a continued learn logs on in PPO_1 (its test_tensorboard.py)."""
    model = PPO("MlpPolicy", "CartPole-v1", tensorboard_log=str(tmp_path), seed=0, **TINY)
    model.learn(16, tb_log_name="PPO")
    model.learn(16, tb_log_name="PPO", reset_num_timesteps=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["PPO_1"]
    model.learn(16, tb_log_name="PPO")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["PPO_1", "PPO_2"]
