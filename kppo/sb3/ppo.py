"""`PPO`: the Stable-Baselines3-style facade (SB3 2.9's `PPO` signature), translation only.

Proximal Policy Optimization (clip version), Schulman et al. 2017 (https://arxiv.org/abs/1707.06347); interface of
Stable-Baselines3 (https://github.com/DLR-RM/stable-baselines3). Every argument is translated once into a `kppo.Config`
plus schedules; `learn` runs the one training loop (`kppo.training.train.run_loop`) on the host runner with its
schedules, callbacks, logger and progress bar as hooks, `predict` the `kppo.Policy`, `save`/`load`
`kppo.agent.checkpoint` / `kppo.agent.agent`. No math here: SB3's update is Config's adam_style="torch",
advantage_std_ddof=1.

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

import collections
import contextlib
import math
import time
from pathlib import Path
from typing import Any, TypeVar, cast
from collections.abc import Callable

import gymnasium as gym
import numpy as np

import tempfile

from kppo.agent import checkpoint
from kppo.agent.archive import agent_dir, write_zip, zip_target
from kppo._tf import tf
from kppo.agent.agent import Agent, build_agent, load_agent, make_policy
from kppo.agent.extractors import extractor_factory
from kppo.callbacks import make_callback
from kppo.config.options import Config
from kppo.core.errors import ArgumentError
from kppo.sb3.utils import set_random_seed
from kppo.vec_envs.vec_env import VecEnv
from kppo.gym_envs.vector import GymVecEnv
from kppo.gym_envs.make import gym_vec_env as _make_gym_vec_env
from kppo.rollout.gymnasium import StepRecord
from kppo.callbacks.progress import progress_bar as make_progress_bar
from kppo.sb3.lightning import LightningSurface, log_every
from kppo.sb3.logger import Logger, next_run_dir
from kppo.sb3.policies import ActorCriticPolicy
from kppo.training.hooks import Hooks
from kppo.training.plan import Plan
from kppo.training.keras_callbacks import KerasCallbacks, backup_of, split_callbacks
from kppo.training.train import run_loop
from kppo.training.metrics import Progress, sb3_record, training_row
from kppo.agent.policy import Policy, PredictKeys
from kppo.training.runners import Runner, Start, make_runner
from kppo.training.sizes import fits_in_memory
from kppo.update.schedules import Schedules
from kppo.sb3.arguments import (
    Schedule,
    extractor_fields,
    jsonable_policy_kwargs,
    policy_config,
    sb3_config,
    split_schedule,
    tf_device,
    saved_extractor,
    user_extractor,
)
from kppo.core.types import Diagnostics, Moments
from kppo.sb3.base_class import BaseAlgorithm
from kppo.sb3.saves.from_sb3 import model_from_sb3
from kppo.sb3.saves.sb3_save import is_sb3_save, read_sb3_save
from kppo.sb3.vec_normalize import CONFIG_FIELDS as NORMALIZATION_FIELDS
from kppo.sb3.vec_normalize import VecNormalize, read_statistics, settings_fields
from kppo.gym_envs.spaces import flat_dim

_POLICIES = ("MlpPolicy", "CnnPolicy", "MultiInputPolicy")
#: SB3's message for `predict((obs, info))`.
MIXED_API_HINT = (
    "observation: You have passed a tuple to the predict() function instead of a Numpy array or a Dict. You are "
    "probably mixing Gym API with SB3 VecEnv API: `obs, info = env.reset()` (Gym) vs `obs = vec_env.reset()` (SB3 "
    "VecEnv); see https://stable-baselines3.readthedocs.io/en/master/guide/vec_envs.html#vecenv-api-vs-gym-api"
)
_FRESH_START = Start()  # a NamedTuple: shared safely as the default of `_build`
_Model = TypeVar("_Model", bound="PPO")


def _ppo_arg(name: str) -> property:
    """SB3's hyperparameter attribute `name` (read-only: kppo builds its Config from them once)."""
    return property(lambda self: self._ppo_args[name], doc=f"SB3's `{name}` (as given to the constructor).")


_SAVED_ARGUMENTS = (
    "policy",
    "policy_kwargs",
    "n_steps",
    "batch_size",
    "n_epochs",
    "gamma",
    "gae_lambda",
    "normalize_advantage",
    "ent_coef",
    "vf_coef",
    "max_grad_norm",
    "target_kl",
    "learning_rate",
    "clip_range",
    "clip_range_vf",
    "seed",
    "use_sde",
    "sde_sample_freq",
    "stats_window_size",
)


def _named(err: ValueError, message: str) -> ValueError:
    """`err`'s type with `message` (a ValueError where the type takes other arguments)."""
    try:
        return type(err)(message)
    except TypeError:
        return ValueError(message)


def _saved_arguments(metadata: dict, source: str) -> dict:
    """The SB3 arguments a kppo.PPO save holds in metadata.json's `extra.sb3`; a one-line ValueError naming `source`
    when they are missing or not what `save` writes."""
    extra = metadata.get("extra")
    saved = extra.get("sb3") if isinstance(extra, dict) else None
    if not isinstance(saved, dict):
        raise ValueError(f"path: {source!r} was not saved by kppo.PPO (no SB3 arguments in metadata.json)")
    missing = [key for key in _SAVED_ARGUMENTS if key not in saved]
    if missing or not isinstance(saved["policy_kwargs"], dict):
        what = f"no {', '.join(missing)}" if missing else f"policy_kwargs {saved['policy_kwargs']!r}"
        raise ValueError(f"path: {source!r}: metadata.json: extra.sb3: expected kppo.PPO's arguments, got {what}")
    return saved


def check_not_gym_tuple(observation: Any) -> None:
    """SB3's one-line error for `predict((obs, info))`: the Gym API's `reset()` result given as an observation."""
    if isinstance(observation, tuple) and len(observation) == 2 and isinstance(observation[1], dict):
        raise ValueError(MIXED_API_HINT)


class PPO(BaseAlgorithm, LightningSurface):
    """Proximal Policy Optimization (clip) with Stable-Baselines3's interface; see the module docstring for how each
    argument maps to `kppo.Config`. Environments are gymnasium envs (an id, an `Env`, or a gymnasium vector env in
    same-step auto-reset mode, e.g. from `kppo.make_vec_env`)."""

    policy_names: tuple[str, ...] = _POLICIES
    n_steps, batch_size, n_epochs = _ppo_arg("n_steps"), _ppo_arg("batch_size"), _ppo_arg("n_epochs")
    gamma, gae_lambda, normalize_advantage = _ppo_arg("gamma"), _ppo_arg("gae_lambda"), _ppo_arg("normalize_advantage")
    ent_coef, vf_coef, max_grad_norm = _ppo_arg("ent_coef"), _ppo_arg("vf_coef"), _ppo_arg("max_grad_norm")
    target_kl = _ppo_arg("target_kl")
    _policy_config: Callable[[dict], dict[str, Any]] = staticmethod(policy_config)  # policy_kwargs -> Config fields

    def __init__(
        self,
        policy: str,
        env: Any,
        learning_rate: float | Schedule = 3e-4,
        n_steps: int = 2048,
        batch_size: int = 64,
        n_epochs: int = 10,
        gamma: float = 0.99,
        gae_lambda: float = 0.95,
        clip_range: float | Schedule = 0.2,
        clip_range_vf: float | Schedule | None = None,
        normalize_advantage: bool = True,
        ent_coef: float | Schedule = 0.0,
        vf_coef: float = 0.5,
        max_grad_norm: float = 0.5,
        use_sde: bool = False,
        sde_sample_freq: int = -1,
        rollout_buffer_class: type | None = None,
        rollout_buffer_kwargs: dict[str, Any] | None = None,
        target_kl: float | None = None,
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
        if policy not in self.policy_names:
            raise ValueError(f"policy: expected one of {self.policy_names}, got {policy!r}")
        if rollout_buffer_class is not None:
            raise ValueError(
                f"rollout_buffer_class: expected None (kppo keeps its rollout in tensors), got {rollout_buffer_class!r}"
            )
        if rollout_buffer_kwargs:
            raise ValueError(f"rollout_buffer_kwargs: expected None or {{}}, got {rollout_buffer_kwargs!r}")
        if isinstance(stats_window_size, bool) or not isinstance(stats_window_size, int) or stats_window_size < 1:
            raise ValueError(f"stats_window_size: expected an integer >= 1, got {stats_window_size!r}")
        self.policy_class = policy
        self.verbose = verbose
        self.seed = int(cast(int, np.random.SeedSequence().entropy) % 2**31) if seed is None else int(seed)
        self.device = tf_device(device)
        self.tensorboard_log = tensorboard_log
        self.sb3_version: str | None = None  # the Stable-Baselines3 version of a loaded SB3 save
        self.learning_rate, self._lr_schedule = split_schedule(learning_rate, "learning_rate")
        self.clip_range, self._clip_schedule = split_schedule(clip_range, "clip_range")
        ent_coef, self._ent_schedule = split_schedule(ent_coef, "ent_coef")
        self._clip_vf_schedule = None
        self.clip_range_vf = None
        if clip_range_vf is not None:
            self.clip_range_vf, self._clip_vf_schedule = split_schedule(clip_range_vf, "clip_range_vf")
            if self.clip_range_vf <= 0:  # SB3 asserts it
                raise ArgumentError(
                    f"clip_range_vf: expected a positive number (None disables value clipping), got "
                    f"{self.clip_range_vf!r}"
                )
        self.use_sde, self.sde_sample_freq = bool(use_sde), int(sde_sample_freq)
        self.stats_window_size = stats_window_size
        self._ppo_args = dict(
            n_steps=n_steps,
            batch_size=batch_size,
            n_epochs=n_epochs,
            gamma=gamma,
            gae_lambda=gae_lambda,
            normalize_advantage=normalize_advantage,
            ent_coef=ent_coef,
            vf_coef=vf_coef,
            max_grad_norm=max_grad_norm,
            target_kl=target_kl,
        )
        self._policy_fields = self._policy_config(dict(policy_kwargs or {}))
        self.policy_kwargs = dict(policy_kwargs or {})
        extractor_fields(policy, dict(self.policy_kwargs), None)  # its one-line errors now
        self.num_timesteps, self._total_timesteps, self._n_updates = 0, 0, 0
        self._iterations = 0  # rollout-update iterations done by learn (Lightning's current_epoch)
        self._current_lr = self.learning_rate
        # the host runner and its state (set by the training loop)
        self._runner: Runner | None = None
        self.runner_state: Any = None
        self._spaces: tuple[gym.spaces.Space, gym.spaces.Space] | None = None
        self._loaded_stats: tuple[Moments, Moments] | None = None
        self._policy: Policy | None = None
        self._sb3_policy: ActorCriticPolicy | None = None  # `policy`, made at first use
        self._predict_keys = PredictKeys()  # the keys of stochastic predict calls: [seed, n] for the n-th
        self.agent: Agent | None = None
        self._gym_env: GymVecEnv | None = None  # the runner's gymnasium vector env (`env`: SB3's VecEnv over it)
        self._sb3_env: VecEnv | None = None  # what get_env() returns
        self._seed_given = seed is not None  # None: a VecEnv's own seed (make_vec_env(seed=...)) seeds its resets
        self.config: Config | None = None
        self.logger = Logger(verbose)
        self.ep_info_buffer: collections.deque = collections.deque(maxlen=stats_window_size)
        self.ep_success_buffer: collections.deque = collections.deque(maxlen=stats_window_size)
        if seed is not None:  # as SB3's _setup_model, before any reset: the global generators an env may draw from
            set_random_seed(seed)
        if env is not None:
            self.set_env(env)

    # ---------------------------------------------------------------------------------------------------------
    # Construction helpers
    # ---------------------------------------------------------------------------------------------------------

    def _network_fields(self, observation_space: gym.spaces.Space) -> dict[str, Any]:
        """`policy_config`'s fields and the features extractor's for `observation_space`; SB3's CnnPolicy puts its
        heads on the CNN's features (`net_arch=[]`) unless policy_kwargs give a net_arch, and sb3-contrib's
        CnnLstmPolicy on its LSTMs' outputs."""
        fields = dict(self._policy_fields)
        fields.update(extractor_fields(self.policy_class, dict(self.policy_kwargs), observation_space))
        if self.policy_class in ("CnnPolicy", "CnnLstmPolicy") and self.policy_kwargs.get("net_arch") is None:
            fields["actor_hidden_units"] = fields["critic_hidden_units"] = ()
        if user_extractor(dict(self.policy_kwargs))[0] is not None:
            fields["jit_update"] = False  # a user's layer may convolve: XLA's CPU conv gradients are ~100x slower
        return fields

    def _user_extractor_factory(self, config: Config, observation_space: gym.spaces.Space):
        """The factory of a user's Keras `features_extractor_class` (a Config names only kppo's); None without."""
        extractor_class, kwargs = user_extractor(dict(self.policy_kwargs))
        if extractor_class is None:
            return None
        init = (config.normalize_images, config.kernel_init, config.bias_init, config.seed)
        return extractor_factory(extractor_class, observation_space, kwargs, *init)

    def _user_agent(self, vec_env: GymVecEnv, config: Config) -> Agent | None:
        """The networks of a user's Keras `features_extractor_class`; None without one."""
        factory = self._user_extractor_factory(config, vec_env.observation_space)
        if factory is None:
            return None
        return build_agent(config, vec_env.observation_space, vec_env.action_space, features_extractor=factory)

    def _make_config(
        self, n_envs: int, action_space: gym.spaces.Space, normalize: dict[str, Any], fields: dict
    ) -> Config:
        args = dict(
            self._ppo_args,
            learning_rate=self.learning_rate,
            clip_range=self.clip_range,
            clip_range_vf=self.clip_range_vf,
            verbose=self.verbose,
            seed=self.seed,
            use_sde=self.use_sde,
            sde_sample_freq=self.sde_sample_freq,
        )
        return sb3_config(args, n_envs, action_space, normalize, fields)

    def _build(self, env: Any, start: Start = _FRESH_START) -> None:
        own_seed = isinstance(env, VecEnv) and not self._seed_given and env.pending_seed is not None
        seed = None if own_seed else self.seed
        vec_env = _make_gym_vec_env(env, num_envs=1, seed=seed, verbose=self.verbose)  # SB3: one env per id
        try:
            if start.agent is not None and (vec_env.observation_space, vec_env.action_space) != self._spaces:
                observation_space, action_space = self._model_spaces()
                raise ValueError(
                    f"env: expected spaces {observation_space} / {action_space} (those of the model), got "
                    f"{vec_env.observation_space} / {vec_env.action_space}"
                )
            normalize = self._normalization(env)
            fields = self._network_fields(vec_env.observation_space)
            self.config = self._make_config(vec_env.num_envs, vec_env.action_space, normalize, fields)
            if start.agent is None:
                start = start._replace(agent=self._user_agent(vec_env, self.config))
        except BaseException:
            vec_env.close()
            raise
        self._schedules = self._schedules_now(self._current_lr, self.clip_range, self.ent_coef, self.clip_range_vf)
        if isinstance(env, VecNormalize):
            env.model = self
            start = start._replace(count_reset=env.training)
            if env.loaded is not None:  # VecNormalize.load: its statistics, as SB3
                obs_stats, return_stats = env.loaded_moments()
                start = start._replace(obs_stats=obs_stats, return_stats=return_stats)
        try:  # the update reads the schedules `_apply_schedules` set before each rollout
            with self._device_scope(), fits_in_memory([self.config]):
                self._runner = make_runner(vec_env, self.config, None, start, lambda iteration: self._schedules)
        except BaseException:
            vec_env.close()
            raise
        self.runner_state = self._runner.state
        self.agent = self._runner.agent
        self._gym_env = self._runner.env
        self._sb3_env = env if isinstance(env, VecEnv) else VecEnv(self._gym_env.vec_env)
        self._spaces = (self._runner.observation_space, self._runner.action_space)
        self._policy = None

    def _normalization(self, env: Any) -> dict[str, Any]:
        """Config's normalize_obs, normalize_reward and normalize_obs_keys: a VecNormalize's settings; else the
        trained model's; else off."""
        if isinstance(env, VecNormalize):
            if env.norm_reward and env.gamma != self._ppo_args["gamma"]:
                raise ValueError(
                    f"VecNormalize.gamma: kppo scales rewards with PPO's gamma "
                    f"({self._ppo_args['gamma']}), got {env.gamma}"
                )
            return env.config_fields()
        if self.agent is not None and self.config is not None:
            return {name: getattr(self.config, name) for name in NORMALIZATION_FIELDS}
        return dict(normalize_obs=False, normalize_reward=False)

    def _device_scope(self):
        return tf.device(self.device) if self.device else contextlib.nullcontext()

    def _update_info_buffer(self, record: StepRecord) -> None:
        """SB3's `_update_info_buffer`: the Monitor statistics of every episode that ended at this step."""
        for i in np.flatnonzero(record.step.terminated | record.step.truncated):  # SB3: only at an episode's end
            info = record.info(int(i))
            self.ep_info_buffer.append(info["episode"])
            if info.get("is_success") is not None:
                self.ep_success_buffer.append(info["is_success"])

    # ---------------------------------------------------------------------------------------------------------
    # SB3 API
    # ---------------------------------------------------------------------------------------------------------

    @property
    def n_envs(self) -> int:
        return 0 if self._gym_env is None else self._gym_env.num_envs

    @property
    def observation_space(self) -> gym.spaces.Space:
        return self._model_spaces()[0]

    @property
    def action_space(self) -> gym.spaces.Space:
        return self._model_spaces()[1]

    def _model_spaces(self) -> tuple[gym.spaces.Space, gym.spaces.Space]:
        """The networks' (observation space, action space), set with them (`_build`, `load`)."""
        assert self._spaces is not None, "the model has no networks yet"
        return self._spaces

    def set_env(self, env: Any, force_reset: bool = True) -> None:
        """Uses `env` from now on; the spaces must match the trained networks' (a one-line error otherwise)."""
        del force_reset  # kppo always resets the new env
        if self.agent is None:
            self._build(env)
            return
        old_runner = self._runner
        self._build(env, Start(self.agent, *self._statistics()))
        if old_runner is not None:
            old_runner.close()

    def learn(
        self: _Model,
        total_timesteps: int,
        callback: Any = None,
        log_interval: int = 1,
        tb_log_name: str = "PPO",
        reset_num_timesteps: bool = True,
        progress_bar: bool = False,
        *,
        env: Any = None,
        log_every_n_steps: int | None = None,
        default_root_dir: str | Path | None = None,
    ) -> _Model:
        """Collects rollouts and updates until `total_timesteps` more steps (SB3's counting) have been taken.

        Callbacks follow SB3: `on_step` runs after every vector-env step during the rollout, with `self.locals`
        holding `obs`, `new_obs`, `actions`, `rewards`, `dones`, `infos` and `n_steps`; returning False stops at once.
        Keras callbacks run with an epoch = one iteration (`kppo.training.keras_callbacks`).

        lit_sb3's arguments (keyword only: SB3's order comes first): `env` trains on this env from now on
        (`set_env`); `log_every_n_steps` is `log_interval` (a step is one iteration); `default_root_dir` is where
        the run goes, as Lightning's: `<default_root_dir>/<tb_log_name>_<n>/` gets the TensorBoard log,
        `hparams.yaml` and, at the end, `checkpoints/epoch=<last epoch>-step=<global_step>.zip`.
        """
        if env is not None:
            self.set_env(env)
        log_interval = cast(int, log_every(log_interval, log_every_n_steps))
        run = None if default_root_dir is None else next_run_dir(default_root_dir, tb_log_name)
        self._learn(total_timesteps, callback, log_interval, tb_log_name, reset_num_timesteps, progress_bar, run)
        if run is not None:
            self.save(run / "checkpoints" / f"epoch={max(self.current_epoch - 1, 0)}-step={self.global_step}.zip")
        return self

    def _learn(
        self,
        total_timesteps: int,
        callback: Any,
        log_interval: int,
        tb_log_name: str,
        reset_num_timesteps: bool,
        progress_bar: bool,
        run: Path | None,
    ) -> None:
        """`learn` on the current env; `run`: the run's directory (`default_root_dir`), else SB3's
        `tensorboard_log/<tb_log_name>_<n>`."""
        if self._runner is None:
            raise ValueError("env: expected an environment before learn(); pass one to PPO(...) or set_env()")
        vec_env = self.get_vec_normalize_env()
        if vec_env is not None and not vec_env.training:
            raise ValueError(
                "VecNormalize.training: expected True while learning (kppo freezes the statistics outside "
                "learn by itself), got False"
            )
        if isinstance(total_timesteps, bool) or not isinstance(total_timesteps, (int, float, np.number)):
            raise ValueError(f"total_timesteps: expected a number of steps, got {total_timesteps!r}")
        if reset_num_timesteps:
            self.num_timesteps = 0
            self.ep_info_buffer.clear()
        self._total_timesteps = int(total_timesteps) + self.num_timesteps
        if run is not None:
            self._write_hparams(run)
            self.logger = Logger(self.verbose, run)
        elif self.tensorboard_log is not None:
            self.logger = Logger(self.verbose, next_run_dir(self.tensorboard_log, tb_log_name))
        else:
            self.logger.verbose = self.verbose
        callback, keras_callbacks = split_callbacks(callback)
        backup_of(keras_callbacks, tf_native=False)  # one-line refusals: BackupAndRestore, ModelCheckpoint
        callback = None if callback is None else make_callback(callback)  # None: no SB3 locals built per step
        if callback is not None:
            callback.init_callback(self)
        assert self.config is not None  # built with the runner
        rollout_size = self.config.rollout_size
        iterations = max(math.ceil((self._total_timesteps - self.num_timesteps) / rollout_size), 0)
        bar = make_progress_bar(iterations * rollout_size) if progress_bar else None
        start = (time.perf_counter(), self.num_timesteps)
        counter = {"iterations": 0}

        def on_call(diag: Diagnostics, n: int, progress: Progress) -> None:
            self._policy = None
            self._n_updates += int(diag.minibatch_steps)
            self._iterations += n
            counter["iterations"] += n
            if bar is not None:
                bar.update(n * rollout_size)
            if log_interval is not None and counter["iterations"] % log_interval == 0:
                self._log(diag, counter["iterations"], progress, start)

        keras_hooks = KerasCallbacks(keras_callbacks, self.agent, rollout_size) if keras_callbacks else None
        hooks = Hooks(
            callback,
            schedule=self._apply_schedules,
            on_env_step=self._update_info_buffer,
            on_call=on_call,
            keras=keras_hooks,
        )
        try:
            with self._device_scope(), fits_in_memory([self.config]):
                run_loop(self._runner, Plan([iterations], False, 1, rollout_size, self._total_timesteps), hooks, self)
        finally:
            self._runner = self._runner.with_state(self.runner_state)
            self._policy = None
            if bar is not None:
                bar.close()

    def _clip_now(self) -> float:
        return float(self._schedules.clip_range) if self._runner is not None else self.clip_range

    def _clip_vf_now(self) -> float | None:
        if self._runner is not None and self._schedules.clip_range_vf is not None:
            return float(self._schedules.clip_range_vf)
        return self.clip_range_vf

    @staticmethod
    def _schedules_now(
        learning_rate: float, clip_range: float, ent_coef: float, clip_range_vf: float | None
    ) -> Schedules:
        """Host values as the update reads them (float32 tensors: a new value does not retrace the update)."""
        values = dict(
            learning_rate=learning_rate, clip_range=clip_range, ent_coef=ent_coef, clip_range_vf=clip_range_vf
        )
        return Schedules(**{k: None if x is None else tf.constant(float(x), tf.float32) for k, x in values.items()})

    def _apply_schedules(self, progress_remaining: float) -> None:
        """SB3's schedules, evaluated before every rollout (the loop's `schedule` hook)."""
        if self._lr_schedule is not None:
            self._current_lr = float(self._lr_schedule(progress_remaining))
        now = self._schedules

        def at(schedule: Schedule | None, current: Any) -> Any:
            return current if schedule is None else float(schedule(progress_remaining))

        self._schedules = self._schedules_now(
            self._current_lr,
            at(self._clip_schedule, now.clip_range),
            at(self._ent_schedule, now.ent_coef),
            at(self._clip_vf_schedule, now.clip_range_vf),
        )

    def _log(self, diag: Diagnostics, iteration: int, progress: Progress, start: tuple[float, int]) -> None:
        """One SB3 logger dump: the metrics of this iteration under SB3's keys (`kppo.training.metrics.METRICS`), with
        SB3's counters (iterations and fps of this `learn` call, episode means over the last `stats_window_size`)."""
        elapsed = max(time.perf_counter() - start[0], 1e-9)
        assert self.config is not None  # called by `learn`
        row = training_row(diag, 1, self.config.rollout_size, elapsed, progress)
        row.update(
            {
                "train/iterations": iteration,
                "train/gradient_steps": self._n_updates,
                "time/steps_per_s": (self.num_timesteps - start[1]) / elapsed,
                "time/elapsed_s": elapsed,
            }
        )
        for name, key in (("rollout/ep_rew_mean", "r"), ("rollout/ep_len_mean", "l")):
            row.pop(name)
            if self.ep_info_buffer:
                row[name] = float(np.mean([episode[key] for episode in self.ep_info_buffer]))
        for key, value in sb3_record(row).items():
            self.logger.record(key, value)
        self.logger.dump(self.num_timesteps)

    @property
    def policy(self) -> ActorCriticPolicy:
        """SB3's `model.policy`: the `ActorCriticPolicy` surface over the networks (`kppo.sb3.policies`)."""
        if self._sb3_policy is None:
            self._sb3_policy = ActorCriticPolicy(self)
        return self._sb3_policy

    @property
    def kppo_policy(self) -> Policy:
        """kppo's own policy of the model (numpy acting, what `kppo.export` converts), with the current
        normalization statistics."""
        return self._get_policy()

    def statistics(self) -> tuple[Moments, Moments] | None:
        """(observation statistics, return statistics) of the running or loaded model (None before it has networks)."""
        if self._runner is not None:
            return self.runner_state.rollout.obs_stats, self.runner_state.rollout.return_stats
        return self._loaded_stats

    def use_vec_normalize(self, vec_normalize: VecNormalize | str | Path) -> None:
        """kppo: freezes a VecNormalize's observation statistics into this model's policy without an env (what
        `kppo export model.zip --vecnormalize vec_normalize.pkl` does): a wrapper `VecNormalize.load` returned, or
        the file itself (kppo's JSON or SB3's `vec_normalize.pkl`, read as data). `predict` and `kppo.export` then
        take raw observations. A model with an env takes `VecNormalize.load(path, venv)` as its env instead."""
        if self._runner is not None:
            raise ValueError(
                "vec_normalize: expected a model without an env (this one has one: pass VecNormalize.load(path, "
                "venv) to set_env instead)"
            )
        if self.agent is None or self.config is None:
            raise ValueError("vec_normalize: the model has no networks yet; load() it first")
        if isinstance(vec_normalize, VecNormalize):
            fields = vec_normalize.config_fields()
            loaded = vec_normalize.loaded or (vec_normalize.obs_rms, vec_normalize.ret_rms)
        else:
            settings, loaded = read_statistics(vec_normalize)
            fields = settings_fields(settings)
        obs_rms, ret_rms = loaded
        size = flat_dim(self._model_spaces()[0])
        if obs_rms is None or int(np.size(obs_rms.mean)) != size:
            raise ValueError(
                f"vec_normalize: expected statistics of the model's {size} observation values, got "
                f"{'none' if obs_rms is None else int(np.size(obs_rms.mean))}"
            )
        fields.pop("normalize_obs_keys", None)  # the model's own: the keys it was trained with
        self.config = self.config.replace(**fields)
        obs_stats = Moments(*(tf.constant(np.asarray(x), tf.float32) for x in obs_rms))
        ret_stats = (
            self._statistics()[1]
            if ret_rms is None
            else Moments(*(tf.constant(np.asarray(x), tf.float32) for x in ret_rms))
        )
        self._loaded_stats = (obs_stats, ret_stats)
        self._policy = None

    def _statistics(self) -> tuple[Moments, Moments]:
        """`statistics()` of a model with networks (running or loaded)."""
        stats = self.statistics()
        assert stats is not None, "the model has no networks yet"
        return stats

    def _get_policy(self) -> Policy:
        if self.agent is None:
            raise ValueError("predict: the model has no networks yet; construct it with an env or load() it")
        if self._policy is None:
            assert self.config is not None  # set with the agent
            self._policy = make_policy(self.agent, self._statistics()[0], self.config, *self._model_spaces())
            self._policy.keys = self._predict_keys  # one count of predict calls across rebuilt policies
        self._predict_keys.seed = self.seed  # set_random_seed may have changed it
        return self._policy

    def predict(
        self,
        observation: Any,
        state: Any = None,
        episode_start: Any = None,
        deterministic: bool = False,
        action_masks: Any = None,
    ):
        """(action, None) for one observation or a batch (raw observations, as the env returns them); only among the
        actions `action_masks` allows when given (sb3-contrib's MaskablePPO.predict)."""
        check_not_gym_tuple(observation)
        return self._get_policy().predict(observation, state, episode_start, deterministic, action_masks)

    def save(self, path: str | Path | Any, exclude: Any = None, include: Any = None) -> None:
        """Writes the model as SB3 does: to `path.zip` (`path` itself when it ends in .zip) or into an open binary
        file. The zip holds a kppo agent directory (config.yaml, metadata.json, weights/): no pickle. Schedules are
        saved as their current values. `exclude` / `include` (SB3's attribute lists) change nothing: kppo saves no
        pickled attributes, only the arguments it is rebuilt from."""
        del exclude, include
        if self.agent is None:
            raise ValueError("save: the model has no networks yet; construct it with an env first")
        obs_stats, return_stats = self._statistics()
        extra = {
            "sb3": {
                **self._ppo_args,
                "learning_rate": self._current_lr,
                "clip_range": self._clip_now(),
                "clip_range_vf": self._clip_vf_now(),
                "policy": self.policy_class,
                "policy_kwargs": jsonable_policy_kwargs(self.policy_kwargs),
                "seed": self.seed,
                "stats_window_size": self.stats_window_size,
                "use_sde": self.use_sde,
                "sde_sample_freq": self.sde_sample_freq,
                "num_timesteps": self.num_timesteps,
            }
        }
        assert self.config is not None  # set with the agent
        with tempfile.TemporaryDirectory(prefix="kppo-save-") as staging:
            folder = Path(staging) / "model"
            checkpoint.save(folder, self.config, self.agent, obs_stats, return_stats, *self._model_spaces(), extra)
            write_zip(folder, zip_target(path) if isinstance(path, (str, Path)) else path)

    @classmethod
    def load(
        cls,
        path: str | Path | Any,
        env: Any = None,
        device: str = "auto",
        custom_objects: dict | None = None,
        print_system_info: bool = False,
        force_reset: bool = True,
        **kwargs: Any,
    ) -> PPO:
        """Rebuilds a saved model (a zip as `save` writes, `path` saved as `path.zip`, an open binary file, or a kppo
        agent directory; or a zip Stable-Baselines3 2.x saved, read without torch: `kppo.sb3.saves.sb3_save`); `env`
        (optional) must have the saved spaces. Nothing is unpickled: a model saved with a
        user's Keras `features_extractor_class` needs it again as `custom_objects={"features_extractor_class": cls}`
        (its name is all the file holds); `print_system_info` is accepted and ignored."""
        del print_system_info, force_reset
        if is_sb3_save(path):  # a zip Stable-Baselines3 wrote: read without torch, nothing unpickled
            return model_from_sb3(cls, read_sb3_save(path), env, device, kwargs)
        source = path if isinstance(path, (str, Path)) else "the file object"
        path = agent_dir(path)
        _, metadata, _, _ = checkpoint.read_metadata(path)
        saved = _saved_arguments(metadata, str(source))
        saved["policy_kwargs"] = saved_extractor(saved["policy_kwargs"], custom_objects or {})
        args = {k: saved[k] for k in _SAVED_ARGUMENTS if k not in ("policy", "policy_kwargs")}
        args.update(kwargs)
        try:
            model = cls(saved["policy"], None, policy_kwargs=saved["policy_kwargs"], device=device, **args)
        except ValueError as err:  # kppo's one-line refusals (ArgumentError, ...): name the save they came from
            raise _named(err, f"{str(source)!r}: metadata.json: extra.sb3: {err}") from None
        loaded = load_agent(path, model._user_extractor_factory)
        model.num_timesteps = int(saved.get("num_timesteps", 0))
        model.config, model.agent = loaded.config, loaded.agent
        model._spaces = (loaded.observation_space, loaded.action_space)
        model._loaded_stats = (loaded.obs_stats, loaded.return_stats)
        model._current_lr = model.learning_rate
        if env is not None:
            model.set_env(env)
        return model
