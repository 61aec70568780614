"""kppo.gym_envs.vector_info: gymnasium's default NEXT_STEP vector envs re-created in SAME_STEP mode (`same_step`), the
same transitions through `GymVecEnv` as from a SAME_STEP env, and the refusals; `SubEnvError` across processes."""

from __future__ import annotations

import pickle
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv

import kppo
from kppo.gym_envs.make import gym_vec_env
from kppo.gym_envs.checks import SubEnvError, install_hint
from kppo.gym_envs.vector_info import same_step


def _cartpole5():
    return gym.make("CartPole-v1", max_episode_steps=5)


def _rollout(env, steps: int, seed: int) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    """Every transition of `steps` seeded random actions through a GymVecEnv, and the terminated/truncated counts."""
    rng = np.random.default_rng(0)
    values, terminated, truncated = [env.reset(seed=seed)], 0, 0
    for _ in range(steps):
        if isinstance(env.action_space, gym.spaces.Discrete):
            actions = rng.integers(0, env.action_space.n, env.num_envs)
        else:
            actions = rng.uniform(-2.0, 2.0, (env.num_envs, *env.action_space.shape)).astype(np.float32)
        result = env.step(actions)
        values += [result.obs, result.reward, result.terminated, result.truncated, result.final_obs]
        terminated, truncated = terminated + result.terminated.sum(), truncated + result.truncated.sum()
    return values, terminated, truncated


@pytest.mark.parametrize(
    "next_step, same_step_env, steps",
    [
        (lambda: SyncVectorEnv([_cartpole5] * 3), lambda: gym_vec_env(_cartpole5, 3), 40),
        (lambda: AsyncVectorEnv([_cartpole5] * 3), lambda: gym_vec_env(_cartpole5, 3, vectorization="async"), 40),
        (
            lambda: gym.make_vec("CartPole-v1", 3, max_episode_steps=5),  # CartPoleVectorEnv, gymnasium's default
            lambda: gym_vec_env("CartPole-v1", 3, env_kwargs={"max_episode_steps": 5}),
            40,
        ),
        (lambda: gym.make_vec("Pendulum-v1", 2), lambda: gym_vec_env("Pendulum-v1", 2), 210),  # truncates at 200
    ],
    ids=["sync", "async", "make_vec-cartpole", "make_vec-pendulum"],
)
def test_next_step_gives_the_same_transitions_as_same_step(next_step, same_step_env, steps):
    with gym_vec_env(next_step()) as converted, same_step_env() as reference:
        assert converted.vec_env.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
        assert converted.max_episode_steps == reference.max_episode_steps or converted.max_episode_steps is None
        got, _terminated, truncated = _rollout(converted, steps, seed=7)
        expected, *_ = _rollout(reference, steps, seed=7)
    assert truncated > 0 and len(got) == len(expected) == 1 + 5 * steps
    for index, (a, b) in enumerate(zip(got, expected)):
        np.testing.assert_array_equal(a, b, err_msg=f"value {index}")


def test_sync_next_step_keeps_its_sub_envs_and_async_is_closed():
    sync = SyncVectorEnv([_cartpole5] * 2)
    rebuilt = same_step(sync)
    assert isinstance(rebuilt, SyncVectorEnv) and rebuilt.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    assert all(a is b for a, b in zip(rebuilt.envs, sync.envs))
    rebuilt.close()
    async_env = AsyncVectorEnv([_cartpole5] * 2, shared_memory=False)
    rebuilt = same_step(async_env)
    assert async_env.closed and not rebuilt.closed and rebuilt.shared_memory is False
    assert rebuilt.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    rebuilt.close()
    same = SyncVectorEnv([_cartpole5], autoreset_mode=AutoresetMode.SAME_STEP)
    assert same_step(same) is same


def test_make_vec_default_keeps_its_id_kwargs_and_time_limit():
    original = gym.make_vec("CartPole-v1", 2, max_episode_steps=7, sutton_barto_reward=True)
    with gym_vec_env(original) as env:
        assert (env.num_envs, env.env_id, env.max_episode_steps) == (2, "CartPole-v1", 7)
        assert env.vec_env.envs[0].unwrapped._sutton_barto_reward
        env.reset(seed=0)
        assert env.step(np.zeros(2, np.int64)).reward.tolist() == [0.0, 0.0]  # Sutton-Barto: 0 while alive


class _CustomNextStep(gym.vector.VectorEnv):
    metadata: ClassVar[dict[str, Any]] = {"autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(self):
        self.num_envs = 1
        self.single_observation_space = gym.spaces.Box(-1, 1, (2,))
        self.single_action_space = gym.spaces.Discrete(2)


@pytest.mark.parametrize(
    "make, message",
    [
        (
            lambda: SyncVectorEnv([_cartpole5], autoreset_mode=AutoresetMode.DISABLED),
            "autoreset_mode: expected 'SameStep' or 'NextStep', got 'Disabled'; create it with ",
        ),
        (
            lambda: gym.wrappers.vector.RecordEpisodeStatistics(SyncVectorEnv([_cartpole5])),
            "autoreset_mode: expected 'SameStep' inside vector wrappers, got 'NextStep' under "
            "RecordEpisodeStatistics(SyncVectorEnv) (kppo re-creates only unwrapped NextStep vector envs); "
            "create it with ",
        ),
        (
            _CustomNextStep,
            "autoreset_mode: expected 'SameStep', got 'NextStep' from _CustomNextStep, which kppo cannot "
            "re-create; create it with ",
        ),
    ],
    ids=["disabled", "wrapped-next-step", "custom-next-step"],
)
def test_what_cannot_be_re_created_is_one_line(make, message):
    with pytest.raises(ValueError) as excinfo:
        same_step(make())
    text = str(excinfo.value)
    assert text.startswith(message) and "\n" not in text
    assert text.endswith(
        "autoreset_mode=gymnasium.vector.AutoresetMode.SAME_STEP (gym.make_vec: vectorization_mode="
        "'sync', vector_kwargs={'autoreset_mode': AutoresetMode.SAME_STEP})"
    )


def test_train_accepts_gymnasiums_default_vector_env():
    config = kppo.Config(
        num_envs=4, num_steps=8, total_timesteps=4 * 8 * 2, eval_freq=1, num_eval_envs=2, num_hidden_units=8
    )
    result = kppo.train(gym.make_vec("CartPole-v1", 4), config)
    assert result.metrics["train/total_steps"][-1] == 64
    assert np.isfinite(result.metrics["eval/mean_returns"]).all()


def test_sub_env_error_crosses_the_async_boundary():
    err = SubEnvError(1, "raised KeyError in step()", ": 'boom'")
    assert str(err) == "env raised KeyError in step() in env 1: 'boom'"
    assert err.message(3) == "env raised KeyError in step() at step 3 in env 1: 'boom'"
    assert str(type(err)(pickle.loads(pickle.dumps(err)))) == str(err)  # AsyncVectorEnv: raise exctype(value)


def test_install_hint_names_kppos_extras():
    missing = gym.error.DependencyNotInstalled
    assert install_hint(missing("Box2D is not installed")) == 'Box2D, which is not installed: pip install -e ".[box2d]"'
    assert install_hint(missing("x"), "gymnasium.envs.mujoco.ant_v5:AntEnv") == (
        'MuJoCo, which is not installed: pip install -e ".[mujoco]"'
    )
    assert install_hint(missing("pygame is not installed")) is None
