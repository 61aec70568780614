"""`kppo.MaskablePPO` (sb3-contrib's interface): trains with the env's masks, predicts with given masks, keeps the
setting through save/load, and `evaluate_policy` and `MaskableEvalCallback` pass masks to a masked model."""

import functools

import gymnasium as gym
import numpy as np
import pytest

import kppo
from tests.helpers.masked_envs import MaskedChoiceEnv

SMALL = dict(n_steps=64, batch_size=64, n_epochs=2, seed=0, policy_kwargs={"net_arch": [16]})


def _env(source="method", **kwargs):
    return functools.partial(MaskedChoiceEnv, source=source, **kwargs)


def test_learning_never_takes_a_masked_action_and_predict_respects_the_mask(tmp_path):
    model = kppo.MaskablePPO("MlpPolicy", _env(), **SMALL)
    model.learn(256)
    env = model.get_env().envs[0].unwrapped
    assert env.invalid_actions == 0 and model.config.action_masks
    obs = np.eye(6, dtype=np.float32)  # target i; only action (i + 3) % 6 allowed besides nothing else
    masks = np.eye(6, dtype=bool)[(np.arange(6) + 3) % 6]
    for deterministic in (True, False):
        actions, state = model.predict(obs, action_masks=masks, deterministic=deterministic)
        np.testing.assert_array_equal(actions, (np.arange(6) + 3) % 6)
        assert state is None
    model.save(tmp_path / "agent")
    loaded = kppo.MaskablePPO.load(tmp_path / "agent")
    assert loaded.config.action_masks and loaded.kppo_policy.action_masks
    np.testing.assert_array_equal(
        loaded.predict(obs, action_masks=masks, deterministic=True)[0], (np.arange(6) + 3) % 6
    )


def test_multidiscrete_masks_and_info_masks_train():
    model = kppo.MaskablePPO("MlpPolicy", _env("info", nvec=[3, 4]), **SMALL)
    model.learn(128)
    assert model.get_env().envs[0].unwrapped.invalid_actions == 0
    obs = np.zeros(7, np.float32)
    mask = np.array([0, 0, 1, 1, 0, 0, 0], bool)
    np.testing.assert_array_equal(model.predict(obs, action_masks=mask)[0], [2, 0])


def test_evaluate_policy_passes_the_env_masks_to_a_masked_model():
    model = kppo.MaskablePPO("MlpPolicy", _env(), **SMALL)
    single = MaskedChoiceEnv(length=5)
    kppo.evaluate_policy(model, single, n_eval_episodes=4, warn=False)
    vector = gym.vector.SyncVectorEnv([_env("info", length=5)] * 2)
    kppo.evaluate_policy(model, vector, n_eval_episodes=4, warn=False)
    assert single.invalid_actions == 0 and all(e.unwrapped.invalid_actions == 0 for e in vector.envs)
    kppo.evaluate_policy(model, single, n_eval_episodes=4, warn=False, use_masking=False)
    assert single.invalid_actions > 0  # the same untrained policy without masks


@pytest.mark.parametrize("use_masking", [True, False])
def test_maskable_eval_callback_evaluates_with_the_env_masks_unless_told_not_to(tmp_path, use_masking):
    """sb3-contrib's `MaskableEvalCallback(eval_env, ..., use_masking=True)`: its evaluations pass the eval env's
    masks to `predict`; with use_masking=False the same policy, before any update, picks masked actions."""
    model = kppo.MaskablePPO("MlpPolicy", _env(), **SMALL)
    eval_env = MaskedChoiceEnv(length=5)
    callback = kppo.MaskableEvalCallback(
        eval_env, eval_freq=64, n_eval_episodes=4, warn=False, log_path=tmp_path, use_masking=use_masking
    )
    model.learn(64, callback=callback)  # the evaluation runs at the rollout's last step, before the update
    assert callback.use_masking is use_masking and len(callback.evaluations_results) == 1
    assert (eval_env.invalid_actions == 0) is use_masking
    assert (tmp_path / "evaluations.npz").is_file()


@pytest.mark.parametrize("vec_env_cls", [kppo.DummyVecEnv, kppo.SubprocVecEnv])
def test_learn_without_masking_trains_on_an_env_without_masks_as_sb3_contribs(vec_env_cls):
    """sb3-contrib's test_disabling_masking / test_supports_multi_envs: learn() on an env without masks is refused,
    the env stays usable (a SubprocVecEnv's workers too), and learn(use_masking=False) trains on it."""
    env = kppo.make_vec_env("CartPole-v1", n_envs=2, vec_env_cls=vec_env_cls)
    model = kppo.MaskablePPO("MlpPolicy", env, **SMALL)
    with pytest.raises(ValueError, match="action_masks: expected the env to give masks"):
        model.learn(64)
    with pytest.raises(ValueError, match="action_masks: expected the env to give masks"):
        kppo.evaluate_policy(model, env, n_eval_episodes=2, warn=False)
    model.learn(128, use_masking=False)
    assert model.num_timesteps == 128
    kppo.evaluate_policy(model, env, n_eval_episodes=2, warn=False, use_masking=False)
    env.close()


def test_use_masking_false_allows_every_action_and_true_masks_again():
    model = kppo.MaskablePPO("MlpPolicy", _env(), **SMALL)
    model.learn(128, use_masking=False)
    env = model.get_env().envs[0].unwrapped
    assert env.invalid_actions > 0  # 4 of 6 actions are masked: an untrained policy picks them
    invalid = env.invalid_actions
    model.learn(128, use_masking=True, reset_num_timesteps=False)
    assert model.num_timesteps == 256 and model.get_env().envs[0].unwrapped.invalid_actions == invalid


def test_masks_are_one_line_errors_where_they_do_not_fit():
    model = kppo.PPO("MlpPolicy", "Pendulum-v1", **SMALL)
    with pytest.raises(ValueError, match=r"action_masks: expected None for Box"):
        model.predict(np.zeros(3, np.float32), action_masks=np.ones(1, bool))
    model = kppo.PPO("MlpPolicy", "CartPole-v1", **SMALL)
    with pytest.raises(ValueError, match=r"action_masks: expected 2 entries per observation \(1\), got shape \(3,\)"):
        model.predict(np.zeros(4, np.float32), action_masks=np.ones(3, bool))
    with pytest.raises(ValueError, match="action_masks: expected at least one allowed action per observation"):
        model.predict(np.zeros(4, np.float32), action_masks=np.zeros(2, bool))


@pytest.mark.slow
def test_masking_learns_faster_than_no_masking_over_eight_seeds():
    """MaskedChoiceEnv(n=8, num_valid=2): masked, each choice is between two actions; unmasked, the policy also has to
    learn to avoid six invalid ones (-1 each). Both reach 16 given time (measured: 6,144 steps); compared early, after
    1,024 steps, on 10 evaluation episodes each (unmasked deployment without masks), 8 seeds each."""
    from tests.helpers.benchmark_stats import load_stats

    def early_return(cls, seed):
        model = cls("MlpPolicy", _env(n=8, length=16), **{**SMALL, "seed": seed, "n_steps": 256})
        model.learn(1024)
        returns, _ = kppo.evaluate_policy(
            model, MaskedChoiceEnv(n=8, length=16), n_eval_episodes=10, return_episode_rewards=True, warn=False
        )
        return np.mean(returns)

    masked = [early_return(kppo.MaskablePPO, seed) for seed in range(8)]
    plain = [early_return(kppo.PPO, seed) for seed in range(8)]
    test = load_stats().permutation_test(masked, plain)
    print(f"masked {np.round(masked, 2).tolist()}, plain {np.round(plain, 2).tolist()}, p = {test.p_value:.3f}")
    assert np.mean(masked) > np.mean(plain) and test.p_value < 0.05, (masked, plain, test)


def test_kppo_train_with_masks_checkpoints_and_evaluates_with_masks(tmp_path):
    config = kppo.Config(
        action_masks=True,
        num_envs=2,
        num_steps=32,
        total_timesteps=128,
        eval_freq=2,
        num_eval_envs=2,
        num_hidden_units=16,
    )
    result = kppo.train(_env(length=8), config, checkpoint_dir=tmp_path)
    assert (tmp_path / "checkpoint").is_file() and result.policy.action_masks
    assert (result.metrics["eval/mean_returns"] >= 0).all()  # -1 only for a masked action; evaluation masks too


class OneHotFeatures(kppo.BaseFeaturesExtractor):
    """A user's Keras extractor, as sb3-contrib's tests/test_invalid_actions.py builds one over its envs."""

    def __init__(self, observation_space, features_dim=8):
        super().__init__(observation_space, features_dim)
        import keras

        self.dense = keras.layers.Dense(features_dim, activation="relu")

    def call(self, observations):
        return self.dense(observations)


class _DiscreteObsEnv(gym.Env):
    """sb3-contrib's InvalidActionEnvDiscrete in miniature: a Discrete(20) (or MultiDiscrete) observation and masks."""

    def __init__(self, observation_space):
        self.observation_space, self.action_space = observation_space, gym.spaces.Discrete(4)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self.observation_space.sample(), {}

    def step(self, action):
        return self.observation_space.sample(), 0.0, False, False, {}

    def action_masks(self):
        return np.array([True, True, False, True])


@pytest.mark.parametrize(
    "observation_space",
    [gym.spaces.Discrete(20), gym.spaces.MultiDiscrete([3, 4]), gym.spaces.MultiBinary(5)],
)
def test_a_users_extractor_reads_one_hot_observations_as_sb3s_preprocess_obs(observation_space):
    """The extractor gets SB3's preprocessed observations (Discrete one-hot [B, n]); building it was a TensorFlow
    reshape error (20 one-hot values into one)."""
    kwargs = dict(features_extractor_class=OneHotFeatures, features_extractor_kwargs=dict(features_dim=8))
    model = kppo.MaskablePPO(
        "MlpPolicy",
        _DiscreteObsEnv(observation_space),
        n_steps=16,
        batch_size=16,
        n_epochs=1,
        seed=0,
        policy_kwargs=kwargs,
    )
    model.learn(16)
    action, _ = model.predict(observation_space.sample(), action_masks=np.array([True, True, False, True]))
    assert int(action) != 2
