"""The image settings of `cnn_speed.py`, `cnn_floor.py` and `image_learning.py`: MinAtar Breakout and RL-Zoo's
Pong PPO, the envs both frameworks build for them, the torch twin of kppo's SmallCNN, and the timing helpers their
workers share. Results: docs/benchmarks/images.md.

Only the standard library is imported at module level: a driver imports this file without either framework.
"""

from __future__ import annotations

import os
import resource
import statistics
import sys
import time
from typing import Any

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MINATAR_ID = "MinAtar/Breakout-v1"
PONG_ID = "PongNoFrameskip-v4"
N_STEPS = 128
SETTINGS = {
    "minatar": dict(
        env_id=MINATAR_ID,
        n_envs=8,
        rollouts=8,
        ppo=dict(n_steps=N_STEPS, batch_size=256, n_epochs=4),
        label="MinAtar Breakout, 8 envs, SmallCNN",
    ),
    "pong": dict(
        env_id=PONG_ID,
        n_envs=8,
        rollouts=3,
        ppo=dict(
            n_steps=N_STEPS,
            n_epochs=4,
            batch_size=256,
            learning_rate=2.5e-4,
            clip_range=0.1,
            vf_coef=0.5,
            ent_coef=0.01,
        ),
        label="Pong (RL-Zoo Atari PPO), 8 envs x 4 frames, NatureCNN",
    ),
}
# The same PPO on Pong, kppo stepping ale-py's threaded C++ AtariVectorEnv (kppo's fast host path for Atari), SB3 its
# own make_atari_env + VecFrameStack (SB3 has no AtariVectorEnv path): not the same preprocessing code (see
# `kppo.vec_envs.ale_vector.AtariVectorEnvAdapter` for what differs from SB3's AtariWrapper).
SETTINGS["pong_ale"] = dict(
    SETTINGS["pong"], label="Pong (RL-Zoo Atari PPO), 8 envs x 4 frames, NatureCNN; kppo on ale-py's AtariVectorEnv"
)
FRAMEWORKS = ("kppo", "sb3")
ACTING_ENVS = (1, 8, 64)


# --------------------------------------------------------------------------------------------------
# Pure helpers (no framework needed).
# --------------------------------------------------------------------------------------------------


def load_average() -> float | None:
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else None


def peak_rss_mb() -> float:
    """Peak resident set size of this process, MiB (Linux reports ru_maxrss in KiB, macOS in bytes)."""
    scale = 1024 * 1024 if sys.platform == "darwin" else 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / scale


def rollout_steps(setting: dict) -> int:
    return setting["n_envs"] * setting["ppo"]["n_steps"]


def rollout_bytes(n_envs: int, n_steps: int, obs_shape: tuple[int, ...], itemsize: int) -> int:
    """Bytes of one rollout's observations: n_steps x n_envs images of `obs_shape`, `itemsize` bytes a value."""
    size = 1
    for d in obs_shape:
        size *= d
    return n_envs * n_steps * size * itemsize


def median_of(runs: list[dict], key: str) -> float | None:
    values = [r[key] for r in runs if r.get(key) is not None]
    return statistics.median(values) if values else None


def ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}x" if a and b else ""


def fmt(value: float | None, digits: int = 0) -> str:
    return "" if value is None else f"{value:,.{digits}f}"


# --------------------------------------------------------------------------------------------------
# Envs, networks and the timed learn both workers use.
# --------------------------------------------------------------------------------------------------


def float_obs_wrapper():
    """The ObservationWrapper both sides put on MinAtar: bool grids -> float32 Box(0, 1) (same shape)."""
    import gymnasium as gym
    import numpy as np

    class FloatObservation(gym.ObservationWrapper):
        def __init__(self, env):
            super().__init__(env)
            self.observation_space = gym.spaces.Box(0.0, 1.0, env.observation_space.shape, np.float32)

        def observation(self, observation):
            return np.asarray(observation, np.float32)

    return FloatObservation


def register_minatar() -> str:
    import gymnasium as gym
    from minatar.gym import register_envs

    register_envs()
    return str(gym.spec(MINATAR_ID).entry_point) + f", observation dtype {_minatar_dtype()}"


def _minatar_dtype() -> str:
    import gymnasium as gym

    env = gym.make(MINATAR_ID)
    dtype = str(env.observation_space.dtype)
    env.close()
    return dtype


class Timer:
    """Accumulated seconds and calls of wrapped callables."""

    def __init__(self):
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}

    def wrap(self, name: str, fn):
        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start
                self.calls[name] = self.calls.get(name, 0) + 1

        return timed

    def reset(self):
        self.seconds.clear()
        self.calls.clear()


def measure_learn(model, setting: dict, timer: Timer, rollouts: int) -> dict:
    """Warm-up learn of one rollout, then the timed learn of `rollouts` rollouts; phases from `timer`."""
    t0 = time.perf_counter()
    model.learn(rollout_steps(setting))
    t1 = time.perf_counter()
    timer.reset()
    before = int(model.num_timesteps)
    model.learn(rollouts * rollout_steps(setting), reset_num_timesteps=False)
    learn_s = time.perf_counter() - t1
    steps = int(model.num_timesteps) - before
    return dict(
        warmup_s=t1 - t0,
        learn_s=learn_s,
        env_steps=steps,
        steps_per_s=steps / learn_s,
        phases=dict(timer.seconds),
        phase_calls=dict(timer.calls),
        peak_rss_mb=peak_rss_mb(),
    )


def kppo_env(setting_name: str, n_envs: int) -> tuple[str, Any, dict | None]:
    """(where the env comes from, the kppo vector env of `setting_name`, the CnnPolicy's policy_kwargs)."""
    import kppo

    if setting_name == "minatar":
        source = register_minatar()
        env = kppo.make_vec_env(MINATAR_ID, n_envs=n_envs, seed=0, wrapper_class=float_obs_wrapper())
        return source, env, dict(net_arch=[], normalize_images=False)
    if setting_name == "pong_ale":
        from ale_py.vector_env import AtariVectorEnv
        from gymnasium.vector import AutoresetMode

        from kppo.vec_envs.ale_vector import AtariVectorEnvAdapter

        ale = AtariVectorEnv("pong", n_envs, autoreset_mode=AutoresetMode.SAME_STEP, life_loss_info=True, stack_num=4)
        source = "ale_py AtariVectorEnv('pong', life_loss_info=True, stack_num=4) + kppo's AtariVectorEnvAdapter"
        return source, kppo.VecEnv(AtariVectorEnvAdapter(ale)), None
    env = kppo.VecFrameStack(kppo.make_atari_env(PONG_ID, n_envs=n_envs, seed=0), n_stack=4)
    return "kppo.make_atari_env + kppo.VecFrameStack", env, None


def torch_small_cnn():
    """kppo's SmallCNN as a torch `features_extractor_class`: Conv2d(C, 16, 3, stride 1) + ReLU -> flatten ->
    Linear(features_dim) + ReLU, reading HWC images (smallest dimension last) transposed to CHW, as kppo does."""
    import torch
    from stable_baselines3.common.torch_layers import BaseFeaturesExtractor

    class TorchSmallCNN(BaseFeaturesExtractor):
        def __init__(self, observation_space, features_dim: int = 128):
            super().__init__(observation_space, features_dim)
            shape = tuple(observation_space.shape)
            self.channels_last = shape[-1] < shape[0]
            chw = (shape[2], shape[0], shape[1]) if self.channels_last else shape
            self.cnn = torch.nn.Sequential(
                torch.nn.Conv2d(chw[0], 16, kernel_size=3, stride=1), torch.nn.ReLU(), torch.nn.Flatten()
            )
            with torch.no_grad():
                flat = self.cnn(torch.zeros(1, *chw)).shape[1]
            self.linear = torch.nn.Sequential(torch.nn.Linear(flat, features_dim), torch.nn.ReLU())

        def forward(self, observations):
            x = observations.permute(0, 3, 1, 2) if self.channels_last else observations
            return self.linear(self.cnn(x))

    return TorchSmallCNN
