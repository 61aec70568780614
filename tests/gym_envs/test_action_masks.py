"""Reading invalid-action masks from gymnasium envs (`kppo.gym_envs.action_masks`): the sources, and bad masks."""

import functools

import gymnasium as gym
import numpy as np
import pytest

import kppo
from kppo.gym_envs.action_masks import ActionMasker, MaskReader, env_mask, mask_sizes
from kppo.gym_envs.make import gym_vec_env
from tests.helpers.masked_envs import MaskedChoiceEnv


def _vec(source, num_envs=3, vectorization="sync", **kwargs):
    return gym_vec_env(
        functools.partial(MaskedChoiceEnv, source=source, **kwargs), num_envs, vectorization=vectorization, seed=0
    )


def _sub_env_masks(vec):
    return np.stack([env.unwrapped._mask for env in vec.vec_env.envs])


@pytest.mark.parametrize("source", ["method", "info"])
def test_the_reader_gives_the_masks_of_the_observations_just_returned_across_auto_resets(source):
    vec = _vec(source, length=3)  # episodes end every 3 steps: the masks after an auto-reset are the new episode's
    reader = MaskReader(vec.vec_env, vec.action_space)
    vec.reset(seed=0)
    np.testing.assert_array_equal(reader.reset(vec.reset_infos), _sub_env_masks(vec))
    assert reader.source == {"method": "sub_envs", "info": "info"}[source]
    for _ in range(7):
        step = vec.step(np.zeros(3, np.int64))
        np.testing.assert_array_equal(reader.step(step.infos), _sub_env_masks(vec))
    assert step.truncated.any() or reader.steps == 7


def test_async_sub_envs_and_action_masker_and_multidiscrete():
    vec = _vec("method", num_envs=2, vectorization="async", nvec=[3, 4])
    reader = MaskReader(vec.vec_env, vec.action_space)
    vec.reset(seed=0)
    mask = reader.reset(vec.reset_infos)
    assert mask.shape == (2, 7) and reader.source == "sub_envs"
    assert (mask[:, :3].sum(1) == 2).all() and (mask[:, 3:].sum(1) == 2).all()
    vec.close()
    wrapped = ActionMasker(MaskedChoiceEnv(source="info"), lambda env: np.array([1, 0, 1, 0, 1, 0]))
    np.testing.assert_array_equal(env_mask(wrapped, {}), [True, False, True, False, True, False])
    named = ActionMasker(MaskedChoiceEnv(source="method"), "action_masks")
    named.reset(seed=0)
    np.testing.assert_array_equal(named.action_masks(), named.unwrapped._mask)


def test_an_action_masker_named_after_an_attribute_that_is_not_a_method_is_refused_at_once():
    env = MaskedChoiceEnv(source="method")
    env.num_valid = 2  # an int attribute
    with pytest.raises(ValueError, match=r"^action_mask_fn: expected the name of a method of the env, got 'num_valid'"):
        ActionMasker(env, "num_valid")


def test_a_vector_env_with_its_own_method_is_read_directly():
    class MaskedVector(gym.vector.SyncVectorEnv):
        def action_masks(self):
            return np.array([[True, False, False, False, False, True]] * self.num_envs)

    vec = MaskedVector([lambda: MaskedChoiceEnv(source="info")] * 2, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    reader = MaskReader(vec, vec.single_action_space)
    infos = vec.reset(seed=0)[1]
    assert reader.reset(infos)[:, [0, 5]].all() and reader.source == "vector"


class _Broken(MaskedChoiceEnv):
    def __init__(self, mask, **kwargs):
        super().__init__(**kwargs)
        self.broken = np.asarray(mask)

    def action_masks(self):
        return self.broken


@pytest.mark.parametrize(
    "mask,match",
    [
        ([True, True], r"action_mask: expected 6 entries per env \(2 envs\), got shape"),
        (
            [False] * 6,
            r"action_mask: env 0 allows no action at step 0 \(expected at least one True per action dimension",
        ),
        ([0, 2, 1, 0, 0, 0], r"action_mask: expected booleans or 0/1, got np.int64\(2\) at step 0"),
    ],
)
def test_bad_masks_are_one_line_errors(mask, match):
    vec = gym_vec_env(functools.partial(_Broken, mask), 2)
    reader = MaskReader(vec.vec_env, vec.action_space)
    vec.reset(seed=0)
    with pytest.raises(ValueError, match=match) as err:
        reader.reset(vec.reset_infos)
    assert "\n" not in str(err.value)


def test_multidiscrete_masks_need_one_allowed_action_per_dimension():
    vec = gym_vec_env(functools.partial(_Broken, [1, 1, 1, 0, 0, 0, 0], nvec=[3, 4]), 1)
    reader = MaskReader(vec.vec_env, vec.action_space)
    vec.reset(seed=0)
    with pytest.raises(ValueError, match="env 0 allows no action at step 0"):
        reader.reset(vec.reset_infos)


def test_an_env_without_masks_and_a_missing_info_mask_are_named():
    vec = gym_vec_env("CartPole-v1", 2)
    vec.reset(seed=0)
    with pytest.raises(
        ValueError,
        match=r"action_masks: expected the env to give masks \(an action_masks\(\) method, "
        r"e.g. kppo.ActionMasker\(env, fn\), or info\['action_mask'\]\), got none",
    ):
        MaskReader(vec.vec_env, gym.spaces.Discrete(2)).reset(vec.reset_infos)
    vec = _vec("info", num_envs=2)
    reader = MaskReader(vec.vec_env, vec.action_space)
    vec.reset(seed=0)
    reader.reset(vec.reset_infos)
    with pytest.raises(
        ValueError,
        match=r"action_mask: expected info\['action_mask'\] from every env, env 0 gave none "
        r"at step 1",
    ):
        reader.step({})
    with pytest.raises(
        ValueError,
        match=r"action_masks: expected a Discrete, 1-D MultiDiscrete or 1-D MultiBinary action space, got Box",
    ):
        mask_sizes(gym.spaces.Box(-1, 1, (2,)))
    with pytest.raises(ValueError, match="action_masks: expected the env to give masks"):
        env_mask(gym.make("CartPole-v1"), {})


def test_training_with_masks_on_an_env_without_them_or_on_box_actions_fails_in_one_line():
    config = kppo.Config(action_masks=True, total_timesteps=1024, num_envs=2, num_steps=64)
    with pytest.raises(ValueError, match="action_masks: expected the env to give masks") as err:
        kppo.train(lambda: gym.make("CartPole-v1"), config)  # gymnasium
    assert "\n" not in str(err.value)
    with pytest.raises(
        ValueError,
        match=r"action_masks: expected the env to implement action_mask\(state\), got None "
        r"from CartPole",
    ):
        kppo.train("cartpole", config)  # TF-native
    with pytest.raises(
        ValueError, match=r"action_masks: expected a Discrete, MultiDiscrete or MultiBinary action space, got Box"
    ):
        kppo.train("Pendulum-v1", kppo.Config(action_masks=True, total_timesteps=1024, num_envs=2, num_steps=64))


class _MultiBinaryChoice(gym.Env):
    """MultiBinary(3) actions; the mask (sb3-contrib's layout, [bit i = 0 allowed, bit i = 1 allowed] per bit)
    forbids bit 0 = 1 and bit 2 = 0; a forbidden choice costs -1."""

    observation_space = gym.spaces.Box(0, 1, (2,))
    action_space = gym.spaces.MultiBinary(3)
    MASK = np.array([True, False, True, True, False, True])

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2, np.float32), {}

    def step(self, action):
        self.t += 1
        bad = bool(action[0] == 1) + bool(action[2] == 0)
        return np.zeros(2, np.float32), -float(bad), False, self.t >= 8, {}

    def action_masks(self):
        return self.MASK


def test_multibinary_actions_take_masks_per_bit():
    model = kppo.MaskablePPO("MlpPolicy", _MultiBinaryChoice(), n_steps=32, batch_size=32, n_epochs=1, seed=0)
    model.learn(64)
    obs = np.zeros((16, 2), np.float32)
    actions, _ = model.predict(obs, action_masks=np.tile(_MultiBinaryChoice.MASK, (16, 1)))
    assert (actions[:, 0] == 0).all() and (actions[:, 2] == 1).all()
    mean, _ = kppo.evaluate_policy(model, _MultiBinaryChoice(), n_eval_episodes=2, warn=False)
    assert mean == 0.0  # no forbidden choice is ever taken
