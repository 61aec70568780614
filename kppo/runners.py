"""Runners: everything `kppo.train` needs for one kind of environment, behind one interface.

- TF-native environments (`kppo.envs`): rollout + GAE + update compiled into one call running K iterations.
- gymnasium environments (`kppo.envs.gymnasium`): host rollout with one compiled policy call per step, then the
  same compiled update.

`Runner.train_step(state, n)` runs n iterations and returns the summed `Diagnostics`; `Runner.eval_step` runs one
deterministic evaluation round. The training loop in `kppo.train` only sees this interface.
"""

from __future__ import annotations

import copy
from typing import Any, Callable, NamedTuple

import gymnasium as gym
import keras
import numpy as np

from kppo import envs as envs_lib
from kppo import normalization
from kppo._tf import tf
from kppo.config import Config
from kppo.distribute import make_strategy, replica_view
from kppo.distributions import make_distribution
from kppo.envs.base import VecEnv
from kppo.host_rollout import HostPolicy, HostRolloutState, StepPolicy, collect_host_rollout, evaluate_host, finish_rollout
from kppo.losses import explained_variance
from kppo.networks import make_networks
from kppo.rollout import Agent, RolloutSettings, collect_rollout, evaluate, initial_rollout_state, observe
from kppo.types import Diagnostics, EvalTransition, RunnerState, Transition
from kppo.update import Learner, UpdateSettings, UpdateStats, flatten, update

EvalMetricsFn = Callable[[tf.Tensor, Diagnostics, EvalTransition], dict]


class Runner(NamedTuple):
    learner: Learner
    state: RunnerState
    train_step: Callable[[RunnerState, int], tuple[RunnerState, Diagnostics]]
    eval_step: Callable[[Any, int, int, Diagnostics], tuple[Any, dict]]  # (obs_stats, round, total_steps, diag)
    observation_space: gym.spaces.Space
    action_space: gym.spaces.Space
    warmup: Callable[[], Any] | None  # compiles the evaluation early (run in a background thread), or None
    close: Callable[[], None]
    env: Any  # the training env: a kppo.envs.VecEnv or a kppo.envs.gymnasium.GymVecEnv
    view: Callable[[Any], RunnerState] = lambda state: state  # one replica's state (tf.distribute: the first)
    strategy: Any = None  # the tf.distribute strategy the state is distributed over (per-replica state), or None


# ---------------------------------------------------------------------------------------------------------------
# Shared pieces
# ---------------------------------------------------------------------------------------------------------------


def learning_rate(config: Config, iteration) -> tf.Tensor:
    """Linear: lr * (1 - iteration / num_iterations) (SB3's progress_remaining at the start of the rollout)."""
    if config.lr_schedule == "constant":
        return tf.constant(config.learning_rate, tf.float32)
    frac = 1.0 - tf.cast(iteration, tf.float32) / float(config.num_iterations)
    return config.learning_rate * frac


def rollout_settings(config: Config) -> RolloutSettings:
    return RolloutSettings(config.num_steps, config.gamma, config.gae_lambda, config.normalize_obs,
                           config.normalize_reward, config.sde_sample_freq)


def update_settings(config: Config, clip_range=None, clip_range_vf=None) -> UpdateSettings:
    """The update's settings; `clip_range`/`clip_range_vf` may override the config with tf.Variables (schedules)."""
    return UpdateSettings(
        config.num_epochs, config.num_minibatches, config.clip_range if clip_range is None else clip_range,
        config.clip_range_vf if clip_range_vf is None else clip_range_vf, config.vf_clip_mode,
        config.ent_coef, config.vf_coef, config.max_grad_norm, config.normalize_advantage, config.target_kl,
    )


def make_learner(config: Config, observation_dim: int, action_space: gym.spaces.Space) -> Learner:
    widths = config.actor_hidden_units or [config.num_hidden_units] * config.num_hidden_layers
    latent_dim = widths[-1] if widths else observation_dim
    dist = make_distribution(action_space, config.squash, config.use_sde, latent_dim, config.full_std)
    actor, critic = make_networks(config, observation_dim, dist, config.seed)
    optimizer = keras.optimizers.Adam(learning_rate=config.learning_rate, epsilon=1e-5)
    learner = Learner(dist, actor, critic, optimizer)
    optimizer.build(learner.variables)
    return learner


def root_keys(seed: int) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """(reset, train, eval) keys derived from the seed."""
    return tuple(tf.unstack(tf.random.experimental.stateless_split(tf.constant([seed, 0], tf.int32), 3)))


def _maybe_compile(fn: Callable, jit: bool) -> Callable:
    """XLA-compiled tf.function when `jit`, else the plain function (inlined into the caller's graph)."""
    return tf.function(fn, jit_compile=True, autograph=False) if jit else fn


def zero_diagnostics() -> Diagnostics:
    return Diagnostics(*[tf.constant(0.0)] * len(Diagnostics._fields))


def diagnostics(traj: Transition, returns: tf.Tensor, stats: UpdateStats, lr: tf.Tensor) -> Diagnostics:
    """Per-iteration scalars from the rollout and the update's sums."""
    count = tf.cast(tf.maximum(stats.minibatches, 1), tf.float32)
    ended = tf.cast(tf.logical_or(traj.terminated, traj.truncated), tf.float32)
    return Diagnostics(
        *[x / count for x in stats.loss],
        explained_variance=explained_variance(tf.reshape(traj.value, [-1]), tf.reshape(returns, [-1])),
        learning_rate=tf.cast(lr, tf.float32),
        grad_norm=stats.grad_norm / count,
        minibatch_steps=tf.cast(stats.steps, tf.float32),
        episode_return_sum=tf.reduce_sum(traj.episode_return),
        episode_length_sum=tf.cast(tf.reduce_sum(traj.episode_length), tf.float32),
        episodes=tf.reduce_sum(ended),
    )


# ---------------------------------------------------------------------------------------------------------------
# TF-native environments
# ---------------------------------------------------------------------------------------------------------------


def make_native_envs(env: str | VecEnv, config: Config) -> tuple[VecEnv, VecEnv]:
    """(training env, evaluation env). A name builds both (evaluation without fixed_init/offset_step); a VecEnv
    is used for both, wrapped with episode statistics if it lacks them."""
    if isinstance(env, str):
        train_env = envs_lib.make(env, fixed_init=config.fixed_init, offset_step=config.offset_step)
        return train_env, envs_lib.make(env)
    if not isinstance(env, envs_lib.EpisodeStatistics):
        env = envs_lib.EpisodeStatistics(env)
    return env, env


def _native_observation_dim(space: gym.spaces.Space) -> int:
    if not isinstance(space, gym.spaces.Box) or len(space.shape) != 1:
        raise ValueError(f"observation_space: expected a 1-D Box for a TF-native env, got {space}")
    return int(space.shape[0])


def iteration_step(rollout_fn, update_fn, learner: Learner, config: Config, state: RunnerState):
    """One training iteration: rollout + GAE, then the update. Returns (state, Diagnostics)."""
    key, key_rollout, key_update = tf.unstack(tf.random.experimental.stateless_split(state.key, 3))
    lr = learning_rate(config, state.iteration)
    learner.optimizer.learning_rate.assign(lr)
    rollout, traj, advantages, returns = rollout_fn(state.rollout, key_rollout)
    stats = update_fn(flatten(traj, advantages, returns), key_update)
    return RunnerState(rollout, key, state.iteration + 1), diagnostics(traj, returns, stats, lr)


def make_train_step(agent: Agent, learner: Learner, config: Config) -> Callable:
    """Compiled `(runner_state, n) -> (runner_state, summed Diagnostics)` running n iterations (n is a tensor, so
    a shorter last call does not retrace)."""
    settings, upd = rollout_settings(config), update_settings(config)
    rollout_fn = _maybe_compile(lambda s, k: collect_rollout(agent, settings, s, k), config.jit_rollout)
    update_fn = _maybe_compile(lambda b, k: update(learner, upd, b, k), config.jit_update)

    def train_step(state: RunnerState, num_iterations: tf.Tensor):
        def body(i, state, acc):
            state, diag = iteration_step(rollout_fn, update_fn, learner, config, state)
            return i + 1, state, tf.nest.map_structure(tf.add, acc, diag)

        start = (tf.constant(0), state, zero_diagnostics())  # a zero accumulator: one traced iteration, not two
        _, state, acc = tf.while_loop(lambda i, *_: i < num_iterations, body, start)
        return state, acc

    return tf.function(train_step, autograph=False)


def make_eval_step(agent: Agent, config: Config, eval_metrics_fn: EvalMetricsFn | None) -> Callable:
    """Compiled `(obs_stats, key, total_steps, diagnostics) -> (EvalResult, extra metrics)`."""
    run_eval = _maybe_compile(
        lambda stats, key: evaluate(agent, stats, key, config.num_eval_envs, config.normalize_obs), config.jit_eval
    )

    def eval_step(obs_stats, key, total_steps, diag):
        result, transitions = run_eval(obs_stats, key)
        extra = eval_metrics_fn(total_steps, diag, transitions) if eval_metrics_fn else {}
        return result, extra

    return tf.function(eval_step, autograph=False)


class Setup(NamedTuple):
    """What the TF-native runner builds before the first compiled call."""

    agent: Agent
    eval_agent: Agent
    learner: Learner
    state: RunnerState
    key_eval: tf.Tensor


def setup(env: str | VecEnv, config: Config) -> Setup:
    """Builds envs, distribution, networks, optimizer and the initial runner state from `config.seed`."""
    train_env, eval_env = make_native_envs(env, config)
    learner = make_learner(config, _native_observation_dim(train_env.observation_space), train_env.action_space)
    agent = Agent(train_env, learner.dist, learner.actor, learner.critic)
    key_reset, key_train, key_eval = root_keys(config.seed)
    state = RunnerState(
        initial_rollout_state(agent, key_reset, config.num_envs, config.normalize_obs),
        key_train,
        tf.constant(0, tf.int32),
    )
    return Setup(agent, Agent(eval_env, learner.dist, learner.actor, learner.critic), learner, state, key_eval)


def make_native_runner(env: str | VecEnv, config: Config, eval_metrics_fn: EvalMetricsFn | None) -> Runner:
    strategy = make_strategy(config.distribute, config.devices)
    if strategy is None:
        agent, eval_agent, learner, state, key_eval = setup(env, config)
        view = Runner._field_defaults["view"]
        compiled_train = make_train_step(agent, learner, config)
    else:
        from kppo.mirrored import make_distributed_train_step, setup_replicas

        agent, eval_agent, learner, state, key_eval = setup_replicas(env, config, strategy)
        view = replica_view(strategy)
        compiled_train = make_distributed_train_step(agent, learner, config, strategy, view)
    compiled_eval = make_eval_step(eval_agent, config, eval_metrics_fn)

    def train_step(state, n):
        return compiled_train(state, tf.constant(n))

    def eval_step(obs_stats, round_index, total_steps, diag):  # on the first replica's statistics
        key = tf.random.experimental.stateless_fold_in(key_eval, round_index)
        return compiled_eval(obs_stats, key, tf.constant(total_steps, tf.int64), diag)

    def warmup():
        compiled_eval(view(state).rollout.obs_stats, key_eval, tf.constant(0, tf.int64), zero_diagnostics())

    return Runner(learner, state, train_step, eval_step, agent.env.observation_space, agent.env.action_space,
                  warmup, lambda: None, agent.env, view, strategy)


# ---------------------------------------------------------------------------------------------------------------
# gymnasium environments
# ---------------------------------------------------------------------------------------------------------------


def _eval_source(env: Any) -> Any:
    """A source for a second, independent vector env: ids and factories are reused, instances deep-copied."""
    if isinstance(env, gym.Env):
        return copy.deepcopy(env)
    if isinstance(env, gym.vector.VectorEnv):
        spec = env.spec or getattr(env, "spec", None)
        if spec is None:
            raise ValueError("env: a gymnasium VectorEnv without a spec cannot be re-created for evaluation; pass an "
                             "env id or a factory instead")
        return spec.id
    return env


class HostOverrides(NamedTuple):
    """What the Stable-Baselines3 facade sets on the host runner (all optional)."""

    learner: Learner | None = None  # reuse trained networks (load, set_env)
    obs_stats: Any = None  # MeanStd to start from
    return_stats: Any = None
    learning_rate_fn: Callable[[int], float] | None = None  # iteration -> learning rate (SB3 schedules)
    clip_range: tf.Variable | None = None  # scheduled clip range, read by the compiled update
    clip_range_vf: tf.Variable | None = None
    on_episodes: Callable[[np.ndarray, np.ndarray], None] | None = None  # finished episodes' returns, lengths
    evaluation: bool = True  # build the evaluation env (the facade evaluates through callbacks instead)


def make_host_runner(
    env: Any, config: Config, eval_metrics_fn: EvalMetricsFn | None, overrides: HostOverrides = HostOverrides()
) -> Runner:
    from kppo.envs.gymnasium import GymVecEnv, make_vec_env  # numpy/gymnasium only

    if isinstance(env, GymVecEnv):
        vec_env = env
    else:
        vec_env = make_vec_env(env, config.num_envs, vectorization=config.vectorization, seed=config.seed,
                               verbose=config.verbose)
    eval_env = None
    if overrides.evaluation:
        eval_env = make_vec_env(_eval_source(env), config.num_eval_envs, vectorization=config.vectorization,
                                seed=config.seed + 1)
    strategy = make_strategy(config.distribute, config.devices)
    if strategy is None:
        learner = overrides.learner or make_learner(config, vec_env.flat_obs_dim, vec_env.action_space)
    else:  # all env shards step on the host; the update runs on the replicas (kppo.mirrored.make_sharded_update)
        if overrides.learner is not None:
            raise ValueError("distribute: expected 'none' when reusing trained networks (PPO.load/set_env), "
                             f"got {config.distribute!r}")
        with strategy.scope():
            learner = make_learner(config, vec_env.flat_obs_dim, vec_env.action_space)
    policy = HostPolicy(learner.dist, learner.actor, learner.critic)
    settings = rollout_settings(config)
    upd = update_settings(config, overrides.clip_range, overrides.clip_range_vf)
    jit = config.jit_rollout
    step_policy = StepPolicy(policy, config.normalize_obs, config.num_envs, vec_env.flat_obs_dim, jit,
                             config.sde_sample_freq)
    finish_fn = tf.function(lambda *a: finish_rollout(learner.critic, settings, *a), autograph=False)
    if strategy is None:
        compiled_update = tf.function(lambda b, k: update(learner, upd, b, k), jit_compile=config.jit_update,
                                      autograph=False)

        def update_fn(traj, advantages, returns, key):
            return compiled_update(flatten(traj, advantages, returns), key)
    else:
        from kppo.mirrored import make_sharded_update

        update_fn = make_sharded_update(learner, config, strategy)

    def act(obs_stats, obs):
        return learner.dist.to_env(learner.dist.mode(learner.actor(observe(obs_stats, obs, config.normalize_obs))))

    act_fn = tf.function(act, jit_compile=jit, autograph=False, reduce_retracing=True)
    eval_max_steps = (eval_env.max_episode_steps if eval_env else None) or 1000

    _, key_train, _ = root_keys(config.seed)
    obs = vec_env.reset(seed=config.seed)
    obs_stats = overrides.obs_stats or normalization.initial_stats([vec_env.flat_obs_dim])
    if config.normalize_obs:
        obs_stats = normalization.update(obs_stats, tf.constant(obs))
    rollout = HostRolloutState(
        obs, tf.zeros([config.num_envs]), obs_stats, overrides.return_stats or normalization.initial_stats(()),
        np.zeros(config.num_envs), np.zeros(config.num_envs, np.int32),
    )
    state = RunnerState(rollout, key_train, tf.constant(0, tf.int32))

    def train_step(state: RunnerState, n: int):
        acc = None
        for _ in range(n):
            key, key_rollout, key_update = tf.unstack(tf.random.experimental.stateless_split(state.key, 3))
            if overrides.learning_rate_fn is None:
                lr = learning_rate(config, state.iteration)
            else:
                lr = tf.constant(overrides.learning_rate_fn(int(state.iteration)), tf.float32)
            learner.optimizer.learning_rate.assign(lr)
            rollout, done = collect_host_rollout(vec_env, step_policy, finish_fn, config.num_steps, state.rollout,
                                                 key_rollout)
            if overrides.on_episodes is not None:
                ended = (done.traj.terminated.numpy() | done.traj.truncated.numpy())
                overrides.on_episodes(done.traj.episode_return.numpy()[ended], done.traj.episode_length.numpy()[ended])
            stats = update_fn(done.traj, done.advantages, done.returns, key_update)
            diag = diagnostics(done.traj, done.returns, stats, lr)
            acc = diag if acc is None else tf.nest.map_structure(tf.add, acc, diag)
            state = RunnerState(rollout, key, state.iteration + 1)
        return state, acc

    def eval_step(obs_stats, round_index, total_steps, diag):
        result, transitions = evaluate_host(eval_env, act_fn, obs_stats, config.seed * 1000 + round_index,
                                            eval_max_steps)
        extra = eval_metrics_fn(tf.constant(total_steps, tf.int64), diag, transitions) if eval_metrics_fn else {}
        return result, extra

    def close():
        vec_env.close()
        if eval_env is not None:
            eval_env.close()

    return Runner(learner, state, train_step, eval_step, vec_env.observation_space, vec_env.action_space, None,
                  close, vec_env)  # the state stays on the host: not per-replica


def make_runner(env: Any, config: Config, eval_metrics_fn: EvalMetricsFn | None = None) -> Runner:
    """Picks the runner: TF-native for `kppo.envs.VecEnv`s and built-in names (unless env_backend="gymnasium"),
    gymnasium for other ids, `gym.Env` instances, factories and gymnasium vector envs."""
    env = config.env if env is None else env
    if isinstance(env, VecEnv):
        return make_native_runner(env, config, eval_metrics_fn)
    if isinstance(env, str) and config.env_backend != "gymnasium":
        builtin = True
        try:
            envs_lib.resolve_name(env)
        except ValueError:
            builtin = False
        if builtin:
            return make_native_runner(env, config, eval_metrics_fn)
        if config.env_backend == "tf":
            envs_lib.resolve_name(env)  # raises the error naming the built-in tasks
    if isinstance(env, (str, gym.Env, gym.vector.VectorEnv)) or callable(env):
        return make_host_runner(env, config, eval_metrics_fn)
    raise ValueError(
        "env: expected a TF-native env (name or kppo.envs.VecEnv) or a gymnasium env (id, Env, factory or "
        f"VectorEnv), got {type(env).__name__}"
    )
