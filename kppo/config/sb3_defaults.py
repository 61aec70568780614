"""Stable-Baselines3's PPO defaults, written once: the constructor's arguments (`SB3_PPO_ARGUMENTS`, SB3's names)
and what SB3 computes where kppo's Config defaults differ (`SB3_SEMANTICS`), together as Config fields
(`SB3_PPO_DEFAULTS`). `kppo.PPO`'s signature and translation, RL-Zoo's files (`kppo.config.zoo`, for `kppo train`
and `kppo tune`) and the tuner read these tables; stable_baselines3/ppo/ppo.py and common/policies.py are the source.
"""

from __future__ import annotations

from typing import Any

__all__ = ["SB3_BATCH_SIZE", "SB3_NAMES", "SB3_PPO_ARGUMENTS", "SB3_PPO_DEFAULTS", "SB3_SEMANTICS", "SB3_UPDATE"]

#: `stable_baselines3.PPO.__init__`'s defaults of the arguments a Config holds (SB3's names).
SB3_PPO_ARGUMENTS: dict[str, Any] = {
    "learning_rate": 3e-4,
    "n_steps": 2048,
    "batch_size": 64,
    "n_epochs": 10,
    "gamma": 0.99,
    "gae_lambda": 0.95,
    "clip_range": 0.2,
    "clip_range_vf": None,
    "normalize_advantage": True,
    "ent_coef": 0.0,
    "vf_coef": 0.5,
    "max_grad_norm": 0.5,
    "use_sde": False,
    "sde_sample_freq": -1,
    "target_kl": None,
}
#: SB3's `batch_size` (a minibatch size, not a Config field: it becomes `num_minibatches` of the rollout).
SB3_BATCH_SIZE: int = SB3_PPO_ARGUMENTS["batch_size"]
#: SB3 argument -> Config field, where the names differ (`batch_size` has no field: see SB3_BATCH_SIZE).
SB3_NAMES = {"n_steps": "num_steps", "n_epochs": "num_epochs"}

#: What SB3's update computes differently from kppo's defaults: torch's Adam, the sample std of the advantages.
SB3_UPDATE: dict[str, Any] = {"adam_style": "torch", "advantage_std_ddof": 1}
#: How SB3 trains whatever its arguments, as Config fields: gymnasium envs, schedules only where given (a number is
#: constant), SB3's value clipping formula (with clip_range_vf), Box actions clipped to the bounds (not rescaled),
#: SB3's policy (net_arch pi=[64, 64], vf=[64, 64], tanh, orthogonal init, Adam eps 1e-5) and its update.
SB3_SEMANTICS: dict[str, Any] = {
    "env_backend": "gymnasium",
    "lr_schedule": "constant",
    "clip_schedule": "constant",
    "ent_schedule": "constant",
    "vf_clip_mode": "clipped",
    "box_actions": "clip",
    "squash": False,
    "num_hidden_layers": 2,
    "num_hidden_units": 64,
    "activation": "tanh",
    "kernel_init": "orthogonal",
    "bias_init": "zeros",
    "log_std_init": 0.0,
    "optimizer": "adam",
    "optimizer_eps": 1e-5,
    **SB3_UPDATE,
}
#: SB3's PPO defaults as Config fields: the arguments (but `batch_size`) and the semantics.
SB3_PPO_DEFAULTS: dict[str, Any] = {
    **{SB3_NAMES.get(name, name): value for name, value in SB3_PPO_ARGUMENTS.items() if name != "batch_size"},
    **SB3_SEMANTICS,
}
