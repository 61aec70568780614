"""Action spaces as SB3 takes them: a Box of any shape (flattened inside, reshaped out) in its own dtype, through
kppo.PPO's learn and predict and an exported artifact; MultiBinary action masks."""

import gymnasium as gym
import numpy as np
import pytest

import kppo
from kppo.core.distributions import make_distribution
from kppo.exporter.artifact import export


class Box23(gym.Env):
    """Observations float32 (3,), actions a float64 Box (2, 3) with per-element bounds; reward -|a - 0.5|^2."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    action_space = gym.spaces.Box(
        np.full((2, 3), -1.0), np.array([[1.0, 2.0, 3.0], [1.0, 1.0, 1.0]]), (2, 3), np.float64
    )

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self.np_random.uniform(-1, 1, 3).astype(np.float32), {}

    def step(self, action):
        assert action.shape == (2, 3) and action.dtype == np.float64, (action.shape, action.dtype)
        self.t += 1
        obs = self.np_random.uniform(-1, 1, 3).astype(np.float32)
        return obs, -float(np.sum((action - 0.5) ** 2)), False, self.t >= 8, {}


def test_a_float64_box_of_shape_2x3_learns_predicts_and_exports(tmp_path):
    model = kppo.PPO("MlpPolicy", Box23(), n_steps=16, batch_size=16, n_epochs=1, seed=3)
    model.learn(32)
    obs = np.zeros(3, np.float32)
    action, _ = model.predict(obs, deterministic=True)
    assert action.shape == (2, 3) and action.dtype == np.float64
    actions, _ = model.predict(np.zeros((4, 3), np.float32))
    assert actions.shape == (4, 2, 3) and actions.dtype == np.float64
    assert np.all(actions >= Box23.action_space.low) and np.all(actions <= Box23.action_space.high)
    exported = export(model, tmp_path / "box23.tflite")
    assert exported.metadata["output"]["shape"][-1] == 6
    assert exported.metadata["output"]["env_shape"] == [2, 3]
    assert exported.metadata["output"]["env_dtype"] == "float64"


def test_box_actions_reshape_in_tf_and_numpy_and_keep_1d_float32_as_before():
    dist = make_distribution(Box23.action_space, rescale=False)
    flat = np.linspace(-2, 4, 12, dtype=np.float32).reshape(2, 6)
    env_np, env_tf = dist.to_env_np(flat), dist.to_env(flat).numpy()
    assert env_np.shape == env_tf.shape == (2, 2, 3) and env_np.dtype == env_tf.dtype == np.float64
    np.testing.assert_allclose(env_np, env_tf, rtol=1e-6)
    np.testing.assert_array_equal(
        env_np, np.clip(flat.reshape(2, 2, 3), Box23.action_space.low, Box23.action_space.high)
    )
    one_d = make_distribution(gym.spaces.Box(-1, 1, (2,), np.float32))
    assert one_d.to_env_np(np.array([[3.0, -0.5]], np.float32)).dtype == np.float32


def test_multibinary_masks_take_sb3_contribs_two_entries_per_bit():
    dist = make_distribution(gym.spaces.MultiBinary(3))
    assert dist.mask_size == 6
    logits = np.zeros((1, 3), np.float32)
    mask = np.array([[True, True, False, True, True, False]])  # bit 0: either, bit 1: only 1, bit 2: only 0
    for masked in (dist.masked_np(logits, mask), dist.masked(logits, mask).numpy()):
        np.testing.assert_array_equal(dist.mode_np(masked), [[0, 1, 0]])
        probs = 1 / (1 + np.exp(-masked.astype(np.float64)))
        np.testing.assert_array_equal(probs, [[0.5, 1.0, 0.0]])
    draws = dist.sample_np(np.repeat(dist.masked_np(logits, mask), 1000, axis=0), np.random.default_rng(0))
    assert np.all(draws[:, 1] == 1) and np.all(draws[:, 2] == 0) and 0.4 < draws[:, 0].mean() < 0.6
    entropy = dist.entropy(dist.masked(logits, mask)).numpy()
    np.testing.assert_allclose(entropy, [np.log(2.0)], rtol=1e-6)  # the free bit only


@pytest.mark.parametrize("space", [gym.spaces.MultiBinary([2, 2]), gym.spaces.MultiDiscrete([[2, 2], [2, 2]])])
def test_multi_dimensional_discrete_actions_are_refused_in_one_line(space):
    with pytest.raises(ValueError, match=r"expected a 1-D .* flatten it") as err:
        kppo.gym_envs.spaces.check_action_space(space)
    assert "\n" not in str(err.value)


def test_normalized_columns_leave_a_dicts_images_out():
    from kppo.gym_envs.spaces import normalized_columns

    image, vector = gym.spaces.Box(0, 255, (2, 2, 1), np.uint8), gym.spaces.Box(-1, 1, (3,))
    np.testing.assert_array_equal(normalized_columns(gym.spaces.Dict(a=image, b=vector)), [False] * 4 + [True] * 3)
    assert normalized_columns(gym.spaces.Dict(a=vector, b=gym.spaces.Discrete(2))) is None  # every key: all columns
    assert normalized_columns(gym.spaces.Dict(a=image, b=vector), ["a", "b"]) is None  # asked for: the image too
    assert normalized_columns(image) is None  # a lone image Box: normalize_obs standardizes it, as SB3's VecNormalize
    expected = r"^normalize_obs_keys: expected null for a Box observation space, got \['a'\]$"
    with pytest.raises(ValueError, match=expected):
        normalized_columns(vector, ["a"])
