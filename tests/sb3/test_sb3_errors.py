"""SB3's and sb3-contrib's error contracts (issue 54): the exception class SB3 raises and a message that starts
with SB3's words (what its tests and users' programs match), then kppo's one-line help. Written as SB3's own tests
are (tests/test_cnn.py, test_run.py, test_predict.py, sb3-contrib's test_lstm.py); the expected strings are SB3's
source text."""

import gymnasium as gym
import numpy as np
import pytest

from kppo import PPO, MaskablePPO, RecurrentPPO

TINY = dict(n_steps=16, batch_size=16, n_epochs=1, seed=0)


class DictEnv(gym.Env):
    """A Dict observation space (SB3's SimpleMultiObsEnv in miniature); `nested` puts a Dict inside it."""

    def __init__(self, nested=False):
        space = {"a": gym.spaces.Box(-1, 1, (3,), np.float32), "b": gym.spaces.Discrete(3)}
        if nested:
            space["c"] = gym.spaces.Dict({"x": gym.spaces.Box(-1, 1, (2,), np.float32)})
        self.observation_space = gym.spaces.Dict(space)
        self.action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self.observation_space.sample(), {}

    def step(self, action):
        return self.observation_space.sample(), 0.0, False, False, {}


def _one_line(err):
    assert isinstance(err.value, ValueError)
    assert "\n" not in str(err.value), str(err.value)


def test_image_space_check_is_sb3s_assertion():
    """SB3's tests/test_cnn.py::test_image_space_checks: CnnPolicy on a vector space fails NatureCNN's assert."""
    with pytest.raises(AssertionError, match="You should use NatureCNN only with images not with") as err:
        PPO("CnnPolicy", "CartPole-v1", **TINY)
    _one_line(err)
    assert "(observation_space: expected an image Box" in str(err.value)  # kppo's help after SB3's


def test_squash_output_requires_gsde():
    with pytest.raises(AssertionError, match=r"squash_output=True is only available when using gSDE \(use_sde=True\)"):
        PPO("MlpPolicy", "Pendulum-v1", policy_kwargs=dict(squash_output=True), **TINY)
    PPO("MlpPolicy", "Pendulum-v1", policy_kwargs=dict(squash_output=True), use_sde=True, **TINY)


@pytest.mark.parametrize(
    "policy_kwargs, message",
    [
        (dict(shared_lstm=True, enable_critic_lstm=True), "You must choose between shared LSTM, seperate or no LSTM"),
        (
            dict(shared_lstm=True, enable_critic_lstm=False, share_features_extractor=False),
            "If the features extractor is not shared, the LSTM cannot be shared.",
        ),
    ],
)
def test_recurrent_checks_are_sb3_contribs_assertions(policy_kwargs, message):
    """sb3-contrib's tests/test_lstm.py::test_check."""
    with pytest.raises(AssertionError, match=message) as err:
        RecurrentPPO("MlpLstmPolicy", "CartPole-v1", n_steps=16, seed=0, policy_kwargs=policy_kwargs)
    _one_line(err)


def test_a_recurrent_state_or_episode_start_of_another_shape_is_torchs_runtime_error():
    model = RecurrentPPO("MlpLstmPolicy", "CartPole-v1", policy_kwargs=dict(lstm_hidden_size=8), **TINY)
    obs = np.zeros((2, 4), np.float32)
    _, state = model.predict(obs)
    assert [s.shape for s in state] == [(1, 2, 8), (1, 2, 8)]
    one_env = (np.zeros((1, 1, 8)), np.zeros((1, 1, 8)))
    with pytest.raises(RuntimeError, match=r"Expected hidden\[0\] size \(1, 2, 8\), got \[1, 1, 8\]") as err:
        model.predict(obs, state=one_env)
    _one_line(err)
    with pytest.raises(RuntimeError, match=r"shape '\[2, -1\]' is invalid for input of size 3") as err:
        model.predict(obs, state=state, episode_start=np.zeros(3, bool))
    _one_line(err)
    model.predict(obs, state=state, episode_start=np.zeros(2, bool))  # the right shapes act


def test_advantage_normalization_asserts_more_than_one_row():
    """SB3's PPO: `batch_size > 1` and `n_steps * n_envs > 1` unless normalize_advantage=False."""
    with pytest.raises(AssertionError, match=r"`batch_size` must be greater than 1\. See https://github.com"):
        PPO("MlpPolicy", "CartPole-v1", n_steps=16, batch_size=1)
    with pytest.raises(AssertionError, match=r"`n_steps \* n_envs` must be greater than 1\. Currently n_steps=1 and"):
        PPO("MlpPolicy", "CartPole-v1", n_steps=1, batch_size=2)
    PPO("MlpPolicy", "CartPole-v1", n_steps=1, batch_size=1, normalize_advantage=False)


@pytest.mark.parametrize("batch_size, untruncated, truncated", [(6, 2, 4), (32, 0, 16)])
def test_a_batch_size_that_does_not_divide_the_rollout_warns_as_sb3(batch_size, untruncated, truncated):
    match = (
        rf"You have specified a mini-batch size of {batch_size}, but because the `RolloutBuffer` is of size "
        rf"`n_steps \* n_envs = 16`, after every {untruncated} untruncated mini-batches, there will be a truncated "
        rf"mini-batch of size {truncated}\nWe recommend using a `batch_size` that is a factor of `n_steps \* n_envs`"
        rf"\.\nInfo: \(n_steps=16 and n_envs=1\)"
    )
    with pytest.warns(UserWarning, match=match) as record:
        model = PPO("MlpPolicy", "CartPole-v1", n_steps=16, batch_size=batch_size)
    assert len(record) == 1  # SB3's warning alone, with kppo's note in it
    assert "kppo uses" in str(record[0].message)
    assert model.config.rollout_size % model.config.num_minibatches == 0


@pytest.mark.parametrize(
    "env_id, obs, message",
    [
        ("CartPole-v1", np.zeros(5), r"Error: Unexpected observation shape \(5,\) for Box environment, please use "),
        ("CartPole-v1", np.zeros((2, 5)), r"please use \(4,\) or \(n_env, 4\) for the observation shape\."),
        ("FrozenLake-v1", np.zeros((2, 2), int), r"for Discrete environment, please use \(\) or \(n_env,\)"),
    ],
)
def test_predict_refuses_wrong_observation_shapes_with_sb3s_value_error(env_id, obs, message):
    """SB3's tests/test_predict.py: `predict` on a wrongly shaped observation raises ValueError."""
    model = PPO("MlpPolicy", env_id, **TINY)
    with pytest.raises(ValueError, match=message) as err:
        model.predict(obs)
    _one_line(err)
    assert "(obs: expected shape" in str(err.value)


def test_a_dict_with_mixed_batching_names_the_key():
    model = PPO("MultiInputPolicy", DictEnv(), **TINY)
    obs = {"a": np.zeros(3, np.float32), "b": np.array([1, 2])}  # one "a", two "b"
    with pytest.raises(ValueError, match=r"There seems to be a mix of vectorized and non-vectorized observations\."):
        model.predict(obs)


@pytest.mark.parametrize("policy", ["MlpPolicy", "CnnPolicy"])
def test_a_dict_space_under_mlp_or_cnn_policy_asks_for_multiinputpolicy(policy):
    """SB3's tests/test_dict_env.py::test_policy_hint."""
    with pytest.raises(
        ValueError, match=f"You must use `MultiInputPolicy` when working with dict observation space, not {policy}"
    ):
        PPO(policy, DictEnv(), **TINY)
    with pytest.raises(ValueError, match="You must use `MultiInputLstmPolicy`"):
        RecurrentPPO("MlpLstmPolicy", DictEnv(), **TINY)


@pytest.mark.parametrize("model_class", [PPO, MaskablePPO])
def test_nested_dict_spaces_are_sb3s_not_implemented_error(model_class):
    """SB3's tests/test_dict_env.py::test_dict_nested."""
    with pytest.raises(NotImplementedError, match=r"Nested observation spaces are not supported") as err:
        model_class("MultiInputPolicy", DictEnv(nested=True), **TINY)
    _one_line(err)


def test_a_torch_policy_or_extractor_class_is_refused_naming_the_keras_way():
    class ActorCriticPolicy:  # a user's torch policy class, as SB3 programs pass one
        pass

    with pytest.raises(ValueError, match=r"^policy: expected one of .*features_extractor_class=<a Keras layer") as err:
        PPO(ActorCriticPolicy, "CartPole-v1", **TINY)
    _one_line(err)
    Module = type("Module", (), {"__module__": "torch.nn.modules.module"})
    TorchCNN = type("TorchCNN", (Module,), {})
    with pytest.raises(TypeError, match=r"derive it from kppo\.BaseFeaturesExtractor.* got the torch module"):
        PPO("MlpPolicy", "CartPole-v1", policy_kwargs=dict(features_extractor_class=TorchCNN), **TINY)
