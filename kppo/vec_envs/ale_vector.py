"""`AtariVectorEnvAdapter`: ale-py's threaded C++ vector env (`ale_py.vector_env.AtariVectorEnv`) as the SAME_STEP
gymnasium vector env kppo's host path reads (`kppo.gym_envs.vector.GymVecEnv`): the fast host path for Atari."""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv, VectorWrapper

from kppo.vec_envs.atari import ATARI_EXTRA


class AtariVectorEnvAdapter(VectorWrapper):
    """ale-py's `AtariVectorEnv` (threaded C++, preprocessing and frame stacking inside) as kppo reads a SAME_STEP
    vector env: `kppo.PPO(..., AtariVectorEnvAdapter(AtariVectorEnv("pong", 8, autoreset_mode="SameStep")))`,
    `kppo.VecEnv(AtariVectorEnvAdapter(...))` for SB3's API.

    What it adds: the `_final_obs` mask gymnasium's vector envs give beside `infos["final_obs"]` (ale-py gives a
    dense [N, ...] array whose rows of unfinished envs are stale), a list of seeds as the array ale-py's `reset`
    takes (SB3's `VecEnv.seed`), actions as the integer array its `step` asserts, and its own `metadata` (ale-py
    writes `autoreset_mode` into the `metadata` dict of gymnasium's `VectorEnv` class, shared by every instance).
    With `life_loss_info=True` a lost life is `terminated` but the game is not reset, and ale-py's `final_obs` row
    is stale: the adapter gives the step's observation instead (the game's frame where the life was lost).

    Not SB3's AtariWrapper, whatever the settings: observations are (stack_num, 84, 84) uint8, channels first and
    already stacked (kppo's CNNs take channels first), and the stack is not zeroed at a lost life; grey is the ALE
    palette's; SB3's "lost life ends the episode, the game goes on" is `life_loss_info=True` (`episodic_life=True`
    restarts the game at every lost life), and then no NOOP step nor FIRE is played after a lost life (Breakout
    waits for the agent's FIRE); `max_num_frames_per_episode` truncates.

    Args:
        env: an `ale_py.vector_env.AtariVectorEnv` made with `autoreset_mode=AutoresetMode.SAME_STEP` (or
            "SameStep") and `batch_size` 0 (every env each step).

    Raises:
        ValueError: (one line) for another env, another autoreset mode, or a batch smaller than num_envs.
    """

    def __init__(self, env: VectorEnv):
        try:
            from ale_py.vector_env import AtariVectorEnv
        except ImportError:
            raise ValueError(
                f"env: AtariVectorEnvAdapter needs ale-py, which is not installed: {ATARI_EXTRA}"
            ) from None
        if not isinstance(env, AtariVectorEnv):
            raise ValueError(f"env: expected an ale_py.vector_env.AtariVectorEnv, got {type(env).__name__}")
        mode = AutoresetMode(env.autoreset_mode)  # its attribute: the metadata may be another instance's
        if mode != AutoresetMode.SAME_STEP:
            raise ValueError(
                f"env: expected an AtariVectorEnv with autoreset_mode=AutoresetMode.SAME_STEP, got {mode.value!r}"
            )
        if env.batch_size != env.num_envs:
            raise ValueError(f"env: expected batch_size 0 (all {env.num_envs} envs each step), got {env.batch_size}")
        super().__init__(env)
        self.metadata = {"autoreset_mode": AutoresetMode.SAME_STEP}
        self._action_dtype = np.float32 if env.continuous else np.int64
        self._lives = np.zeros(env.num_envs, np.int64)

    def reset(self, *, seed: Any = None, options: dict | None = None) -> tuple[Any, dict]:
        """Resets ale-py's envs (a list of seeds as an array; gymnasium's `reset_mask` option as ale-py reads it)."""
        if isinstance(seed, (list, tuple)):
            seed = None if all(s is None for s in seed) else np.asarray(seed, np.int64)
        elif isinstance(seed, np.integer):
            seed = int(seed)
        obs, infos = self.env.reset(seed=seed, options=options)
        self._lives = np.asarray(infos.get("lives", self._lives), np.int64)
        return obs, infos

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict]:
        """Steps ale-py's envs; infos with the `_final_obs` mask (after a lost life, the step's observation)."""
        obs, rewards, terminated, truncated, infos = self.env.step(np.asarray(actions, self._action_dtype))
        ended = np.asarray(terminated, bool) | np.asarray(truncated, bool)
        lives = np.asarray(infos.get("lives", self._lives), np.int64)
        if "final_obs" in infos:
            final_obs = infos["final_obs"]
            played_on = ended & (lives < self._lives)  # a lost life, no reset (a reset restores the lives)
            if played_on.any():
                final_obs = np.array(final_obs)
                final_obs[played_on] = obs[played_on]
            infos = {**infos, "final_obs": final_obs, "_final_obs": ended}
        self._lives = lives
        return obs, rewards, terminated, truncated, infos
