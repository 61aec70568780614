"""Runners: everything the training loop needs for one kind of environment, behind one interface (`Runner`).

    native      TF-native envs (`kppo.envs`) on one device: rollout + GAE + update compiled into one call
    replicated  TF-native envs under a tf.distribute strategy (mirrored, multi_worker, tpu)
    host        gymnasium envs stepped on the host, compiled update on one device or sharded over replicas

`make_runner` picks one (`runner_kind`); each module imports only `base` and the modules before it in this list.
"""

from __future__ import annotations

import functools
from typing import Any

import gymnasium as gym

from kppo import envs as envs_lib
from kppo.config.options import Config
from kppo.core.distribute import make_strategy
from kppo.envs.base import VecEnv
from kppo.vec_envs.preprocessed import make_preprocessed_env
from kppo.training.runners.base import EvalMetricsFn, Iterations, Runner, StepHook
from kppo.training.runners.host import HostRunner, Start
from kppo.training.runners.host_population import HostPopulationRunner
from kppo.training.runners.native import make_native_runner
from kppo.training.runners.population import make_native_population
from kppo.training.runners.replicated import make_replicated_runner
from kppo.training.runners.settings import RunSpec, resolve
from kppo.update.schedules import ScheduleFn

__all__ = [
    "EvalMetricsFn",
    "Iterations",
    "Runner",
    "Start",
    "StepHook",
    "make_population_runner",
    "make_runner",
    "runner_kind",
]


def runner_kind(env: Any, spec: RunSpec) -> str:
    """ "native" for `kppo.envs.VecEnv`s and built-in names (unless env_backend="gymnasium"), "host" for other ids,
    `gym.Env` instances, factories, gymnasium vector envs and SB3-style VecEnvs; "native" becomes "replicated" under
    a strategy."""
    from kppo.gym_envs.vector import GymVecEnv, vector_env_of

    native = isinstance(env, VecEnv)
    if isinstance(env, str) and spec.env_backend != "gymnasium":
        try:
            envs_lib.resolve_name(env)
            native = True
        except ValueError:
            if spec.env_backend == "native":
                raise  # the error naming the built-in tasks
    if native:
        return "native" if spec.distribute == "none" else "replicated"
    gymnasium = isinstance(env, (str, gym.Env, gym.vector.VectorEnv, GymVecEnv)) or vector_env_of(env) is not None
    if gymnasium or callable(env):
        return "host"
    raise ValueError(
        "env: expected a TF-native env (name or kppo.envs.VecEnv) or a gymnasium env (id, Env, factory, "
        f"VectorEnv or an SB3-style kppo.VecEnv), got {type(env).__name__}"
    )


def preprocessed(env: Any, spec: RunSpec, kind: str) -> Any:
    """`env`, or for `atari_wrapper` / `frame_stack` a gymnasium env id as a factory of wrapped envs
    (`kppo.vec_envs.preprocessed.make_preprocessed_env`; the host runner makes its evaluation envs from it too). Those
    options wrap envs made from an id only: a one-line error for a TF-native env or an env object."""
    if not spec.atari_wrapper and spec.frame_stack == 1:
        return env
    field = "atari_wrapper" if spec.atari_wrapper else "frame_stack"
    if kind != "host" or not isinstance(env, str):
        got = f"the TF-native env {env!r}" if kind != "host" else type(env).__name__
        raise ValueError(
            f"{field}: expected a gymnasium env id to wrap, got {got} (wrap env objects yourself: kppo.AtariWrapper, "
            f"kppo.VecFrameStack)"
        )
    return functools.partial(make_preprocessed_env, env, spec.atari_wrapper, spec.frame_stack)


def make_runner(
    env: Any,
    config: Config,
    eval_metrics_fn: EvalMetricsFn | None = None,
    start: Start | None = None,
    schedule: ScheduleFn | None = None,
) -> Runner:
    """The runner for `env` (default: the Config's `env`); `start` and `schedule` apply to the host runner only."""
    spec = resolve(config)
    env = spec.env if env is None else env
    kind = runner_kind(env, spec)
    if kind == "host":
        return HostRunner(preprocessed(env, spec, kind), spec, eval_metrics_fn, start, schedule)
    preprocessed(env, spec, kind)  # a one-line error when the config asks to wrap a TF-native env
    if start is not None or schedule is not None:
        raise ValueError(f"env: starting from a trained agent or host schedules needs a gymnasium env, got {env!r}")
    if kind == "replicated":
        return make_replicated_runner(env, spec, make_strategy(spec.distribute, spec.devices), eval_metrics_fn)
    return make_native_runner(env, spec, eval_metrics_fn)


def make_population_runner(env: Any, configs: list[Config], programs: dict | None = None) -> tuple[Runner, Any]:
    """The runner of a population (seeds and sweep points; its diagnostics and evaluations have a member axis) and
    the population (`configs`, `weights`, `new_agent`): on TF-native envs every member's iterations in one compiled
    call (`population.PopulationRunner`); on gymnasium envs one vector env of every member's envs and one compiled
    update (`host_population.HostPopulationRunner`). `programs`: compiled TF-native population programs kept between
    calls for reuse by populations of the same shapes (`population.make_native_population`)."""
    first = resolve(configs[0])
    kind = runner_kind(env, first)
    if kind == "host":
        runner = HostPopulationRunner(preprocessed(env, first, kind), configs)
        return runner, runner.population
    if kind == "replicated":
        raise ValueError(f"distribute: a population runs on one device, expected 'none', got {first.distribute!r}")
    return make_native_population(env, configs, programs)
