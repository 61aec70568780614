"""Closed-loop evaluation of an exported policy on a gymnasium env (numpy + LiteRT + gymnasium; no TensorFlow).

pip install "./export[eval]"       # gymnasium: only this module needs it
python -m kppo_runtime.evaluate policy.tflite --env Pendulum-v1 --episodes 10 --seed 0   # or: kppo-evaluate ...
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from kppo_runtime.errors import USER_ERRORS, fail
from kppo_runtime.runtime import Controller

NEEDS_GYMNASIUM = (
    'kppo_runtime.evaluate needs gymnasium: pip install "kppo-runtime[eval]" (or "./export[eval]" from a kppo checkout)'
)
try:
    import gymnasium as gym
except ImportError:  # the kit's other modules run without it; run_episodes and main say so in one line
    gym: Any = None


def env_mask(env: Any, info: dict) -> np.ndarray:
    """The env's action mask for its current observation: its `action_masks()` method, else `info["action_mask"]`."""
    if env.has_wrapper_attr("action_masks"):
        return np.asarray(env.get_wrapper_attr("action_masks")())
    if "action_mask" not in info:
        raise ValueError(
            "mask: the artifact takes an action mask, but the env has no action_masks() method and no "
            "info['action_mask']"
        )
    return np.asarray(info["action_mask"])


def run_episodes(controller: Controller, env_id: str, episodes: int, seed: int) -> list[float]:
    """Returns of `episodes` episodes, episode i reset with seed + i (a masked artifact acts with the env's masks)."""
    if gym is None:
        raise ImportError(NEEDS_GYMNASIUM)
    env = gym.make(env_id)
    returns = []
    for i in range(episodes):
        obs, info = env.reset(seed=seed + i)
        controller.reset()  # a recurrent artifact's state starts from zeros
        total, done = 0.0, False
        while not done:
            mask = None if controller.mask_size is None else env_mask(env, info)
            obs, reward, terminated, truncated, info = env.step(controller.act(obs, mask))
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    env.close()
    return returns


def main(argv=None) -> int:
    """`kppo-evaluate`: the mean return; a user's error (no gymnasium, a bad artifact, an unknown env id) is one
    line on standard error and exit status 2."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("artifact")
    parser.add_argument("--env", required=True, help="gymnasium id")
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    gym_errors = () if gym is None else (gym.error.Error,)
    try:
        if gym is None:
            raise ImportError(NEEDS_GYMNASIUM)
        gym.spec(args.env)  # an unknown id fails before LiteRT loads (and logs) anything
        returns = run_episodes(Controller(args.artifact), args.env, args.episodes, args.seed)
    except (*USER_ERRORS, *gym_errors) as error:
        return fail("kppo-evaluate", error)
    print(f"{args.env}: {np.mean(returns):.2f} +- {np.std(returns):.2f} over {args.episodes} episodes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
