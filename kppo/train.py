"""`train(env, config, seed) -> PPOResult`: wires env, networks, rollout and update into compiled iterations and
runs them from a Python loop that evaluates, reports and times (rex/purejaxrl's `train`, in TensorFlow)."""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import Any, Callable, NamedTuple

import gymnasium as gym
import keras
import numpy as np

from kppo import envs as envs_lib
from kppo._tf import tf
from kppo.config import Config
from kppo.distributions import make_distribution
from kppo.envs.base import VecEnv
from kppo.losses import explained_variance
from kppo.networks import make_networks
from kppo.policy import ObsScaling, Policy
from kppo.rollout import Agent, RolloutSettings, collect_rollout, evaluate, initial_rollout_state
from kppo.types import Diagnostics, EvalTransition, RunnerState
from kppo.update import Learner, UpdateSettings, flatten, update

EvalMetricsFn = Callable[[tf.Tensor, Diagnostics, EvalTransition], dict]


@dataclasses.dataclass
class PPOResult:
    """What `train` returns (rex's PPOResult).

    Attributes:
        config: the Config the run used.
        runner_state: env state, last observations, normalization statistics, RNG key, iteration counter.
        metrics: one row per evaluation round: name -> numpy array [eval_freq] (see `METRICS`).
        learner: actor, critic, optimizer and distribution (what a checkpoint saves).
        observation_space, action_space: of one env.
        timings: compile_s (first compiled calls), run_s (the rest), total_s (both, excluding setup).
    """

    config: Config
    runner_state: RunnerState
    metrics: dict[str, np.ndarray]
    learner: Learner
    observation_space: gym.spaces.Space
    action_space: gym.spaces.Space
    timings: dict[str, float]

    @property
    def obs_scaling(self) -> ObsScaling:
        stats = self.runner_state.rollout.obs_stats
        return ObsScaling(stats.mean.numpy(), stats.var.numpy(), self.config.normalize_obs)

    @property
    def policy(self) -> Policy:
        return Policy(
            self.learner.actor, self.learner.dist, self.obs_scaling, self.observation_space, self.action_space
        )

    @property
    def act_scaling(self):
        return self.policy.act_scaling


#: Metric names (one value per evaluation round) and meanings.
METRICS = {
    "train/total_steps": "environment steps so far",
    "train/iterations": "training iterations (rollout + update) so far",
    "train/mean_approxkl": "approx KL(old || new), mean over the round's minibatches",
    "train/total_loss": "PPO loss",
    "train/policy_loss": "clipped surrogate loss",
    "train/value_loss": "value mean squared error",
    "train/entropy": "policy entropy",
    "train/clip_fraction": "fraction of ratios outside [1 - clip, 1 + clip]",
    "train/explained_variance": "1 - Var(returns - values) / Var(returns) of the rollouts",
    "train/learning_rate": "learning rate of the round's last iteration",
    "train/grad_norm": "global gradient norm before clipping",
    "train/minibatch_steps": "gradient steps per iteration (fewer after a target-KL stop)",
    "rollout/ep_rew_mean": "mean raw return of training episodes finished in the round (NaN if none)",
    "rollout/ep_len_mean": "their mean length",
    "eval/mean_returns": "deterministic evaluation: mean first-episode return over num_eval_envs envs",
    "eval/std_returns": "its standard deviation",
    "eval/mean_lengths": "mean episode length",
    "eval/std_lengths": "its standard deviation",
    "eval/total_episodes": "evaluation episodes that ended within the time limit",
    "time/steps_per_s": "environment steps per second in the round (training calls only)",
    "time/elapsed_s": "wall time since the first compiled call",
}


def make_envs(env: str | VecEnv | None, config: Config) -> tuple[VecEnv, VecEnv]:
    """(training env, evaluation env). A name builds both (evaluation without fixed_init/offset_step); a VecEnv
    is used for both, wrapped with episode statistics if it lacks them."""
    env = config.env if env is None else env
    if isinstance(env, str):
        train_env = envs_lib.make(env, fixed_init=config.fixed_init, offset_step=config.offset_step)
        return train_env, envs_lib.make(env)
    if not isinstance(env, VecEnv):
        raise ValueError(f"env: expected a TF-native env name or a kppo.envs.VecEnv, got {type(env).__name__}")
    if not isinstance(env, envs_lib.EpisodeStatistics):
        env = envs_lib.EpisodeStatistics(env)
    return env, env


def _observation_dim(space: gym.spaces.Space) -> int:
    if not isinstance(space, gym.spaces.Box) or len(space.shape) != 1:
        raise ValueError(f"observation_space: expected a 1-D Box for a TF-native env, got {space}")
    return int(space.shape[0])


def _learning_rate(config: Config, iteration: tf.Tensor) -> tf.Tensor:
    """Linear: lr * (1 - iteration / num_iterations) (SB3's progress_remaining at the start of the rollout)."""
    if config.lr_schedule == "constant":
        return tf.constant(config.learning_rate, tf.float32)
    frac = 1.0 - tf.cast(iteration, tf.float32) / float(config.num_iterations)
    return config.learning_rate * frac


def _maybe_compile(fn: Callable, jit: bool) -> Callable:
    """XLA-compiled tf.function when `jit`, else the plain function (inlined into the caller's graph)."""
    return tf.function(fn, jit_compile=True, autograph=False) if jit else fn


def iteration_step(rollout_fn, update_fn, learner: Learner, config: Config, state: RunnerState):
    """One training iteration: rollout + GAE, then the update. Returns (state, Diagnostics)."""
    key, key_rollout, key_update = tf.unstack(tf.random.experimental.stateless_split(state.key, 3))
    lr = _learning_rate(config, state.iteration)
    learner.optimizer.learning_rate.assign(lr)
    rollout, traj, advantages, returns = rollout_fn(state.rollout, key_rollout)
    stats = update_fn(flatten(traj, advantages, returns), key_update)
    count = tf.cast(tf.maximum(stats.minibatches, 1), tf.float32)
    ended = tf.cast(tf.logical_or(traj.terminated, traj.truncated), tf.float32)
    diag = Diagnostics(
        *[x / count for x in stats.loss],
        explained_variance=explained_variance(tf.reshape(traj.value, [-1]), tf.reshape(returns, [-1])),
        learning_rate=lr,
        grad_norm=stats.grad_norm / count,
        minibatch_steps=tf.cast(stats.steps, tf.float32),
        episode_return_sum=tf.reduce_sum(traj.episode_return),
        episode_length_sum=tf.cast(tf.reduce_sum(traj.episode_length), tf.float32),
        episodes=tf.reduce_sum(ended),
    )
    return RunnerState(rollout, key, state.iteration + 1), diag


def make_train_step(agent: Agent, learner: Learner, config: Config) -> Callable:
    """Compiled `(runner_state, n) -> (runner_state, summed Diagnostics)` running n iterations (n is a tensor, so
    a shorter last call does not retrace)."""
    settings = RolloutSettings(
        config.num_steps, config.gamma, config.gae_lambda, config.normalize_obs, config.normalize_reward
    )
    update_settings = UpdateSettings(
        config.num_epochs,
        config.num_minibatches,
        config.clip_range,
        config.clip_range_vf,
        config.vf_clip_mode,
        config.ent_coef,
        config.vf_coef,
        config.max_grad_norm,
        config.normalize_advantage,
        config.target_kl,
    )
    rollout_fn = _maybe_compile(lambda s, k: collect_rollout(agent, settings, s, k), config.jit_rollout)
    update_fn = _maybe_compile(lambda b, k: update(learner, update_settings, b, k), config.jit_update)

    def train_step(state: RunnerState, num_iterations: tf.Tensor):
        state, first = iteration_step(rollout_fn, update_fn, learner, config, state)

        def body(i, state, acc):
            state, diag = iteration_step(rollout_fn, update_fn, learner, config, state)
            return i + 1, state, tf.nest.map_structure(tf.add, acc, diag)

        _, state, acc = tf.while_loop(lambda i, *_: i < num_iterations, body, (tf.constant(1), state, first))
        return state, acc

    return tf.function(train_step, autograph=False)


def make_eval_step(agent: Agent, config: Config, eval_metrics_fn: EvalMetricsFn | None) -> Callable:
    """Compiled `(obs_stats, key, total_steps, diagnostics) -> (EvalResult, extra metrics)`."""
    run_eval = _maybe_compile(
        lambda stats, key: evaluate(agent, stats, key, config.num_eval_envs, config.normalize_obs), config.jit_rollout
    )

    def eval_step(obs_stats, key, total_steps, diagnostics):
        result, transitions = run_eval(obs_stats, key)
        extra = eval_metrics_fn(total_steps, diagnostics, transitions) if eval_metrics_fn else {}
        return result, extra

    return tf.function(eval_step, autograph=False)


class Setup(NamedTuple):
    """Everything `train` builds before the first compiled call."""

    agent: Agent
    eval_agent: Agent
    learner: Learner
    state: RunnerState
    key_eval: tf.Tensor


def setup(env: str | VecEnv | None, config: Config) -> Setup:
    """Builds envs, distribution, networks, optimizer and the initial runner state from `config.seed`."""
    train_env, eval_env = make_envs(env, config)
    obs_dim = _observation_dim(train_env.observation_space)
    dist = make_distribution(train_env.action_space, config.squash)
    actor, critic = make_networks(config, obs_dim, dist, config.seed)
    optimizer = keras.optimizers.Adam(learning_rate=config.learning_rate, epsilon=1e-5)
    learner = Learner(dist, actor, critic, optimizer)
    optimizer.build(learner.variables)
    agent = Agent(train_env, dist, actor, critic)
    root = tf.constant([config.seed, 0], tf.int32)
    key_reset, key_train, key_eval = tf.unstack(tf.random.experimental.stateless_split(root, 3))
    state = RunnerState(
        initial_rollout_state(agent, key_reset, config.num_envs, config.normalize_obs),
        key_train,
        tf.constant(0, tf.int32),
    )
    return Setup(agent, Agent(eval_env, dist, actor, critic), learner, state, key_eval)


def _round_sizes(num_iterations: int, rounds: int) -> list[int]:
    """Splits the iterations into `rounds` nearly equal rounds (all iterations run, none dropped)."""
    bounds = [round((r + 1) * num_iterations / rounds) for r in range(rounds)]
    return [b - a for a, b in zip([0] + bounds[:-1], bounds)]


def _print_metrics(metrics: dict[str, Any]) -> None:
    print(
        f"[kppo] steps {int(metrics['train/total_steps']):>9d}  eval {metrics['eval/mean_returns']:9.2f} "
        f"+- {metrics['eval/std_returns']:7.2f}  train ep {metrics['rollout/ep_rew_mean']:9.2f}  "
        f"kl {metrics['train/mean_approxkl']:.4f}  {metrics['time/steps_per_s']:8.0f} steps/s",
        flush=True,
    )


def train(
    env: str | VecEnv | None = None,
    config: Config | None = None,
    seed: int | None = None,
    *,
    eval_metrics_fn: EvalMetricsFn | None = None,
    on_eval: Callable[[dict], None] | None = None,
) -> PPOResult:
    """Trains PPO on a TF-native environment.

    Args:
        env: a built-in env name (see `kppo.envs.make`) or a `kppo.envs.VecEnv`. Defaults to `config.env`.
        config: hyperparameters. Defaults to `Config()` (the fixed CartPole setting).
        seed: overrides `config.seed`.
        eval_metrics_fn: in-graph hook `(total_steps, diagnostics, eval_transitions) -> dict of tensors`, merged into
            each round's metrics (rex's EVAL_METRICS_JAX_CB).
        on_eval: host callback called with each round's metrics dict (rex's EVAL_METRICS_HOST_CB); defaults to
            printing one line when `config.verbose` >= 1.

    Returns:
        PPOResult.
    """
    config = Config() if config is None else config
    if seed is not None:
        config = config.replace(seed=seed)
    agent, eval_agent, learner, state, key_eval = setup(env, config)
    train_step = make_train_step(agent, learner, config)
    eval_step = make_eval_step(eval_agent, config, eval_metrics_fn)
    if on_eval is None and config.verbose >= 1:
        on_eval = _print_metrics

    rows: list[dict[str, Any]] = []
    compile_s = 0.0
    start = time.perf_counter()
    # Compile the evaluation on the other core while the first training call compiles (its result is dropped).
    zeros = Diagnostics(*[tf.constant(0.0)] * len(Diagnostics._fields))
    warmup = threading.Thread(
        target=eval_step, args=(state.rollout.obs_stats, key_eval, tf.constant(0, tf.int64), zeros), daemon=True
    )
    warmup.start()
    for round_index, round_iterations in enumerate(_round_sizes(config.num_iterations, config.eval_freq)):
        round_start, sums, calls = time.perf_counter(), None, 0
        remaining = round_iterations
        while remaining > 0:
            n = min(config.iterations_per_call, remaining)
            t0 = time.perf_counter()
            state, diag = train_step(state, tf.constant(n))
            diag = tf.nest.map_structure(lambda x: float(x.numpy()), diag)
            if round_index == 0 and calls == 0:
                compile_s += time.perf_counter() - t0
            sums = diag if sums is None else Diagnostics(*[a + b for a, b in zip(sums, diag)])
            calls += 1
            remaining -= n
            if config.debug:
                episodes = max(diag.episodes, 1.0)
                print(f"[kppo debug] iterations to {int(state.iteration)}: {diag.episodes:.0f} episodes, "
                      f"mean return {diag.episode_return_sum / episodes:.2f}, "
                      f"mean length {diag.episode_length_sum / episodes:.1f}", flush=True)
        train_wall = time.perf_counter() - round_start
        warmup.join()
        total_steps = int(state.iteration) * config.rollout_size
        t0 = time.perf_counter()
        result, extra = eval_step(
            state.rollout.obs_stats,
            tf.random.experimental.stateless_fold_in(key_eval, round_index),
            tf.constant(total_steps, tf.int64),
            Diagnostics(*[tf.constant(x / round_iterations, tf.float32) for x in sums]),
        )
        if round_index == 0:
            compile_s += time.perf_counter() - t0
        row = _round_metrics(config, sums, round_iterations, total_steps, result, train_wall)
        row.update({name: np.asarray(value) for name, value in extra.items()})
        row["time/elapsed_s"] = time.perf_counter() - start
        rows.append(row)
        if on_eval is not None:
            on_eval(row)
    total_s = time.perf_counter() - start
    metrics = {name: np.asarray([row[name] for row in rows]) for name in rows[0]}
    timings = {"compile_s": compile_s, "run_s": total_s - compile_s, "total_s": total_s}
    spaces = (agent.env.observation_space, agent.env.action_space)
    return PPOResult(config, state, metrics, learner, *spaces, timings)


def _round_metrics(config, sums: Diagnostics, iterations: int, total_steps: int, result, train_wall: float) -> dict:
    mean = Diagnostics(*[x / iterations for x in sums])
    episodes = sums.episodes
    returns, lengths = result.returns.numpy(), result.lengths.numpy().astype(np.float64)
    steps_in_round = iterations * config.rollout_size
    return {
        "train/total_steps": total_steps,
        "train/iterations": total_steps // config.rollout_size,
        "train/mean_approxkl": mean.approx_kl,
        "train/total_loss": mean.total_loss,
        "train/policy_loss": mean.policy_loss,
        "train/value_loss": mean.value_loss,
        "train/entropy": mean.entropy,
        "train/clip_fraction": mean.clip_fraction,
        "train/explained_variance": mean.explained_variance,
        "train/learning_rate": float(_learning_rate(config, total_steps // config.rollout_size - 1)),
        "train/grad_norm": mean.grad_norm,
        "train/minibatch_steps": mean.minibatch_steps,
        "rollout/ep_rew_mean": sums.episode_return_sum / episodes if episodes else float("nan"),
        "rollout/ep_len_mean": sums.episode_length_sum / episodes if episodes else float("nan"),
        "eval/mean_returns": float(returns.mean()),
        "eval/std_returns": float(returns.std()),
        "eval/mean_lengths": float(lengths.mean()),
        "eval/std_lengths": float(lengths.std()),
        "eval/total_episodes": int(result.finished.numpy().sum()),
        "time/steps_per_s": steps_in_round / train_wall,
    }

