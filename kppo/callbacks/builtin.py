"""The callbacks Stable-Baselines3 ships: `CheckpointCallback`, `EvalCallback`, `StopTrainingOnRewardThreshold`,
`StopTrainingOnMaxEpisodes`, `StopTrainingOnNoModelImprovement` (those on the timestep count are in
`kppo.callbacks.progress`)."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from kppo.callbacks.base import BaseCallback, EventCallback, optional_callback
from kppo.vec_envs.evaluation import EvalEnv, evaluate_policy, resolve_env


class CheckpointCallback(BaseCallback):
    """Saves the model every `save_freq` calls, to `save_path/{name_prefix}_{num_timesteps}_steps` (via `model.save`).

    Args:
        save_freq: save every this many `on_step` calls (>= 1).
        save_path: folder of the checkpoints (created at `init_callback`).
        name_prefix: start of the checkpoint names.
        save_replay_buffer: as SB3, saves the replay buffer only of a model that has one (`model.replay_buffer`
            not None, `model.save_replay_buffer(path)`); PPO has none, so nothing more is saved.
        save_vecnormalize: also save the model's `VecNormalize` (`model.get_vec_normalize_env()`, or the first
            wrapper of `model.get_env()` with `obs_rms` and `save`) to
            `save_path/{name_prefix}_vecnormalize_{num_timesteps}_steps.pkl`, SB3's name (kppo writes JSON into
            it, which `VecNormalize.load` reads); skipped, as in SB3, when the model has no VecNormalize. The
            model's checkpoint has the same statistics already: kppo keeps them in the model.
        verbose: 2 prints every checkpoint path.

    Raises:
        ValueError: (one line) when `save_freq` is not an int >= 1.
    """

    def __init__(
        self,
        save_freq: int,
        save_path: str,
        name_prefix: str = "rl_model",
        save_replay_buffer: bool = False,
        save_vecnormalize: bool = False,
        verbose: int = 0,
    ):
        super().__init__(verbose)
        if isinstance(save_freq, bool) or not isinstance(save_freq, (int, np.integer)) or save_freq < 1:
            raise ValueError(f"save_freq: expected an int >= 1, got {save_freq!r}")
        self.save_freq = int(save_freq)
        self.save_path = save_path
        self.name_prefix = name_prefix
        self.save_replay_buffer = save_replay_buffer
        self.save_vecnormalize = save_vecnormalize

    def _init_callback(self) -> None:
        os.makedirs(self.save_path, exist_ok=True)

    def _checkpoint_path(self, checkpoint_type: str = "", extension: str = "") -> str:
        """`save_path/{name_prefix}_{checkpoint_type}{num_timesteps}_steps[.extension]` (SB3's names)."""
        name = f"{self.name_prefix}_{checkpoint_type}{self.num_timesteps}_steps"
        return os.path.join(self.save_path, f"{name}.{extension}" if extension else name)

    def _on_step(self) -> bool:
        if self.n_calls % self.save_freq == 0:
            self._save("model checkpoint", self.model.save, self._checkpoint_path())
            if self.save_replay_buffer and getattr(self.model, "replay_buffer", None) is not None:
                path = self._checkpoint_path("replay_buffer_", "pkl")
                self._save("model replay buffer checkpoint", self.model.save_replay_buffer, path)
            vec_normalize = vec_normalize_env(self.model) if self.save_vecnormalize else None
            if vec_normalize is not None:
                self._save("model VecNormalize", vec_normalize.save, self._checkpoint_path("vecnormalize_", "pkl"))
        return True

    def _save(self, what: str, save: Any, path: str) -> None:
        save(path)
        if self.verbose >= 2:
            print(f"Saving {what} to {path}")


def vec_normalize_env(model: Any) -> Any:
    """The model's `VecNormalize`, or None: `model.get_vec_normalize_env()` when the model has it, else the first of
    `model.get_env()` and the envs it wraps (`venv`, `vector_env` or `env`) that has `obs_rms`, `norm_obs` and
    `save`."""
    getter = getattr(model, "get_vec_normalize_env", None)
    if callable(getter):
        return getter()
    env = model.get_env() if callable(getattr(model, "get_env", None)) else None
    for _ in range(32):  # wrapper chains are short; the bound guards against a wrapper that wraps itself
        if env is None:
            return None
        if all(hasattr(env, name) for name in ("obs_rms", "norm_obs")) and callable(getattr(env, "save", None)):
            return env
        env = next((getattr(env, n) for n in ("venv", "vector_env", "env") if getattr(env, n, None) is not None), None)
    return None


class EvalCallback(EventCallback):
    """Evaluates the model every `eval_freq` calls with `evaluate_policy`; keeps, logs and saves the results.

    After each evaluation: `last_mean_reward` is set; the timestep and the per-episode returns and lengths are
    appended to `evaluations_timesteps`, `evaluations_results` and `evaluations_length` (and written to
    `log_path/evaluations.npz` as arrays `timesteps`, `results`, `ep_lengths`, plus `successes` when every
    evaluation reported the same number of `info["is_success"]`); `eval/mean_reward` and `eval/mean_ep_length`
    (and `eval/success_rate`) are recorded on `model.logger` if the model has one. On a new best mean return,
    `best_mean_reward` is set, the model is saved to `best_model_save_path/best_model`, and `callback_on_new_best`
    runs; `callback_after_eval` runs after every evaluation. Training stops if either returns False.

    kppo's models normalize observations themselves and `predict` takes raw observations, so there are no
    normalization statistics to copy to `eval_env` (SB3's `sync_envs_normalization`).

    Args:
        eval_env: a gymnasium env id (made once, here), a `gym.Env` or a `gym.vector.VectorEnv`.
        callback_on_new_best: callback run on a new best mean return (its `parent` is this callback), e.g.
            `StopTrainingOnRewardThreshold`; a callable or list is converted by `make_callback`.
        callback_after_eval: callback run after every evaluation (its `parent` is this callback).
        n_eval_episodes: episodes per evaluation.
        eval_freq: evaluate every this many `on_step` calls (<= 0: never).
        log_path: folder for `evaluations.npz`, or None.
        best_model_save_path: folder for `best_model`, or None.
        deterministic: passed to `predict`.
        render: render the eval env during evaluation.
        verbose: 1 prints the results of every evaluation.
        warn: passed to `evaluate_policy` (warns when the eval env gives no episode statistics).
    """

    #: `evaluate_policy`'s `use_masking`: None evaluates as the model trains (with the eval env's action masks for a
    #: model trained with masks); `MaskableEvalCallback` sets it.
    use_masking: bool | None = None

    def __init__(
        self,
        eval_env: str | EvalEnv,
        callback_on_new_best: BaseCallback | None = None,
        callback_after_eval: BaseCallback | None = None,
        n_eval_episodes: int = 5,
        eval_freq: int = 10000,
        log_path: str | None = None,
        best_model_save_path: str | None = None,
        deterministic: bool = True,
        render: bool = False,
        verbose: int = 1,
        warn: bool = True,
    ):
        super().__init__(callback_after_eval, verbose=verbose)
        self.callback_on_new_best = optional_callback(callback_on_new_best)
        if self.callback_on_new_best is not None:
            self.callback_on_new_best.parent = self
        self.eval_env, owned = resolve_env(eval_env)
        self.n_eval_episodes = n_eval_episodes
        self.eval_freq = eval_freq
        self.best_mean_reward = -np.inf
        self.last_mean_reward = -np.inf
        self.deterministic = deterministic
        self.render = render
        self.warn = warn and not owned  # an env made here from an id has no reward-changing wrappers
        self.best_model_save_path = best_model_save_path
        self.log_path = os.path.join(log_path, "evaluations") if log_path is not None else None  # + ".npz"
        self.evaluations_timesteps: list[int] = []
        self.evaluations_results: list[list[float]] = []
        self.evaluations_length: list[list[int]] = []
        self.evaluations_successes: list[list[bool]] = []
        self._is_success_buffer: list[bool] = []

    def _init_callback(self) -> None:
        if self.best_model_save_path is not None:
            os.makedirs(self.best_model_save_path, exist_ok=True)
        if self.log_path is not None:
            os.makedirs(os.path.dirname(self.log_path) or ".", exist_ok=True)
        if self.callback_on_new_best is not None:
            self.callback_on_new_best.init_callback(self.model)

    def _on_training_start(self) -> None:
        super()._on_training_start()
        if self.callback_on_new_best is not None:
            self.callback_on_new_best.on_training_start(self.locals, self.globals)

    def _on_step(self) -> bool:
        if self.eval_freq <= 0 or self.n_calls % self.eval_freq != 0:
            return True
        return self._evaluate()

    def _evaluate(self) -> bool:
        """Runs one evaluation and everything that follows it; returns False to stop training."""
        self._is_success_buffer = []
        episode_rewards, episode_lengths = evaluate_policy(
            self.model,
            self.eval_env,
            n_eval_episodes=self.n_eval_episodes,
            deterministic=self.deterministic,
            render=self.render,
            callback=self._log_success_callback,
            return_episode_rewards=True,
            warn=self.warn,
            use_masking=self.use_masking,
        )
        self._store(episode_rewards, episode_lengths)
        mean_reward = self._report(episode_rewards, episode_lengths)
        continue_training = True
        if mean_reward > self.best_mean_reward:
            continue_training = self._on_new_best(mean_reward)
        after_eval = self._on_event()
        return continue_training and after_eval

    def _log_success_callback(self, locals_: dict[str, Any], globals_: dict[str, Any]) -> None:
        """`evaluate_policy` callback: collects `info["is_success"]` at episode ends."""
        info = locals_["info"]
        if locals_["done"] and isinstance(info, dict) and info.get("is_success") is not None:
            self._is_success_buffer.append(bool(info["is_success"]))

    def _store(self, episode_rewards: list[float], episode_lengths: list[int]) -> None:
        """Appends this evaluation to the history and rewrites `evaluations.npz` (plain arrays, no pickles)."""
        self.evaluations_timesteps.append(self.num_timesteps)
        self.evaluations_results.append(list(episode_rewards))
        self.evaluations_length.append(list(episode_lengths))
        if self._is_success_buffer:
            self.evaluations_successes.append(list(self._is_success_buffer))
        if self.log_path is None:
            return
        arrays: dict[str, Any] = {
            "timesteps": np.asarray(self.evaluations_timesteps, dtype=np.int64),
            "results": np.asarray(self.evaluations_results, dtype=np.float64),
            "ep_lengths": np.asarray(self.evaluations_length, dtype=np.int64),
        }
        if self.evaluations_successes and len({len(s) for s in self.evaluations_successes}) == 1:
            arrays["successes"] = np.asarray(self.evaluations_successes, dtype=np.bool_)
        np.savez(self.log_path, **arrays)

    def _report(self, episode_rewards: list[float], episode_lengths: list[int]) -> float:
        """Sets `last_mean_reward`, prints and records the results; returns the mean return."""
        mean_reward, std_reward = float(np.mean(episode_rewards)), float(np.std(episode_rewards))
        mean_length, std_length = float(np.mean(episode_lengths)), float(np.std(episode_lengths))
        self.last_mean_reward = mean_reward
        if self.verbose >= 1:
            print(f"Eval num_timesteps={self.num_timesteps}, episode_reward={mean_reward:.2f} +/- {std_reward:.2f}")
            print(f"Episode length: {mean_length:.2f} +/- {std_length:.2f}")
        self._record("eval/mean_reward", mean_reward)
        self._record("eval/mean_ep_length", mean_length)
        if self._is_success_buffer:
            success_rate = float(np.mean(self._is_success_buffer))
            if self.verbose >= 1:
                print(f"Success rate: {100 * success_rate:.2f}%")
            self._record("eval/success_rate", success_rate)
        return mean_reward

    def _record(self, key: str, value: float) -> None:
        if self.logger is not None:
            self.logger.record(key, value)

    def _on_new_best(self, mean_reward: float) -> bool:
        if self.verbose >= 1:
            print("New best mean reward!")
        if self.best_model_save_path is not None:
            self.model.save(os.path.join(self.best_model_save_path, "best_model"))
        self.best_mean_reward = mean_reward
        return self.callback_on_new_best.on_step() if self.callback_on_new_best is not None else True

    def update_child_locals(self, locals_: dict[str, Any]) -> None:
        super().update_child_locals(locals_)
        if self.callback_on_new_best is not None:
            self.callback_on_new_best.update_locals(locals_)


class MaskableEvalCallback(EvalCallback):
    """sb3-contrib's `MaskableEvalCallback`: an `EvalCallback` whose evaluations pass the eval env's action masks to
    `predict` (`use_masking=True`, sb3-contrib's default) or play without them (`use_masking=False`). The other
    arguments are `EvalCallback`'s."""

    def __init__(self, *args: Any, use_masking: bool = True, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.use_masking = use_masking


class StopTrainingOnRewardThreshold(BaseCallback):
    """Stops training once the parent `EvalCallback`'s best mean return reaches `reward_threshold`.

    Use it as an `EvalCallback`'s `callback_on_new_best` (or `callback_after_eval`).

    Args:
        reward_threshold: stop once `parent.best_mean_reward >= reward_threshold`.
        verbose: 1 prints why training stops.

    Raises:
        RuntimeError: (one line, at `init_callback` or `on_step`) when it has no parent `EvalCallback`.
    """

    def __init__(self, reward_threshold: float, verbose: int = 0):
        super().__init__(verbose=verbose)
        self.reward_threshold = reward_threshold

    def _init_callback(self) -> None:
        self._best_mean_reward()

    def _on_step(self) -> bool:
        best = self._best_mean_reward()
        continue_training = bool(best < self.reward_threshold)
        if self.verbose >= 1 and not continue_training:
            print(f"Stopping training because the mean reward {best:.2f} reached the threshold {self.reward_threshold}")
        return continue_training

    def _best_mean_reward(self) -> float:
        best = getattr(self.parent, "best_mean_reward", None)
        if best is None:
            raise RuntimeError(
                "StopTrainingOnRewardThreshold: must be used as callback_on_new_best of an EvalCallback (no parent)"
            )
        return best


class StopTrainingOnMaxEpisodes(BaseCallback):
    """Stops training once every sub-env has played `max_episodes` episodes on average (`max_episodes * num_envs`).

    It counts the training loop's `dones` (given through `update_locals`); `num_envs` comes from
    `model.get_env().num_envs` (1 when the env has no such attribute).

    Args:
        max_episodes: episodes per sub-env.
        verbose: 1 prints why training stops.

    Raises:
        RuntimeError: (one line, at `on_step`) when the training loop gave no `dones`.
    """

    def __init__(self, max_episodes: int, verbose: int = 0):
        super().__init__(verbose=verbose)
        self.max_episodes = max_episodes
        self._total_max_episodes = max_episodes
        self.n_episodes = 0

    def _init_callback(self) -> None:
        self._total_max_episodes = self.max_episodes * int(getattr(self.training_env, "num_envs", 1))

    def _on_step(self) -> bool:
        if "dones" not in self.locals:
            raise RuntimeError("StopTrainingOnMaxEpisodes: the training loop gave no `dones` (see update_locals)")
        self.n_episodes += int(np.sum(self.locals["dones"]))
        continue_training = self.n_episodes < self._total_max_episodes
        if self.verbose >= 1 and not continue_training:
            print(
                f"Stopping training with a total of {self.num_timesteps} steps because max_episodes="
                f"{self.max_episodes} was reached ({self.n_episodes} episodes played)"
            )
        return continue_training


class StopTrainingOnNoModelImprovement(BaseCallback):
    """Stops training when the parent `EvalCallback` has found no new best mean return for more than
    `max_no_improvement_evals` evaluations in a row, counting only after the first `min_evals` evaluations.

    Use it as an `EvalCallback`'s `callback_after_eval` (it runs once per evaluation):
    `EvalCallback(eval_env, callback_after_eval=StopTrainingOnNoModelImprovement(3, min_evals=5))`.

    Args:
        max_no_improvement_evals: evaluations in a row without a new best that are tolerated.
        min_evals: evaluations before any is counted.
        verbose: 1 prints why training stops.

    Raises:
        RuntimeError: (one line, at `on_step`) when it has no parent `EvalCallback`.
    """

    def __init__(self, max_no_improvement_evals: int, min_evals: int = 0, verbose: int = 0):
        super().__init__(verbose=verbose)
        self.max_no_improvement_evals = max_no_improvement_evals
        self.min_evals = min_evals
        self.last_best_mean_reward = -np.inf
        self.no_improvement_evals = 0

    def _on_step(self) -> bool:
        best = getattr(self.parent, "best_mean_reward", None)
        if best is None:
            raise RuntimeError(
                "StopTrainingOnNoModelImprovement: must be used as callback_after_eval of an EvalCallback (no parent)"
            )
        continue_training = True
        if self.n_calls > self.min_evals:  # n_calls: evaluations so far, this one included
            if best > self.last_best_mean_reward:
                self.no_improvement_evals = 0
            else:
                self.no_improvement_evals += 1
                continue_training = self.no_improvement_evals <= self.max_no_improvement_evals
        self.last_best_mean_reward = best
        if self.verbose >= 1 and not continue_training:
            print(
                f"Stopping training because there was no new best model in the last {self.no_improvement_evals} "
                "evaluations"
            )
        return continue_training
