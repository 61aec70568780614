"""The PPO update, written once for every runner: epochs x shuffled minibatches, global-norm clipping, Adam, target-KL
early stop. The iteration around it is `kppo.update.iteration`, the loop over iterations `kppo.update.driver`, the
diagnostics `kppo.update.diagnostics`.

Shuffling is an argsort of stateless uniforms (XLA has no kernel for `stateless_shuffle`; a population compiled by XLA
sorts with `argsort_network`, the same permutations); the minibatch index table [epochs * minibatches,
minibatch_size] is built once per update, so no slice has tensor bounds.

The minibatch loop (`minibatch_loop`) has the modes the runners need: "graph" (a `tf.while_loop` that leaves at a
target-KL stop), "members" (the same loop with one trip count for every population member: after a stop the rest are
computed and dropped), "unrolled" (a Python loop traced into the caller's graph: MirroredStrategy allows no
all-reduce inside a `tf.while_loop`) and "host" (a Python loop run eagerly, which reads each step's KL decision on
the host). Every mode sums the same `UpdateStats` and applies the one target-KL test, `kl_within`.
"""

from __future__ import annotations

from typing import Any, NamedTuple
from collections.abc import Callable

from kppo.core import losses
from kppo.core import counter_rng
from kppo._tf import tf
from kppo.agent.agent import Agent, actor_critic, with_weights
from kppo.core.distribute import clip_and_scale, minibatch_moments
from kppo.core.tf_loops import merge_leading, tie_to_members
from kppo.core.vectorized import argsort_network, clip_by_global_norm
from kppo.core.optimizers import AdamState, adam_step
from kppo.update.recurrent import replay_sequences, replay_window, rotated_indices, rows, sequences
from kppo.update.schedules import Schedules, with_schedules
from kppo.core.types import Batch, LossInfo, Rollout


class UpdateSettings(NamedTuple):
    num_epochs: int
    num_minibatches: int
    clip_range: float
    clip_range_vf: float | None
    vf_clip_mode: str
    ent_coef: float
    vf_coef: float
    max_grad_norm: float
    normalize_advantage: bool
    target_kl: float | None
    advantage_std_ddof: int = 0  # 1: the sample std (n - 1), as SB3's torch.std
    rotated_steps: int = 0  # recurrent, sb3-contrib's minibatches (`rows`, `rotated_indices`): steps per env; 0: not


class UpdateStats(NamedTuple):
    """Sums over computed minibatches (divide by `minibatches`)."""

    loss: LossInfo
    grad_norm: tf.Tensor
    minibatches: tf.Tensor  # minibatches computed (incl. the one that triggered a target-KL stop)
    steps: tf.Tensor  # gradient steps applied


def zero_stats(members: int | None = None) -> UpdateStats:
    """The sums before the first minibatch (with a member axis of `members`)."""
    shape = [] if members is None else [members]
    zero, count = tf.zeros(shape), tf.zeros(shape, tf.int32)
    return UpdateStats(LossInfo(*[zero] * len(LossInfo._fields)), zero, count, count)


def flatten(rollout: Rollout, sequence_length: int = 0, rotated: bool = False) -> Batch:
    """Time-major rollout [T, B, ...] -> flat Batch [T * B, ...] (the only place kppo flattens); for a recurrent
    agent's rollout (one with a memory), `sequences`, or `rows` for rotated windows."""
    if len(rollout.trajectory.memory) > 0:
        return rows(rollout) if rotated else sequences(rollout, sequence_length)
    traj, advantages, returns = rollout
    return Batch(
        obs=merge_leading(traj.obs),
        action=merge_leading(traj.action),
        log_prob=merge_leading(traj.log_prob),
        value=merge_leading(traj.value),
        advantage=merge_leading(advantages),
        returns=merge_leading(returns),
        action_mask=merge_leading(traj.action_mask),
    )


def minibatch_indices(
    key: tf.Tensor, size: int, num_epochs: int, num_minibatches: int, network: bool = False
) -> tf.Tensor:
    """int32 [num_epochs * num_minibatches, size // num_minibatches]: a fresh permutation per epoch, cut in rows.
    `network`: the same permutations through `argsort_network` (faster under XLA, slower in TF kernels)."""
    return shuffled_rows(shuffle_noise(key, size, num_epochs), num_minibatches, network)


def shuffle_noise(key: tf.Tensor, size: int, num_epochs: int) -> tf.Tensor:
    """float32 [num_epochs, size]: the uniform draws whose argsort is each epoch's permutation."""
    return counter_rng.uniform(key, [num_epochs, size])


def shuffled_rows(noise: tf.Tensor, num_minibatches: int, network: bool = False) -> tf.Tensor:
    """`shuffle_noise` [..., num_epochs, size] sorted into permutations and cut into minibatch rows:
    int32 [..., num_epochs * num_minibatches, size // num_minibatches] (leading axes: a population's members)."""
    perms = argsort_network(noise) if network else tf.argsort(noise, axis=-1)
    *lead, epochs, size = perms.shape
    return tf.reshape(perms, [*lead, epochs * num_minibatches, size // num_minibatches])


def update_indices(settings: UpdateSettings, size: int, key: tf.Tensor, network: bool = False) -> tf.Tensor:
    """The update's minibatch rows: shuffled permutations (`network`: sorted by `argsort_network`), or sb3-contrib's
    rotated windows (recurrent rows)."""
    if settings.rotated_steps:
        return rotated_indices(key, size, settings.num_epochs, settings.num_minibatches)
    return minibatch_indices(key, size, settings.num_epochs, settings.num_minibatches, network)


def gather(batch: Batch, indices: tf.Tensor, k) -> Batch:
    """Minibatch `k` of the update (row `k` of `indices`)."""
    return tf.nest.map_structure(lambda x: tf.gather(x, tf.gather(indices, k)), batch)


def kl_within(approx_kl, target_kl: float):
    """SB3's target-KL test, the one every path applies before a gradient step: whether the minibatch's approx KL
    before the step is within 1.5 * target_kl (a NaN KL is not: the step is skipped). Tensors or host floats."""
    return approx_kl <= 1.5 * target_kl


def minibatch_outputs(agent: Agent, settings: UpdateSettings, mb: Batch) -> tuple[Batch, tf.Tensor, tf.Tensor]:
    """(the minibatch as flat rows, the actor's masked params, the values) under the agent's current weights; a
    recurrent agent's minibatch holds env sequences, or one window of rows (`settings.rotated_steps`), replayed from
    their stored memory."""
    if agent.lstm is not None:
        mb, params, values = (
            replay_window(agent, mb, settings.rotated_steps) if settings.rotated_steps else replay_sequences(agent, mb)
        )
    else:
        params, values = actor_critic(agent, mb.obs)
    return mb, agent.dist.masked(params, mb.action_mask), values


def minibatch_loss(agent: Agent, settings: UpdateSettings, mb: Batch) -> tuple[tf.Tensor, LossInfo]:
    """PPO loss of one minibatch (inside the tape)."""
    mb, params, values = minibatch_outputs(agent, settings, mb)
    advantages = mb.advantage
    if settings.normalize_advantage:
        advantages = losses.normalize_advantages(advantages, minibatch_moments(advantages, settings.advantage_std_ddof))
    return losses.ppo_loss(
        agent.dist.log_prob(params, mb.action),
        agent.dist.entropy(params),
        values,
        mb.log_prob,
        mb.value,
        advantages,
        mb.returns,
        clip_range=settings.clip_range,
        clip_range_vf=settings.clip_range_vf,
        ent_coef=settings.ent_coef,
        vf_coef=settings.vf_coef,
        vf_clip_mode=settings.vf_clip_mode,
    )


def minibatch_gradients(agent: Agent, settings: UpdateSettings, mb: Batch) -> tuple[LossInfo, list, tf.Tensor]:
    """One minibatch's loss info, its gradients clipped by global norm (all-reduced first under tf.distribute:
    `kppo.core.distribute.clip_and_scale`) and the pre-clip global norm."""
    variables = agent.variables
    with tf.GradientTape() as tape:
        loss, info = minibatch_loss(agent, settings, mb)
    clipped, grad_norm = clip_and_scale(tape.gradient(loss, variables), settings.max_grad_norm)
    return info, clipped, grad_norm


def minibatch_step(agent: Agent, settings: UpdateSettings, mb: Batch) -> tuple[LossInfo, tf.Tensor, tf.Tensor]:
    """Gradient of one minibatch, clipped by global norm and applied unless target KL is exceeded.

    Returns (loss info, pre-clip global gradient norm, bool applied). The KL test uses the approx KL of this
    minibatch before the step (SB3: https://github.com/DLR-RM/stable-baselines3/blob/master/stable_baselines3/ppo/ppo.py).
    """
    info, clipped, grad_norm = minibatch_gradients(agent, settings, mb)
    variables = agent.variables
    if settings.target_kl is None:
        agent.optimizer.apply_gradients(zip(clipped, variables))
        return info, grad_norm, tf.constant(True)

    def _apply():
        agent.optimizer.apply_gradients(zip(clipped, variables))
        return tf.constant(True)

    return info, grad_norm, tf.cond(kl_within(info.approx_kl, settings.target_kl), _apply, lambda: tf.constant(False))


def add_stats(stats: UpdateStats, info: LossInfo, grad_norm, applied, counts=True) -> UpdateStats:
    """The update's sums after one minibatch (`counts`: it was computed before any target-KL stop)."""
    return UpdateStats(
        loss=tf.nest.map_structure(lambda a, b: a + tf.where(counts, b, 0.0), stats.loss, info),
        grad_norm=stats.grad_norm + tf.where(counts, grad_norm, 0.0),
        minibatches=stats.minibatches + tf.cast(counts, tf.int32),
        steps=stats.steps + tf.cast(applied, tf.int32),
    )


MINIBATCH_MODES = ("graph", "members", "unrolled", "host")


def minibatch_loop(
    step: Callable, carry: Any, total: int, mode: str = "graph", members: int | None = None
) -> tuple[Any, UpdateStats]:
    """`total` minibatches of `step(carry, k, stopped) -> (carry, info, grad norm, applied)`; after a step that was not
    applied (the target-KL stop) no more minibatches count. `mode` (module docstring): "graph" and "host" leave the
    loop there, "members" computes and drops the rest, "unrolled" never stops (its step has no KL test). `members`:
    a step of every member of a population at once ("members" mode), `stopped`, `applied` and the sums [members]."""
    if mode in ("unrolled", "host"):
        stats = zero_stats()
        for k in range(total):
            carry, info, grad_norm, applied = step(carry, tf.constant(k), False)
            stats = add_stats(stats, info, grad_norm, applied)
            if mode == "host" and not bool(applied):
                break
        return carry, stats
    early_exit = mode == "graph"

    def cond(k, carry, stats, stopped):
        return tf.logical_and(k < total, tf.logical_not(stopped)) if early_exit else k < total

    def body(k, carry, stats, stopped):
        carry, info, grad_norm, applied = step(carry, k, stopped)
        stats = add_stats(stats, info, grad_norm, applied, tf.logical_not(stopped))
        return k + 1, carry, stats, tf.logical_or(stopped, tf.logical_not(applied))

    stopped = tf.constant(False) if members is None else tf.zeros([members], tf.bool)
    start = (tf.constant(0), carry, zero_stats(members), stopped)
    _, carry, stats, _ = tf.while_loop(cond, body, tie_to_members(start), maximum_iterations=total)
    return carry, stats


def ppo_update(
    agent: Agent, settings: UpdateSettings, batch: Batch, key: tf.Tensor, schedules: Schedules | None = None
) -> UpdateStats:
    """All epochs and minibatches of one PPO update on the agent's variables, with this iteration's `schedules` (the
    learning rate assigned to the optimizer); stops early after a target-KL violation."""
    if schedules is not None:
        agent.optimizer.learning_rate.assign(schedules.learning_rate)
        settings = with_schedules(settings, schedules)
    indices = update_indices(settings, batch.obs.shape[0], key)

    def step(carry, k, stopped):
        del stopped  # the loop has exited by then
        return (carry, *minibatch_step(agent, settings, gather(batch, indices, k)))

    _, stats = minibatch_loop(step, (), settings.num_epochs * settings.num_minibatches)
    return stats


def functional_update(
    agent: Agent,
    settings: UpdateSettings,
    adam_style: str,
    params: list,
    adam: AdamState,
    batch: Batch,
    key: tf.Tensor,
    schedules: Schedules,
    xla: bool = False,
) -> tuple[tuple[list, AdamState], UpdateStats]:
    """`ppo_update` on weights held as tensors (`params`, in `agent.variables` order) with Adam as a function
    (`kppo.core.optimizers.adam_step`): the minibatches of `functional_step`. Computes what `ppo_update` computes on
    one device; every minibatch is computed (`minibatch_loop`'s "members" mode). `xla`: it is traced for an
    XLA-compiled program (the shuffle's argsort by `argsort_network`, the same permutations, faster there).
    Returns ((params, Adam state), stats)."""
    settings = with_schedules(settings, schedules)
    indices = update_indices(settings, batch.obs.shape[0], key, network=xla)
    step = functional_step(agent, settings, adam_style, batch, indices, schedules.learning_rate)
    return minibatch_loop(step, (list(params), adam), settings.num_epochs * settings.num_minibatches, mode="members")


def functional_step(
    agent: Agent, settings: UpdateSettings, adam_style: str, batch: Batch, indices: tf.Tensor, learning_rate
) -> Callable:
    """A functional update's minibatch step, `step((params, adam), k, stopped) -> ((params, adam), info, grad norm,
    applied)` (`minibatch_loop`'s): minibatch k's loss and gradient on `params`, clipped, one Adam step; a stopped or
    target-KL-violating step keeps the weights. `settings` holds the iteration's scheduled values."""

    def step(carry, k, stopped):
        params, adam = carry
        mb = gather(batch, indices, k)
        with tf.GradientTape() as tape:
            tape.watch(params)
            loss, info = with_weights(agent, params, lambda: minibatch_loss(agent, settings, mb))
        grads = tape.gradient(loss, params, unconnected_gradients=tf.UnconnectedGradients.ZERO)
        clipped, grad_norm = clip_by_global_norm(grads, settings.max_grad_norm)
        applied = tf.logical_not(stopped)
        if settings.target_kl is not None:
            applied = tf.logical_and(applied, kl_within(info.approx_kl, settings.target_kl))
        new = adam_step(adam_style, params, clipped, adam, learning_rate)
        carry = tf.nest.map_structure(lambda a, b: tf.where(applied, a, b), new, (params, adam))
        return carry, info, grad_norm, applied

    return step
