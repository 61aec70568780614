"""`kppo.MaskablePPO`: sb3-contrib's MaskablePPO interface on `kppo.PPO` (translation only).

    model = kppo.MaskablePPO("MlpPolicy", env)      # env gives masks: action_masks() (kppo.ActionMasker) or
    model.learn(100_000)                            # info["action_mask"]
    action, _ = model.predict(obs, action_masks=env.action_masks())

The rollout acts with the env's masks and stores them, so the update's log-probabilities and entropy are those of
the masked distribution that acted (`Config.action_masks`); saved models, policies and exported artifacts keep it.
"""

from __future__ import annotations

from typing import Any

from kppo.config.options import Config
from kppo.sb3.ppo import PPO


class MaskablePPO(PPO):
    """PPO with invalid-action masking (Discrete and MultiDiscrete actions), as sb3-contrib's `MaskablePPO`: the same
    constructor as `kppo.PPO` (gSDE does not apply to discrete actions), `learn(..., use_masking=True)` and
    `predict(observation, state, episode_start, deterministic, action_masks)`."""

    def _make_config(self, n_envs, action_space, normalize, fields) -> Config:
        return super()._make_config(n_envs, action_space, normalize, fields).replace(action_masks=True)

    def learn(  # type: ignore[override]  # sb3-contrib's signature: use_masking before progress_bar
        self,
        total_timesteps: int,
        callback: Any = None,
        log_interval: int = 1,
        tb_log_name: str = "PPO",
        reset_num_timesteps: bool = True,
        use_masking: bool = True,
        progress_bar: bool = False,
        **lightning: Any,
    ) -> MaskablePPO:
        """`PPO.learn` with the env's action masks, or, with `use_masking=False`, with every action allowed (an env
        without masks trains then, as in sb3-contrib). A change of `use_masking` between calls restarts the env's
        episodes (the masks are read in the rollout). `lightning`: `PPO.learn`'s keyword-only `env`,
        `log_every_n_steps`, `default_root_dir`."""
        if lightning.get("env") is not None:  # the env first: the setting below is its runner's
            self.set_env(lightning.pop("env"))
        reader = getattr(self._runner, "masks", None)
        if reader is not None and reader.enabled != use_masking:
            self._use_env(self._sb3_env)
        if self._pending is not None:
            self._pending = self._pending._replace(use_masking=use_masking)
        return super().learn(
            total_timesteps, callback, log_interval, tb_log_name, reset_num_timesteps, progress_bar, **lightning
        )
