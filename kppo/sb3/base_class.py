"""What Stable-Baselines3's `BaseAlgorithm` / `OnPolicyAlgorithm` offer beside training, without torch: the model's
parameters as numpy (`get_parameters` / `set_parameters`), the last rollout with SB3's field names and shapes
(`rollout_buffer`), `lr_schedule`, the success buffer, `get_vec_normalize_env`, `set_random_seed`, the logger.
`kppo.PPO` derives from `BaseAlgorithm`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, NamedTuple

import numpy as np

from kppo.agent.agent import Agent, load_agent
from kppo.agent.archive import agent_dir
from kppo.core.errors import sorted_keys
from kppo.core.types import Rollout
from kppo.vec_envs.vec_env import VecEnv, VecEnvWrapper
from kppo.sb3.lightning import RolloutBufferSamples
from kppo.sb3.utils import set_random_seed

#: SB3's `get_parameters` keys: the networks, and their optimizer.
PARAMETER_GROUPS = ("policy", "policy.optimizer")


class RolloutBufferView(NamedTuple):
    """SB3's `RolloutBuffer` fields of the last rollout, as numpy arrays [n_steps, n_envs, ...] (read-only: kppo's
    rollout lives in tensors; this is a copy). Observations are what the policy saw (normalized when
    `normalize_obs`), rewards as the update used them (scaled when `normalize_reward`), as in SB3's buffer."""

    observations: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    returns: np.ndarray
    episode_starts: np.ndarray
    values: np.ndarray
    log_probs: np.ndarray
    advantages: np.ndarray
    buffer_size: int
    n_envs: int
    gamma: float
    gae_lambda: float
    full: bool = True
    pos: int = 0

    def get(self, batch_size: int | None = None) -> Iterator[RolloutBufferSamples]:
        """SB3's `RolloutBuffer.get`: the rollout flattened env-major (row env * n_steps + step, SB3's
        `swap_and_flatten`), in the order of one `np.random.permutation`, in minibatches of `batch_size` (None:
        one of all rows)."""
        rows = self.buffer_size * self.n_envs
        size = rows if batch_size is None else int(batch_size)
        order = np.random.permutation(rows)

        def flat(x: np.ndarray) -> np.ndarray:
            return np.swapaxes(x, 0, 1).reshape(rows, *x.shape[2:])

        fields = (self.observations, self.actions, self.values, self.log_probs, self.advantages, self.returns)
        flats = [flat(x) for x in fields]
        for start in range(0, rows, size):
            index = order[start : start + size]
            yield RolloutBufferSamples(*(x[index] for x in flats))


def rollout_view(rollout: Rollout, gamma: float, gae_lambda: float) -> RolloutBufferView:
    """`rollout` with SB3's buffer names; a Discrete action becomes [n_steps, n_envs, 1] as in SB3."""
    traj = rollout.trajectory

    def array(x: Any) -> np.ndarray:
        return np.asarray(x.numpy() if hasattr(x, "numpy") else x)

    actions = array(traj.action)
    if actions.ndim == 2:
        actions = actions[..., None]
    steps, envs = actions.shape[:2]
    return RolloutBufferView(
        observations=array(traj.obs),
        actions=actions,
        rewards=array(traj.reward),
        returns=array(rollout.returns),
        episode_starts=array(traj.episode_start).astype(np.float32),
        values=array(traj.value),
        log_probs=array(traj.log_prob),
        advantages=array(rollout.advantages),
        buffer_size=int(steps),
        n_envs=int(envs),
        gamma=float(gamma),
        gae_lambda=float(gae_lambda),
        pos=int(steps),
    )


def _by_path(variables: list, drop_first: bool = False) -> dict[str, Any]:
    """{Keras variable path: variable}; `drop_first` leaves out the first component (an optimizer's own name, which
    Keras numbers per instance: "torch_adam_3/...")."""
    return {(v.path.split("/", 1)[-1] if drop_first else v.path): v for v in variables}


def parameters(agent: Agent) -> dict[str, dict[str, Any]]:
    """SB3's two groups of `agent`'s variables, each {variable path: variable}."""
    return {"policy": _by_path(agent.variables), "policy.optimizer": _by_path(agent.optimizer.variables, True)}


def assign_parameters(agent: Agent, params: dict[str, dict[str, Any]], exact_match: bool) -> None:
    """Assigns `params` (`get_parameters`' layout) to `agent`'s variables; one-line ValueErrors for unknown groups
    or names, missing ones (with `exact_match`) and shapes that differ. Nothing is assigned when one fails."""
    targets = parameters(agent)
    unknown = sorted_keys(set(params) - set(targets))
    if unknown:
        raise ValueError(f"params: expected groups among {list(PARAMETER_GROUPS)}, got {unknown}")
    updates = []
    for group, values in params.items():
        if not isinstance(values, dict):
            raise ValueError(
                f"params[{group!r}]: expected a dict of parameter name -> array, got {type(values).__name__}"
            )
        expected, given = set(targets[group]), set(values)
        if given - expected or (exact_match and expected - given):
            raise ValueError(
                f"params[{group!r}]: names of parameters do not match the model's: missing "
                f"{sorted_keys(expected - given)}, unexpected {sorted_keys(given - expected)}"
            )
        for name, value in values.items():
            value = np.asarray(value)
            if tuple(value.shape) != tuple(targets[group][name].shape):
                raise ValueError(
                    f"params[{group!r}][{name!r}]: expected shape {tuple(targets[group][name].shape)}, "
                    f"got {tuple(value.shape)}"
                )
            updates.append((targets[group][name], value))
    if exact_match and set(params) != set(PARAMETER_GROUPS):
        raise ValueError(f"params: expected the groups {list(PARAMETER_GROUPS)}, got {sorted_keys(params)}")
    for variable, value in updates:
        variable.assign(value.astype(variable.dtype))


class BaseAlgorithm:
    """SB3's model surface that needs no torch. Subclasses set `agent`, `_runner`, `_sb3_env`, `config`, `seed`,
    `logger`, `learning_rate`, `_lr_schedule`, `stats_window_size` and `_policy` (the cached `Policy`)."""

    agent: Agent | None
    _runner: Any
    _sb3_env: VecEnv | None
    _policy: Any
    seed: int
    logger: Any
    learning_rate: float
    _lr_schedule: Callable[[float], float] | None
    _ppo_args: dict[str, Any]

    def _require_agent(self, what: str) -> Agent:
        if self.agent is None:
            raise ValueError(f"{what}: the model has no networks yet; construct it with an env or load() it")
        return self.agent

    # --- SB3's BaseAlgorithm ---
    @property
    def env(self) -> VecEnv | None:
        """SB3's `model.env` (and lit_sb3's): the training env as a VecEnv, or None (`get_env()`)."""
        return self._sb3_env

    def get_env(self) -> VecEnv | None:
        """The training env with SB3's VecEnv interface (`reset() -> obs`, `step -> (obs, rewards, dones,
        infos)`): the VecEnv the model was given, or one over the gymnasium vector env it trains on."""
        return self._sb3_env

    def get_vec_normalize_env(self) -> Any:
        """The `VecNormalize` in the training env's wrappers, or None."""
        from kppo.sb3.vec_normalize import VecNormalize  # the facade's own wrapper: same layer

        env = self._sb3_env
        while isinstance(env, VecEnvWrapper):
            if isinstance(env, VecNormalize):
                return env
            env = env.venv
        return None

    def get_parameters(self) -> dict[str, dict[str, np.ndarray]]:
        """SB3's `get_parameters` as numpy: {"policy": {name: array}, "policy.optimizer": {name: array}}; names are
        the Keras variable paths ("actor/...", "critic/...")."""
        groups = parameters(self._require_agent("get_parameters"))
        return {group: {name: v.numpy() for name, v in variables.items()} for group, variables in groups.items()}

    def set_parameters(
        self, load_path_or_dict: str | Path | IO[bytes] | dict, exact_match: bool = True, device: str = "auto"
    ) -> None:
        """Sets the networks' (and optimizer's) variables from `get_parameters`' dict or from a saved model (a
        path or file that `load` reads); `exact_match=False` allows a subset. `device` is accepted for SB3's
        signature (TensorFlow places the variables)."""
        del device
        agent = self._require_agent("set_parameters")
        if isinstance(load_path_or_dict, dict):
            params = load_path_or_dict
        else:
            saved = load_agent(agent_dir(load_path_or_dict))
            groups = parameters(saved.agent)
            params = {group: {name: v.numpy() for name, v in variables.items()} for group, variables in groups.items()}
        assign_parameters(agent, params, exact_match)
        self._policy = None  # the next predict acts with the new weights

    def set_random_seed(self, seed: int | None = None) -> None:
        """SB3's `set_random_seed`: the model's seed (its sampling keys), Python's, numpy's and TensorFlow's global
        generators (`kppo.set_random_seed`), and the env's next reset and action space."""
        if seed is None:
            return
        self.seed = int(seed)
        set_random_seed(self.seed)
        if self._sb3_env is not None:
            self._sb3_env.action_space.seed(self.seed)
            self._sb3_env.seed(self.seed)

    def set_logger(self, logger: Any) -> None:
        """Uses `logger` (anything with SB3's `record(key, value)` and `dump(step)`) from now on."""
        self.logger = logger

    def get_logger(self) -> Any:
        return self.logger

    @property
    def lr_schedule(self) -> Callable[[float], float]:
        """SB3's `lr_schedule`: progress_remaining (1 -> 0) -> learning rate."""
        schedule, constant = self._lr_schedule, float(self.learning_rate)
        if schedule is None:
            return lambda progress_remaining: constant
        return lambda progress_remaining: float(schedule(progress_remaining))  # SB3 casts a schedule's value

    @property
    def rollout_buffer(self) -> RolloutBufferView | None:
        """The last rollout with SB3's buffer fields (a copy), or None before the first one."""
        last = getattr(self._runner, "last_rollout", None)
        if last is None:
            return None
        return rollout_view(last, self._ppo_args["gamma"], self._ppo_args["gae_lambda"])
