"""Faults of gymnasium envs during a run (issue 39): a worker process of an async vector env killed mid-rollout fails
fast with one line naming the worker, closes without a second error, and the run's last checkpoint stays usable."""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest

import kppo
from kppo import PPO, BaseCallback, CheckpointCallback, SubprocVecEnv
from kppo.gym_envs.make import gym_vec_env
from tests.helpers.fuzz import within


def _kill(vec_env, index: int) -> int:
    process = vec_env.unwrapped.processes[index]
    os.kill(process.pid, signal.SIGKILL)
    process.join(10)
    return process.pid


def test_a_killed_worker_is_named_at_once_and_closing_ends_the_others():
    env = gym_vec_env("CartPole-v1", 3, vectorization="async")
    env.reset(seed=0)
    pid = _kill(env.vec_env, 1)
    with within(10), pytest.raises(ValueError) as excinfo:
        env.step(np.zeros(3, np.int64))
    assert (
        str(excinfo.value)
        == f"env worker process 1 (pid {pid}, killed by SIGKILL) died before step() at step 1 returned"
    )
    with within(10):
        env.close()  # once raised BrokenPipeError from the dead worker's pipe
    assert not any(p.is_alive() for p in env.vec_env.unwrapped.processes)


class _KillWorkerAt(BaseCallback):
    """Kills SubprocVecEnv's worker 0 at the `at`-th env step of `learn`."""

    def __init__(self, at: int):
        super().__init__()
        self.at = at

    def _on_step(self) -> bool:
        if self.num_timesteps >= self.at:
            _kill(self.training_env.vector_env, 0)
            self.at = 1 << 62
        return True


def _cartpole():
    import gymnasium as gym

    return gym.make("CartPole-v1")


def test_a_worker_killed_mid_learn_fails_in_one_line_and_the_last_checkpoint_goes_on(tmp_path):
    env = SubprocVecEnv([_cartpole, _cartpole])
    model = PPO("MlpPolicy", env, n_steps=32, batch_size=32, n_epochs=1, seed=0, policy_kwargs={"net_arch": [8]})
    saves = CheckpointCallback(save_freq=32, save_path=str(tmp_path), name_prefix="ppo")
    with within(120), pytest.raises(ValueError) as excinfo:
        model.learn(64 * 4, callback=[saves, _KillWorkerAt(64 * 2 + 6)])
    message = str(excinfo.value)
    assert "\n" not in message and message.startswith("env worker process 0 (pid "), message
    assert "killed by SIGKILL" in message
    newest = max(tmp_path.glob("ppo_*_steps.zip"), key=lambda p: int(p.stem.split("_")[1]))
    assert int(newest.stem.split("_")[1]) == 128  # the save before the kill
    again = PPO.load(newest, env=kppo.make_vec_env("CartPole-v1", n_envs=2))
    again.learn(64, reset_num_timesteps=False)
    assert again.num_timesteps == 128 + 64
