"""`OnPolicyAlgorithm`: Stable-Baselines3's on-policy training (stable_baselines3/common/on_policy_algorithm.py)
over kppo's one training loop.

`learn` runs `kppo.training.train.run_loop` on the host runner of the env (`_build` makes the networks and the
Config that the subclass translates, `_make_config`, resetting nothing; the first `learn` makes the runner and
resets the env, as SB3's `_setup_learn`) with SB3's schedules, callbacks, info buffers, logger and progress bar as its
hooks; `rollout_buffer` views the last rollout with SB3's buffer fields. No math here: the rollout and the update are
the runner's.
"""

from __future__ import annotations

import collections
import contextlib
import math
import time
from pathlib import Path
from typing import Any, TypeVar, cast

import gymnasium as gym
import numpy as np

from kppo._tf import tf
from kppo.core import normalization
from kppo.agent.agent import Agent, build_agent
from kppo.training.runners.settings import agent_spec
from kppo.callbacks import make_callback
from kppo.callbacks.progress import progress_bar as make_progress_bar
from kppo.config.options import Config
from kppo.core.types import Diagnostics
from kppo.gym_envs.make import gym_vec_env as _make_gym_vec_env
from kppo.gym_envs.spaces import normalized_columns
from kppo.gym_envs.vector import GymVecEnv
from kppo.rollout.gymnasium import StepRecord
from kppo.sb3.arguments import Schedule, network_fields, split_schedule, user_extractor_factory
from kppo.sb3.base_class import BaseAlgorithm
from kppo.sb3.buffers import RolloutBufferView, rollout_view
from kppo.sb3.contracts import check_cnn_space, check_policy_space
from kppo.sb3.lightning import LightningSurface, log_every
from kppo.sb3.logger import Logger, next_run_dir
from kppo.sb3.utils import set_random_seed
from kppo.sb3.vec_normalize import CONFIG_FIELDS as NORMALIZATION_FIELDS
from kppo.sb3.vec_normalize import VecNormalize
from kppo.training.hooks import Hooks
from kppo.training.keras_callbacks import KerasCallbacks, backup_of, split_callbacks
from kppo.training.metrics import Progress, sb3_record, training_row
from kppo.training.plan import Plan
from kppo.training.runners import Start, make_runner
from kppo.training.sizes import fits_in_memory
from kppo.training.train import run_loop
from kppo.update.schedules import Schedules
from kppo.vec_envs.vec_env import VecEnv

_Model = TypeVar("_Model", bound="OnPolicyAlgorithm")
#: SB3's episode means, each with the Monitor key it averages.
EPISODE_MEANS = {"rollout/ep_rew_mean": "r", "rollout/ep_len_mean": "l"}


def hyperparameter(name: str) -> property:
    """SB3's hyperparameter attribute `name` (read-only: kppo builds its Config from them once)."""
    return property(lambda self: self._ppo_args[name], doc=f"SB3's `{name}` (as given to the constructor).")


def host_schedules(learning_rate: float, clip_range: float, ent_coef: float, clip_range_vf: float | None) -> Schedules:
    """Host values as the update reads them (float32 tensors: a new value does not retrace the update)."""
    values = dict(learning_rate=learning_rate, clip_range=clip_range, ent_coef=ent_coef, clip_range_vf=clip_range_vf)
    return Schedules(**{k: None if x is None else tf.constant(float(x), tf.float32) for k, x in values.items()})


def normalization_fields(env: Any, trained: Config | None) -> dict[str, Any]:
    """Config's normalization fields: a VecNormalize's settings (its `gamma` the reward scaling's, PPO's `gamma` the
    advantages'); else the `trained` model's; else off."""
    if isinstance(env, VecNormalize):
        return env.config_fields()
    if trained is not None:
        return {name: getattr(trained, name) for name in NORMALIZATION_FIELDS}
    return dict(normalize_obs=False, normalize_reward=False)


def user_agent(policy_kwargs: dict, config: Config, vec_env: GymVecEnv) -> Agent | None:
    """The networks of a user's Keras `features_extractor_class` in `policy_kwargs`; None without one."""
    factory = user_extractor_factory(policy_kwargs, config, vec_env.observation_space)
    if factory is None:
        return None
    return build_agent(agent_spec(config), vec_env.observation_space, vec_env.action_space, features_extractor=factory)


def vec_normalize_start(env: Any, model: Any, start: Start) -> Start:
    """`start` on a VecNormalize `env`, whose statistics `model` holds from now on (one set for both): the
    wrapper's own when it has any (those `VecNormalize.load` read, or its own steps gathered), as SB3 starts from
    them; the reset observations of the first `learn` counted unless `training=False` (as SB3's)."""
    if not isinstance(env, VecNormalize):
        return start
    start = start._replace(count_reset=env.training)
    if env.loaded is not None:
        obs_stats, return_stats = env.loaded_moments()
        start = start._replace(
            obs_stats=start.obs_stats if obs_stats is None else obs_stats,
            return_stats=start.return_stats if return_stats is None else return_stats,
        )
    env.model = model
    return start


def concrete_start(start: Start, vec_env: GymVecEnv) -> Start:
    """`start` with its statistics set (SB3's fresh ones, mean 0, var 1, count 1e-4, where it has none), as float32
    numpy moments: what the model shows before `learn` resets the env and makes the runner."""
    obs_stats = start.obs_stats or normalization.initial_stats([vec_env.flat_obs_dim])
    return_stats = start.return_stats or normalization.initial_stats(())
    return start._replace(
        obs_stats=normalization.to_numpy(obs_stats), return_stats=normalization.to_numpy(return_stats)
    )


def check_learn(env: Any, vec_normalize: VecNormalize | None, total_timesteps: Any) -> None:
    """`learn`'s one-line refusals: no env, a VecNormalize that does not train, timesteps that are no number."""
    if env is None:
        raise ValueError("env: expected an environment before learn(); pass one to PPO(...) or set_env()")
    if vec_normalize is not None and not vec_normalize.training:
        raise ValueError(
            "VecNormalize.training: expected True while learning (kppo freezes the statistics outside "
            "learn by itself), got False"
        )
    if isinstance(total_timesteps, bool) or not isinstance(total_timesteps, (int, float, np.number)):
        raise ValueError(f"total_timesteps: expected a number of steps, got {total_timesteps!r}")


def sb3_row(
    diag: Diagnostics,
    progress: Progress,
    rollout_size: int,
    start: tuple[float, int],
    counts: tuple[int, int, int],
    episodes: Any,
) -> dict[str, Any]:
    """One SB3 logger dump: the metrics of this iteration under SB3's keys (`kppo.training.metrics.METRICS`), with
    SB3's counters: `counts` (iterations of this `learn` call, gradient steps, timesteps), the fps of this call since
    `start` (its (time, timesteps)), and the episode means over `episodes` (SB3's `ep_info_buffer`: the Monitor
    statistics of the last `stats_window_size` episodes) in place of this iteration's."""
    elapsed = max(time.perf_counter() - start[0], 1e-9)
    iteration, gradient_steps, num_timesteps = counts
    row = training_row(diag, 1, rollout_size, elapsed, progress)
    row.update(
        {
            "train/iterations": iteration,
            "train/gradient_steps": gradient_steps,
            "time/steps_per_s": (num_timesteps - start[1]) / elapsed,
            "time/elapsed_s": elapsed,
        }
    )
    for name, key in EPISODE_MEANS.items():
        row.pop(name)
        if episodes:
            row[name] = float(np.mean([episode[key] for episode in episodes]))
    return sb3_record(row)


def _check_model_spaces(spaces: tuple[gym.spaces.Space, gym.spaces.Space], vec_env: GymVecEnv) -> None:
    """A one-line error unless the env's (observation space, action space) are the model's `spaces`."""
    if (vec_env.observation_space, vec_env.action_space) != spaces:
        raise ValueError(
            f"env: expected spaces {spaces[0]} / {spaces[1]} (those of the model), got "
            f"{vec_env.observation_space} / {vec_env.action_space}"
        )


def _ended_episode_infos(record: StepRecord) -> list[dict[str, Any]]:
    """The infos of the envs whose episode ended at this step (SB3 reads Monitor's statistics only there)."""
    return [record.info(int(i)) for i in np.flatnonzero(record.step.terminated | record.step.truncated)]


class OnPolicyAlgorithm(BaseAlgorithm, LightningSurface):
    """SB3's `OnPolicyAlgorithm`: rollouts of `n_steps` per env, then an update, until `learn`'s timesteps are taken.
    The subclass translates its arguments into a Config (`_make_config`) and sets the clip ranges and their schedules
    (`_clip_*`), which `_apply_schedules` evaluates before each rollout with the learning rate and entropy ones."""

    n_steps, gamma, gae_lambda = hyperparameter("n_steps"), hyperparameter("gamma"), hyperparameter("gae_lambda")
    ent_coef, vf_coef = hyperparameter("ent_coef"), hyperparameter("vf_coef")
    max_grad_norm = hyperparameter("max_grad_norm")
    _clip_start: float  # the clip ranges' values at the start (the subclass's `clip_range`, `clip_range_vf`)
    _clip_vf_start: float | None
    _clip_schedule: Schedule | None
    _clip_vf_schedule: Schedule | None

    def __init__(
        self,
        policy: str,
        learning_rate: float | Schedule,
        n_steps: int,
        gamma: float,
        gae_lambda: float,
        ent_coef: float | Schedule,
        vf_coef: float,
        max_grad_norm: float,
        rollout_buffer_class: type | None = None,
        rollout_buffer_kwargs: dict[str, Any] | None = None,
        **common: Any,
    ):
        """SB3's on-policy arguments; `common`: `BaseAlgorithm`'s (policy_kwargs, seed, device, ...)."""
        super().__init__(policy, learning_rate, **common)
        if rollout_buffer_class is not None:
            raise ValueError(
                f"rollout_buffer_class: expected None (kppo keeps its rollout in tensors), got {rollout_buffer_class!r}"
            )
        if rollout_buffer_kwargs:
            raise ValueError(f"rollout_buffer_kwargs: expected None or {{}}, got {rollout_buffer_kwargs!r}")
        ent_coef, self._ent_schedule = split_schedule(ent_coef, "ent_coef")
        self._ppo_args: dict[str, Any] = {  # the hyperparameters as given (the subclass adds its own)
            "n_steps": n_steps,
            "gamma": gamma,
            "gae_lambda": gae_lambda,
            "ent_coef": ent_coef,
            "vf_coef": vf_coef,
            "max_grad_norm": max_grad_norm,
        }
        self._iterations = 0  # rollout-update iterations done by learn (Lightning's current_epoch)
        self.ep_info_buffer: collections.deque = collections.deque(maxlen=self.stats_window_size)
        self.ep_success_buffer: collections.deque = collections.deque(maxlen=self.stats_window_size)

    def _setup_model(self, env: Any) -> None:
        """SB3's `_setup_model`: the global generators seeded before any reset (an env may draw), then the runner."""
        if self._seed_given:
            set_random_seed(self.seed)
        if env is not None:
            self.set_env(env)

    def _device_scope(self):
        return tf.device(self.device) if self.device else contextlib.nullcontext()

    def _make_config(self, n_envs: int, action_space: gym.spaces.Space, normalize: dict, fields: dict) -> Config:
        """The Config of this model's arguments for `n_envs` envs, with `normalize`'s and the networks' `fields`."""
        raise NotImplementedError

    def _network_fields(self, observation_space: gym.spaces.Space) -> dict[str, Any]:
        """The networks' Config fields for `observation_space` (`kppo.sb3.arguments.network_fields`)."""
        return network_fields(self.policy_class, self._policy_fields, self.policy_kwargs, observation_space)

    def _user_extractor_factory(self, config: Config, observation_space: gym.spaces.Space):
        """The factory of a user's Keras `features_extractor_class` (a Config names only kppo's); None without."""
        return user_extractor_factory(self.policy_kwargs, config, observation_space)

    def _build(self, env: Any, start: Start) -> None:
        own_seed = isinstance(env, VecEnv) and not self._seed_given and env.pending_seed is not None
        seed = None if own_seed else self.seed
        given_space = getattr(env, "single_observation_space", getattr(env, "observation_space", None))
        if isinstance(given_space, gym.spaces.Space):  # SB3's refusals (a nested Dict), before kppo's own
            check_policy_space(self.policy_class, given_space)
        # SB3: one env per id; no env checker from `verbose` (SB3 checks envs only in `check_env`)
        vec_env = _make_gym_vec_env(env, num_envs=1, seed=seed)
        try:
            check_policy_space(self.policy_class, vec_env.observation_space)  # SB3's refusals, its messages
            if isinstance(given_space, gym.spaces.Space):
                check_cnn_space(self.policy_class, given_space, vec_env.observation_space, self.policy_kwargs)
            if start.agent is not None:
                _check_model_spaces(self._model_spaces(), vec_env)
            normalize = normalization_fields(env, self.config if self.agent is not None else None)
            fields = self._network_fields(vec_env.observation_space)
            self.config = self._make_config(vec_env.num_envs, vec_env.action_space, normalize, fields)
            normalized_columns(vec_env.observation_space, self.config.normalize_obs_keys)  # its one-line errors now
            if start.agent is None:
                user = user_agent(self.policy_kwargs, self.config, vec_env)
                with self._device_scope(), fits_in_memory([self.config]):
                    agent = user or build_agent(
                        agent_spec(self.config), vec_env.observation_space, vec_env.action_space
                    )
                start = start._replace(agent=agent, from_spec=user is None)  # kppo's networks for the config
        except BaseException:
            vec_env.close()
            raise
        self._schedules = host_schedules(self._current_lr, self._clip_start, self.ent_coef, self._clip_vf_start)
        self._runner, self.runner_state = None, None
        self.agent, self._gym_env, self._policy = start.agent, vec_env, None
        self._spaces = (vec_env.observation_space, vec_env.action_space)
        self._sb3_env = env if isinstance(env, VecEnv) else VecEnv(vec_env.vec_env)
        self._pending = vec_normalize_start(env, self, concrete_start(start, vec_env))

    def _make_runner(self) -> None:
        """SB3's first reset (`_setup_learn`): the runner of the env, from the networks and statistics the model has
        now, resetting the env (its observations counted in a training VecNormalize's statistics). A failure leaves the
        env open, as SB3 does: the model holds it, and a later `learn` (with other arguments) uses it."""
        assert self._pending is not None and self._gym_env is not None and self.config is not None  # set by _build
        # the update reads the schedules `_apply_schedules` set before each rollout
        with self._device_scope(), fits_in_memory([self.config]):
            runner = make_runner(self._gym_env, self.config, None, self._pending, lambda it: self._schedules)
        self._runner, self.runner_state, self._pending = runner, runner.state, None

    def learn(
        self: _Model,
        total_timesteps: int,
        callback: Any = None,
        log_interval: int = 1,
        tb_log_name: str = "OnPolicyAlgorithm",
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
        callbacks = self._setup_learn(total_timesteps, callback, reset_num_timesteps, tb_log_name, run)
        self._learn(callbacks, log_interval, progress_bar)
        if run is not None:
            self.save(run / "checkpoints" / f"epoch={max(self.current_epoch - 1, 0)}-step={self.global_step}.zip")
        return self

    def _setup_learn(
        self, total_timesteps: int, callback: Any, reset_num_timesteps: bool, tb_log_name: str, run: Path | None
    ) -> tuple[Any, list]:
        """SB3's `_setup_learn`: the checks, the step counters, the logger (`run`: the run's directory,
        `default_root_dir`; else SB3's `tensorboard_log/<tb_log_name>_<n>`), and (SB3 callback, Keras callbacks)."""
        check_learn(self._gym_env, self.get_vec_normalize_env(), total_timesteps)
        if self._runner is None:
            self._make_runner()
        if reset_num_timesteps:
            self.num_timesteps = 0
            self.ep_info_buffer.clear()
        self._total_timesteps = int(total_timesteps) + self.num_timesteps
        if run is not None:
            self._write_hparams(run)
            self.logger = Logger(self.verbose, run)
        elif self.tensorboard_log is not None:
            self.logger = Logger(self.verbose, next_run_dir(self.tensorboard_log, tb_log_name, reset_num_timesteps))
        else:
            self.logger.verbose = self.verbose
        callback, keras_callbacks = split_callbacks(callback)
        backup_of(keras_callbacks, tf_native=False)  # one-line refusals: BackupAndRestore, ModelCheckpoint
        callback = None if callback is None else make_callback(callback)  # None: no SB3 locals built per step
        if callback is not None:
            callback.init_callback(self)
        return callback, keras_callbacks

    def _learn(self, callbacks: tuple[Any, list], log_interval: int, progress_bar: bool) -> None:
        """The training loop up to `_total_timesteps`, with SB3's hooks (`run_loop`)."""
        callback, keras_callbacks = callbacks
        assert self.config is not None and self._runner is not None  # built with the runner
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

    def _apply_schedules(self, progress_remaining: float) -> None:
        """SB3's schedules, evaluated before every rollout (the loop's `schedule` hook)."""
        if self._lr_schedule is not None:
            self._current_lr = float(self._lr_schedule(progress_remaining))
        now = self._schedules

        def at(schedule: Schedule | None, current: Any) -> Any:
            return current if schedule is None else float(schedule(progress_remaining))

        self._schedules = host_schedules(
            self._current_lr,
            at(self._clip_schedule, self._clip_start),
            at(self._ent_schedule, now.ent_coef),
            at(self._clip_vf_schedule, self._clip_vf_start),
        )

    def _update_info_buffer(self, record: StepRecord) -> None:
        """SB3's `_update_info_buffer`: the Monitor statistics of every episode that ended at this step."""
        for info in _ended_episode_infos(record):
            self.ep_info_buffer.append(info["episode"])
            if info.get("is_success") is not None:
                self.ep_success_buffer.append(info["is_success"])

    def _log(self, diag: Diagnostics, iteration: int, progress: Progress, start: tuple[float, int]) -> None:
        """One SB3 logger dump (`sb3_row`) of the `iteration`-th iteration of this `learn` call."""
        assert self.config is not None  # called by `learn`
        counts = (iteration, self._n_updates, self.num_timesteps)
        for key, value in sb3_row(diag, progress, self.config.rollout_size, start, counts, self.ep_info_buffer).items():
            self.logger.record(key, value)
        self.logger.dump(self.num_timesteps)

    @property
    def rollout_buffer(self) -> RolloutBufferView | None:
        """The last rollout with SB3's buffer fields (a copy), or None before the first one."""
        last = getattr(self._runner, "last_rollout", None)
        if last is None:
            return None
        return rollout_view(last, self.gamma, self.gae_lambda)
