"""Populations: many agents (seeds and swept hyperparameters) trained by one compiled program on TF-native envs.

A member computes what a single run computes (its heads' gradients to float32 rounding: `narrow_matmul`): the same
`start_iteration`, env steps, finish (GAE), update loop of minibatches and `diagnostics`, its own initial weights
(built from its seed as a single run builds them), keys, normalization statistics, Adam state, target-KL decisions
and hyperparameters (`kppo.config.options.SWEEPABLE`). Only the weights are held differently: as tensors with a
leading member axis (variables [M, ...]), read by the networks through Keras' StatelessScope, and updated by the
functional Adam (`kppo.update.ppo.functional_step`).

The iteration's parts run for every member at once (`kppo.training.runners.member_loops`).
"""

from __future__ import annotations

from typing import Any, NamedTuple
from collections.abc import Callable

from kppo import envs as envs_lib
from kppo._tf import tf
from kppo.core import counter_rng
from kppo.agent.agent import Agent, build_agent
from kppo.config.options import SWEEPABLE, Config
from kppo.config.population import check_members
from kppo.training.runners.programs import PROGRAMS, keep, program_key
from kppo.envs.base import VecEnv
from kppo.core.optimizers import AdamState, assign_adam_state, initial_adam_state
from kppo.rollout.native import finish_steps
from kppo.training.runners.base import Iterations, Runner
from kppo.training.runners.member_loops import member_evaluation, member_steps, population_iteration
from kppo.training.runners.settings import RunSpec, resolve
from kppo.training.runners.native import NativeParts, build_native
from kppo.core.types import EvalResult, RunnerState
from kppo.update.driver import drive
from kppo.update.diagnostics import zero_diagnostics
from kppo.update.schedules import config_schedules
from kppo.training.runners.settings import agent_spec


class MemberValues(NamedTuple):
    """The swept hyperparameters, float32 [M] each (a member's own value inside the vectorized program), held in
    variables: population-based training assigns new values between compiled calls without a retrace."""

    learning_rate: Any
    ent_coef: Any
    clip_range: Any
    gamma: Any
    gae_lambda: Any
    vf_coef: Any
    max_grad_norm: Any


assert MemberValues._fields == SWEEPABLE  # one list of sweepable fields


def member_values(specs: list[RunSpec]) -> MemberValues:
    """Every member's swept values (`RunSpec.sweep_values`) as variables."""
    return MemberValues(
        *[
            tf.Variable(tf.constant([s.sweep_values[i] for s in specs], tf.float32), trainable=False, name=name)
            for i, name in enumerate(SWEEPABLE)
        ]
    )


class MemberWeights(tf.Module):
    """Every member's weights and Adam state, stacked on a leading member axis, as variables."""

    def __init__(self, agents: list[Agent]):
        super().__init__(name="population")

        def stack(tensors):
            return tf.Variable(tf.stack([tf.convert_to_tensor(t) for t in tensors]), trainable=False)

        self.params = [stack([a.variables[i] for a in agents]) for i in range(len(agents[0].variables))]
        adam = initial_adam_state(agents[0].variables)
        count = len(agents)
        self.m = [tf.Variable(tf.stack([x] * count), trainable=False) for x in adam.m]
        self.v = [tf.Variable(tf.stack([x] * count), trainable=False) for x in adam.v]
        self.steps = tf.Variable(tf.zeros([count]), trainable=False)

    def arguments(self) -> tuple:
        """The variables as a compiled program's argument: (params, Adam m, Adam v, Adam steps)."""
        return self.params, self.m, self.v, self.steps

    def read(self) -> tuple[list, AdamState]:
        return read_weights(self.arguments())

    def assign(self, params: list, adam: AdamState) -> None:
        assign_weights(self.arguments(), params, adam)

    def member(self, index: int) -> tuple[list, AdamState]:
        params, adam = self.read()
        return [p[index] for p in params], tf.nest.map_structure(lambda x: x[index], adam)


def read_weights(weights: tuple) -> tuple[list, AdamState]:
    """The values of `MemberWeights.arguments()`: (params, AdamState)."""
    params, m, v, steps = weights
    tensors = lambda xs: [tf.convert_to_tensor(x) for x in xs]  # noqa: E731
    return tensors(params), AdamState(tensors(m), tensors(v), tf.convert_to_tensor(steps))


def assign_weights(weights: tuple, params: list, adam: AdamState) -> None:
    """Assigns params and AdamState into `MemberWeights.arguments()`."""
    variables, m, v, steps = weights
    for variable, value in zip([*variables, *m, *v, steps], [*params, *adam.m, *adam.v, adam.steps]):
        variable.assign(value)


class Population(NamedTuple):
    """What a population runner builds before its first compiled call."""

    configs: list[Config]
    spec: RunSpec  # the first member's: every member's but for its seed and its values
    template: NativeParts  # the first member's envs and agent: the networks every member's weights run through
    weights: MemberWeights
    state: RunnerState  # every leaf [M, ...]
    key_eval: tf.Tensor  # int32 [M, 2]
    values: MemberValues

    def new_agent(self, config: Config) -> Agent:
        """A fresh single agent for `config` (its networks, before a member's weights are copied in)."""
        return build_agent(
            agent_spec(config), self.template.train_env.observation_space, self.template.train_env.action_space
        )


def _is_builtin(name: str) -> bool:
    try:
        envs_lib.resolve_name(name)
        return True
    except ValueError:
        return False


def build_population(env: str | VecEnv, configs: list[Config]) -> Population:
    check_members(configs)
    specs = [resolve(config) for config in configs]
    first = specs[0]
    if first.atari_wrapper or first.frame_stack != 1:  # options of gymnasium env ids (runners.preprocessed)
        field = "atari_wrapper" if first.atari_wrapper else "frame_stack"
        raise ValueError(f"{field}: expected a gymnasium env id to wrap, got the TF-native env {env!r}")
    if not isinstance(env, VecEnv) and not (
        isinstance(env, str) and first.env_backend != "gymnasium" and _is_builtin(env)
    ):
        raise ValueError(
            f"env: a population needs a TF-native env (a kppo.envs VecEnv, or one of "
            f"{sorted(envs_lib.TASKS)}), got {env!r}"
        )
    members = [build_native(env, spec) for spec in specs]
    state = tf.nest.map_structure(lambda *xs: tf.stack(xs), *[m.state for m in members])
    return Population(
        configs,
        first,
        members[0],
        MemberWeights([m.agent for m in members]),
        state,
        tf.stack([m.key_eval for m in members]),
        member_values(specs),
    )


def make_member_iterations(population: Population) -> Callable:
    """Compiled `(weights, values, runner_state [M], n) -> (runner_state, Diagnostics [M] summed over n iterations)`,
    updating `weights` (`MemberWeights.arguments()`); `values` is the population's `MemberValues`. The variables are
    arguments, so every population of these shapes runs the one trace (`make_native_population`'s shards)."""
    spec, agent, env = population.spec, population.template.agent, population.template.train_env

    def collect(settings, rollout_state, key, inputs):
        del rollout_state, key  # the steps ran before, every member's at once (`member_steps`)
        state, traj, final_obs = inputs
        return state, finish_steps(agent, settings, state, traj, final_obs)

    member_iteration = population_iteration(spec, agent, collect)

    def run(weights, values, state, n):
        def iteration(carry):
            params, adam, state = carry
            steps = member_steps(env, agent, spec, params, state, values)
            return member_iteration(params, adam, state, steps, values)

        count = len(population.configs)
        zeros = tf.nest.map_structure(lambda x: tf.fill([count], x), zero_diagnostics())
        done = drive(iteration, (*read_weights(weights), state), n, zeros)
        params, adam, state = done.state
        assign_weights(weights, params, adam)
        return state, done.diagnostics

    return tf.function(run, jit_compile=spec.jit_population, autograph=False)


def make_member_evaluation(population: Population) -> Callable:
    """Compiled `(weights, obs_stats [M], keys [M, 2]) -> EvalResult [M, num_eval_envs]`: one deterministic round per
    member (`member_loops.member_evaluation`), on the weights' parameters."""
    spec, agent, env = population.spec, population.template.agent, population.template.eval_env

    def run(weights, stats, keys):
        params, _ = read_weights(weights)
        return member_evaluation(env, agent, spec, params, stats, keys)

    return tf.function(run, jit_compile=spec.jit_population_eval, autograph=False)


def member_agent(population: Any, index: int) -> Agent:
    """Member `index` of a population (TF-native or gymnasium: anything with `configs`, `weights` and `new_agent`) as
    a single agent (its own networks and Adam, weights copied): policy, export, checkpoint."""
    agent = population.new_agent(population.configs[index])
    params, adam = population.weights.member(index)
    for variable, value in zip(agent.variables, params):
        variable.assign(value)
    assign_adam_state(agent.optimizer, agent.variables, adam)
    return agent


def member_state(state: RunnerState, index: int) -> RunnerState:
    return tf.nest.map_structure(lambda x: x[index], state)


class PopulationRunner(Runner):
    """Every member's iterations in one compiled call; diagnostics, evaluations and learning rates have a member
    axis; `view` is the state with the members' common iteration count."""

    def __init__(self, population: Population, functions: tuple | None = None):
        template = population.template
        super().__init__(
            template.agent,
            population.state,
            template.train_env.observation_space,
            template.train_env.action_space,
            template.train_env,
        )
        self.population, self.spec = population, population.spec
        self.schedule_fn, self.schedules_from_config = (
            config_schedules(population.spec.schedule, population.values),
            False,
        )
        if functions is None:  # (iterations, evaluation) of a population of these shapes
            functions = make_member_iterations(population), make_member_evaluation(population)
        self.iterations_fn, self.evaluation_fn = functions

    @property
    def functions(self) -> tuple:
        """(iterations, evaluation): the compiled functions a population of the same shapes can share."""
        return self.iterations_fn, self.evaluation_fn

    def run_iterations(self, state, n, on_step=None) -> Iterations:
        del on_step  # compiled: the loop calls the step callbacks once per call
        population = self.population
        state, diag = self.iterations_fn(population.weights.arguments(), population.values, state, tf.constant(n))
        return Iterations(state, diag, n)

    def _eval_keys(self, round_index: int) -> tf.Tensor:
        return tf.stack([counter_rng.fold_in(k, round_index) for k in self.population.key_eval])

    def evaluation_episodes(self, obs_stats, round_index) -> tuple[EvalResult, None]:
        return self.evaluation_fn(self.population.weights.arguments(), obs_stats, self._eval_keys(round_index)), None

    def warmup(self) -> None:
        population = self.population
        self.evaluation_fn(population.weights.arguments(), population.state.rollout.obs_stats, self._eval_keys(0))

    def trace(self) -> None:
        population = self.population
        arguments = population.weights.arguments()
        self.iterations_fn.get_concrete_function(arguments, population.values, self.state, tf.constant(1))
        self.evaluation_fn.get_concrete_function(arguments, population.state.rollout.obs_stats, self._eval_keys(0))

    def view(self, state) -> RunnerState:
        return state._replace(iteration=state.iteration[0])

    def member_state(self, state: RunnerState, index: int) -> RunnerState:
        """Member `index`'s runner state."""
        return member_state(state, index)


def make_native_population(
    env: str | VecEnv, configs: list[Config], programs: dict | None = None
) -> tuple[Runner, Population]:
    """The Runner for the training loop (its diagnostics and evaluations have a member axis) and the population.

    A population whose members differ from an earlier one's of the process only in seeds and sweepable values runs
    the compiled functions `PROGRAMS` kept for its shapes, on its own variables. `programs` (a dict the caller keeps
    between calls) holds whole runners by shape instead: a later population is assigned into a kept runner's
    variables (`reuse`)."""
    population = build_population(env, configs)
    key = program_key(env, configs)
    if key is None:
        return PopulationRunner(population), population
    runner = None if programs is None else programs.get(key)
    if runner is not None:
        return reuse(runner, population), runner.population
    runner = PROGRAMS.shared(key, lambda functions: PopulationRunner(population, functions))
    if programs is not None:
        keep(programs, key, runner)
    return runner, population


def reuse(runner: PopulationRunner, new: Population) -> PopulationRunner:
    """`runner` (compiled for members of `new`'s shapes) set to start `new`'s members: their weights, fresh Adam
    state and values assigned into its variables, their runner state and evaluation keys in place of its own. Its
    compiled calls read only those variables and the state passed in, so nothing retraces and the run is the one a
    fresh runner of `new` would make."""
    mine = runner.population
    for variable, value in zip(_variables(mine.weights), _variables(new.weights)):
        variable.assign(value)
    for variable, value in zip(mine.values, new.values):
        variable.assign(value)
    runner.population = mine._replace(configs=new.configs, spec=new.spec, state=new.state, key_eval=new.key_eval)
    runner.state, runner.spec = new.state, new.spec
    return runner


def _variables(weights: MemberWeights) -> list:
    return [*weights.params, *weights.m, *weights.v, weights.steps]
