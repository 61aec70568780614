"""A user's VecEnv written as SB3's abstract `VecEnv` subclass (`super().__init__(num_envs, observation_space,
action_space)`, then `reset`, `step_async`, `step_wait`, ... of its own) as the gymnasium vector env kppo trains on.

`CustomVecEnvAdapter` is a gymnasium `VectorEnv` in SAME_STEP autoreset mode over such an env: its `step` calls the
user's `step_async` and `step_wait` and turns SB3's contract into gymnasium's: `dones` split by
`infos[i]["TimeLimit.truncated"]` into terminated / truncated, `infos[i]["terminal_observation"]` into
`final_obs` (a finished env's step must give it, as SB3's own VecEnvs do: a one-line error otherwise), the per-env
infos into a vector info dict. `reset(seed=s)` calls the user's `seed(s)` first (SB3: env i gets s + i)."""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

__all__ = ["CustomVecEnvAdapter"]


class CustomVecEnvAdapter(VectorEnv):
    """The gymnasium view of a user's SB3-style VecEnv `venv` (see the module docstring)."""

    def __init__(self, venv: Any, closes_itself: bool):
        self.metadata = {"autoreset_mode": AutoresetMode.SAME_STEP}
        self.venv = venv
        self.num_envs = int(venv.num_envs)
        self.single_observation_space, self.single_action_space = venv.observation_space, venv.action_space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.render_mode = getattr(venv, "render_mode", None)
        self._closes_itself = closes_itself  # the user's class has its own `close` (SB3's base closes this adapter)
        self._closing = False

    def reset(self, *, seed: int | list[int] | None = None, options: dict | None = None) -> tuple[Any, dict]:
        if seed is not None:
            seeds = [seed + i for i in range(self.num_envs)] if isinstance(seed, int) else list(seed)
            if seeds != [seeds[0] + i for i in range(self.num_envs)]:
                raise ValueError(f"seed: expected seeds s, s + 1, ... (SB3's VecEnv.seed(s)), got {seeds}")
            self.venv.seed(seeds[0])
        if options is not None:
            self.venv.set_options(options)
        return self.venv.reset(), {}

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict]:
        self.venv.step_async(actions)
        obs, rewards, dones, infos = self.venv.step_wait()
        dones = np.asarray(dones, bool).reshape(self.num_envs)
        truncated = dones & np.array([bool(info.get("TimeLimit.truncated", False)) for info in infos])
        vector_infos: dict[str, Any] = {}
        for index, info in enumerate(infos):
            info = dict(info)
            final = info.pop("terminal_observation", None)
            if dones[index]:
                if final is None:
                    raise ValueError(
                        f"{type(self.venv).__name__}.step_wait: expected infos[{index}]['terminal_observation'] "
                        "where dones[index] (SB3's VecEnv contract), got none"
                    )
                info["final_obs"] = final
            vector_infos = self._add_info(vector_infos, info, index)
        return obs, np.asarray(rewards, np.float32), dones & ~truncated, truncated, vector_infos

    def close_extras(self, **kwargs: Any) -> None:
        """Closes the user's env once, by its own `close` when it has one."""
        if self._closing:
            return
        self._closing = True
        if self._closes_itself:
            self.venv.close()
