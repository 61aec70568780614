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


def space_kind(space: Any) -> str:
    """What an artifact and an env must share of a gymnasium space: its type and shape (a Discrete: its size; a
    MultiDiscrete: its sizes; a Dict: its keys' kinds); bounds may differ."""
    if isinstance(space, gym.spaces.Dict):
        return "Dict(" + ", ".join(f"{key}: {space_kind(sub)}" for key, sub in space.spaces.items()) + ")"
    if isinstance(space, gym.spaces.Discrete):
        return f"Discrete({int(space.n)})"
    if isinstance(space, gym.spaces.MultiDiscrete):
        return f"MultiDiscrete({np.asarray(space.nvec).reshape(-1).tolist()})"
    return f"{type(space).__name__}{tuple(int(d) for d in space.shape or ())}"


def described_kind(space: dict) -> str:
    """`space_kind` of a space as the artifact's metadata describes it (checked by `kppo_runtime.checks`)."""
    kind = space["type"]
    if kind == "Dict":
        return "Dict(" + ", ".join(f"{key}: {described_kind(sub)}" for key, sub in space["spaces"].items()) + ")"
    if kind == "Discrete":
        return f"Discrete({space['n']})"
    if kind == "MultiDiscrete":
        return f"MultiDiscrete({np.asarray(space['nvec']).reshape(-1).tolist()})"
    shape = space["shape"] if kind == "Box" else np.atleast_1d(space["n"]).tolist()
    return f"{kind}{tuple(shape)}"


def check_spaces(controller: Controller, env: Any, env_id: str) -> None:
    """A one-line ValueError naming --env unless the env's spaces are the artifact's (`space_kind`): the artifact
    would refuse the env's first observation, or act outside its action space."""
    want = [described_kind(controller.metadata[key]) for key in ("observation_space", "action_space")]
    got = [space_kind(env.observation_space), space_kind(env.action_space)]
    if want != got:
        raise ValueError(
            f"--env: expected an env with the spaces of {controller.name} (observation {want[0]}, action {want[1]}),"
            f" got {env_id} (observation {got[0]}, action {got[1]})"
        )


def run_episodes(controller: Controller, env_id: str, episodes: int, seed: int) -> list[float]:
    """Returns of `episodes` episodes, episode i reset with seed + i (a masked artifact acts with the env's masks);
    one-line ValueErrors for an env whose spaces are not the artifact's, and for an action outside the env's
    action space (a damaged artifact without a checksum)."""
    if gym is None:
        raise ImportError(NEEDS_GYMNASIUM)
    env = gym.make(env_id)
    check_spaces(controller, env, env_id)
    returns = []
    for i in range(episodes):
        obs, info = env.reset(seed=seed + i)
        controller.reset()  # a recurrent artifact's state starts from zeros
        total, done = 0.0, False
        while not done:
            mask = None if controller.mask_size is None else env_mask(env, info)
            action = controller.act(obs, mask)
            if not _valid(env.action_space, action):
                raise ValueError(
                    f"{controller.name}: expected an action of the env's {space_kind(env.action_space)}, got "
                    f"{' '.join(repr(action).split())}"
                )
            obs, reward, terminated, truncated, info = env.step(action)
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    env.close()
    return returns


def _valid(space: Any, action: Any) -> bool:
    """An action the env can step: finite values of a Box's shape (the env clips them to its bounds, as kppo's
    artifacts already do up to float32 rounding), or a member of a discrete space (which envs assert)."""
    if isinstance(space, gym.spaces.Box):
        values = np.asarray(action, np.float64)
        return values.size == int(np.prod(space.shape)) and bool(np.isfinite(values).all())
    return bool(space.contains(action))


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
