"""`PPO`: the Stable-Baselines3-style facade (SB3 2.9's `PPO` signature), translation only.

Proximal Policy Optimization (clip version), Schulman et al. 2017 (https://arxiv.org/abs/1707.06347); interface of
Stable-Baselines3 (https://github.com/DLR-RM/stable-baselines3). Every argument is translated once into a `kppo.Config`
plus schedules. As in SB3, `PPO` is a thin layer on `OnPolicyAlgorithm` (`kppo.sb3.on_policy_algorithm`: `learn` runs
the one training loop, `kppo.training.train.run_loop`, with SB3's hooks) and `BaseAlgorithm` (`kppo.sb3.base_class`:
the env, `predict` through `kppo.Policy`, `save` / `load`). No math here: SB3's update is Config's
adam_style="torch", advantage_std_ddof=1.

SB3 argument -> kppo:

    learning_rate (float | schedule)  -> Config.learning_rate; a schedule f(progress_remaining) is evaluated on the
                                         host before every rollout (as SB3)
    n_steps, n_epochs, gamma, gae_lambda, normalize_advantage, vf_coef, max_grad_norm, target_kl
                                      -> num_steps, num_epochs, gamma, gae_lambda, ... (same meaning)
    ent_coef (float | schedule)       -> ent_coef; a schedule is evaluated as learning_rate's (kppo's extension)
    batch_size                        -> num_minibatches = n_steps * n_envs // batch_size
    clip_range (float | schedule)     -> clip_range; a schedule is evaluated as learning_rate's
    clip_range_vf (None | float | schedule) -> clip_range_vf with vf_clip_mode="clipped" (SB3's formula)
    policy_kwargs: net_arch           -> actor_hidden_units / critic_hidden_units
                   activation_fn      -> activation (a Keras activation or its name)
                   ortho_init         -> kernel_init "orthogonal", bias_init "zeros" (else both "torch_default")
                   log_std_init, squash_output -> log_std_init, squash
    seed, verbose                     -> seed, verbose
    device                            -> a TensorFlow device scope ("auto": TensorFlow's placement)
"""

from __future__ import annotations

from typing import Any, TypeVar

import gymnasium as gym

from kppo.config.options import Config
from kppo.config.sb3_defaults import SB3_PPO_ARGUMENTS as SB3
from kppo.core.errors import ArgumentError
from kppo.sb3.arguments import Schedule, sb3_config, split_schedule
from kppo.sb3.base_class import MIXED_API_HINT, check_not_gym_tuple
from kppo.sb3.on_policy_algorithm import OnPolicyAlgorithm, hyperparameter
from kppo.sb3.save_util import SAVED_ARGUMENTS
from kppo.sb3.utils import FloatSchedule

__all__ = ["MIXED_API_HINT", "PPO", "check_not_gym_tuple"]  # the two: kppo.sb3.base_class', importable here as before
_Model = TypeVar("_Model", bound="PPO")


class PPO(OnPolicyAlgorithm):
    """Proximal Policy Optimization (clip) with Stable-Baselines3's interface; see the module docstring for how each
    argument maps to `kppo.Config`; the defaults are SB3's, from the one table `kppo.config.sb3_defaults`.
    Environments are gymnasium envs (an id, an `Env`, or a gymnasium vector env in same-step auto-reset mode, e.g.
    from `kppo.make_vec_env`)."""

    batch_size, n_epochs = hyperparameter("batch_size"), hyperparameter("n_epochs")
    normalize_advantage, target_kl = hyperparameter("normalize_advantage"), hyperparameter("target_kl")

    def __init__(
        self,
        policy: str,
        env: Any,
        learning_rate: float | Schedule = SB3["learning_rate"],
        n_steps: int = SB3["n_steps"],
        batch_size: int = SB3["batch_size"],
        n_epochs: int = SB3["n_epochs"],
        gamma: float = SB3["gamma"],
        gae_lambda: float = SB3["gae_lambda"],
        clip_range: float | Schedule = SB3["clip_range"],
        clip_range_vf: float | Schedule | None = SB3["clip_range_vf"],
        normalize_advantage: bool = SB3["normalize_advantage"],
        ent_coef: float | Schedule = SB3["ent_coef"],
        vf_coef: float = SB3["vf_coef"],
        max_grad_norm: float = SB3["max_grad_norm"],
        use_sde: bool = SB3["use_sde"],
        sde_sample_freq: int = SB3["sde_sample_freq"],
        rollout_buffer_class: type | None = None,
        rollout_buffer_kwargs: dict[str, Any] | None = None,
        target_kl: float | None = SB3["target_kl"],
        stats_window_size: int = 100,
        tensorboard_log: str | None = None,
        policy_kwargs: dict[str, Any] | None = None,
        verbose: int = 0,
        seed: int | None = None,
        device: str = "auto",
        _init_setup_model: bool = True,
    ):
        # Lightning's save_hyperparameters: the arguments as given (the env is data, not a hyperparameter)
        self._hparams_initial = {k: v for k, v in locals().items() if k not in ("self", "env", "__class__")}
        super().__init__(
            policy,
            learning_rate,
            n_steps=n_steps,
            gamma=gamma,
            gae_lambda=gae_lambda,
            ent_coef=ent_coef,
            vf_coef=vf_coef,
            max_grad_norm=max_grad_norm,
            use_sde=use_sde,
            sde_sample_freq=sde_sample_freq,
            rollout_buffer_class=rollout_buffer_class,
            rollout_buffer_kwargs=rollout_buffer_kwargs,
            stats_window_size=stats_window_size,
            tensorboard_log=tensorboard_log,
            policy_kwargs=policy_kwargs,
            verbose=verbose,
            seed=seed,
            device=device,
        )
        self.clip_range = clip_range  # SB3's FloatSchedule from now on (the property)
        self.clip_range_vf = clip_range_vf
        self._ppo_args.update(
            batch_size=batch_size, n_epochs=n_epochs, normalize_advantage=normalize_advantage, target_kl=target_kl
        )
        self._setup_model(env)  # always: kppo builds its runner with the env (`_init_setup_model` is SB3's)

    @property
    def clip_range(self) -> FloatSchedule:
        """SB3 2.x's `clip_range`: a `FloatSchedule` (progress_remaining -> float), as SB3's `_setup_model` makes
        it of a number or a schedule; `model.clip_range(1.0)` is the value at the start. Setting a number or a
        schedule takes effect at the next rollout."""
        return FloatSchedule(self._clip_schedule or self._clip_start)

    @clip_range.setter
    def clip_range(self, value: float | Schedule) -> None:
        self._clip_start, self._clip_schedule = split_schedule(value, "clip_range")

    @property
    def clip_range_vf(self) -> FloatSchedule | None:
        """SB3 2.x's `clip_range_vf`: None (no value clipping) or a `FloatSchedule`, as `clip_range`."""
        if self._clip_vf_start is None:
            return None
        return FloatSchedule(self._clip_vf_schedule or self._clip_vf_start)

    @clip_range_vf.setter
    def clip_range_vf(self, value: float | Schedule | None) -> None:
        if value is None:
            self._clip_vf_start, self._clip_vf_schedule = None, None
            return
        start, schedule = split_schedule(value, "clip_range_vf")
        if start <= 0:  # SB3 asserts it
            raise ArgumentError(
                f"clip_range_vf: expected a positive number (None disables value clipping), got {start!r}"
            )
        self._clip_vf_start, self._clip_vf_schedule = start, schedule

    def _make_config(self, n_envs: int, action_space: gym.spaces.Space, normalize: dict, fields: dict) -> Config:
        args = dict(
            self._ppo_args,
            learning_rate=self.learning_rate,
            clip_range=self._clip_start,
            clip_range_vf=self._clip_vf_start,
            verbose=self.verbose,
            seed=self.seed,
            use_sde=self.use_sde,
            sde_sample_freq=self.sde_sample_freq,
        )
        return sb3_config(args, n_envs, action_space, normalize, fields)

    def _saved_hyperparameters(self) -> dict[str, Any]:
        """The hyperparameters `save` writes: as given (a constant as the number it is, not the float32 the update
        reads), the schedules at their current values."""
        clip_range, clip_range_vf = self._clip_start, self._clip_vf_start
        if self._runner is not None and self._clip_schedule is not None:  # the values the update reads now
            clip_range = float(self._schedules.clip_range)
        if self._runner is not None and self._clip_vf_schedule is not None:
            clip_range_vf = float(self._schedules.clip_range_vf)
        return {
            **{name: self._ppo_args[name] for name in SAVED_ARGUMENTS if name in self._ppo_args},
            "learning_rate": self._current_lr,
            "clip_range": clip_range,
            "clip_range_vf": clip_range_vf,
        }

    def learn(
        self: _Model,
        total_timesteps: int,
        callback: Any = None,
        log_interval: int = 1,
        tb_log_name: str = "PPO",
        *args: Any,
        **kwargs: Any,
    ) -> _Model:
        """`OnPolicyAlgorithm.learn` (the same arguments) under SB3's PPO run name, `tb_log_name="PPO"`."""
        return super().learn(total_timesteps, callback, log_interval, tb_log_name, *args, **kwargs)
