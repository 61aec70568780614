"""The agent: action distribution, actor, critic and Adam built from an `AgentSpec`; its policy; reading a saved one.

Everything that needs networks (the runners, the update, checkpoints, export, the SB3 facade) gets them from here, so
none of them depends on how a run is driven.
"""

from __future__ import annotations

import contextlib
from typing import Any, NamedTuple
from collections.abc import Callable

import gymnasium as gym
import keras
import numpy as np

from kppo.core.distributions import ActionDistribution, make_distribution
from kppo.core.errors import ArgumentError
from kppo.gym_envs.spaces import flat_dim, normalized_columns
from kppo._tf import tf
from kppo.core.tf_loops import merge_leading, scan
from kppo.agent.extractors import spec_extractor
from kppo.agent.features import features_dim
from kppo.agent.lstm import LSTMCells
from kppo.agent.networks import Actor, Critic, make_extractors, make_networks
from kppo.core.optimizers import AdamState, adam_state_of, assign_adam_state, make_optimizer
from kppo.agent.policy import ObsScaling, Policy
from kppo.agent.spec import AgentSpec
from kppo.core.types import Moments


class Agent(NamedTuple):
    """What a rollout acts with and the update changes."""

    dist: ActionDistribution
    actor: Actor
    critic: Critic
    optimizer: keras.optimizers.Optimizer
    lstm: LSTMCells | None = None  # the LSTM cells of a recurrent agent (their state is its `memory`)

    @property
    def variables(self) -> list:
        """The trainable variables: the actor's, then the critic's (then the LSTM cells')."""
        cells = self.lstm.trainable_variables if self.lstm is not None else []
        actor = self.actor.trainable_variables
        seen = {id(v) for v in actor}  # a shared features extractor's weights count once, in the actor's
        return actor + [v for v in self.critic.trainable_variables if id(v) not in seen] + cells

    @property
    def program_variables(self) -> list:
        """Every variable a compiled program of the agent reads, in a fixed order: the networks' (trainable or not,
        a shared layer's once), then the optimizer's. Two agents built from one spec list theirs alike, which is what
        `kppo.core.rebinding.Rebound` maps one onto the other."""
        modules = [self.actor, self.critic] + ([self.lstm] if self.lstm is not None else [])
        found = [v for m in modules for v in m.variables] + list(self.optimizer.variables)
        return list({id(v): v for v in found}.values())  # first places kept


# A recurrent agent's memory: (h, c) of the actor's LSTM, then of the critic's, each [B, layers * units]; () for an MLP
# agent. Every rollout, update and policy goes through these three functions, so an MLP agent computes exactly what it
# did before.


def initial_memory(agent: Agent, num_envs: int) -> tuple:
    """Zero memory for `num_envs` envs (what an episode starts from); () for an MLP agent."""
    if agent.lstm is None:
        return ()
    return tuple(tf.zeros([num_envs, agent.lstm.state_size]) for _ in range(2 * len(agent.lstm.cells)))


def feature_extractors(agent: Agent) -> tuple[Any, Any]:
    """(the actor's features extractor, the critic's): the networks' own, or the one a recurrent agent's LSTMs read
    (both); None where observations are read as they are."""
    memory = getattr(agent.lstm, "extractor", None)
    if memory is not None:
        return memory, memory
    return getattr(agent.actor, "extractor", None), getattr(agent.critic, "extractor", None)


def actor_critic(agent: Agent, obs: tf.Tensor, features: tf.Tensor | None = None) -> tuple:
    """(actor params, values) at observations `obs` [B, D] of an MLP agent; a features extractor the two networks
    share (SB3's `share_features_extractor=True`) runs once, as in SB3. `features`: the actor's extractor's output at
    `obs`, when it was computed already (the host rollout's acting pass): the extractor does not run again for the
    actor, nor for a critic that shares it."""
    extractor: Any = getattr(agent.actor, "extractor", None)
    critics: Any = getattr(agent.critic, "extractor", None)
    if extractor is None or (features is None and extractor is not critics):
        return agent.actor(obs), agent.critic(obs)
    features = extractor(obs) if features is None else features
    values = agent.critic.from_features(features) if extractor is critics else agent.critic(obs)
    return agent.actor.from_features(features), values


def act_step(agent: Agent, obs: tf.Tensor, memory: tuple, episode_start: tf.Tensor | None = None):
    """(actor params, value, new memory) at observations `obs` [B, D]; the memory restarts from zeros where
    `episode_start` [B] (the observation is an episode's first)."""
    if agent.lstm is None:
        return (*actor_critic(agent, obs), ())
    if episode_start is not None:
        keep = 1.0 - tf.cast(episode_start, tf.float32)[:, None]
        memory = tuple(m * keep for m in memory)
    outputs, memory = agent.lstm(obs, memory)
    return agent.actor(outputs[0]), agent.critic(_critic_input(agent, obs, outputs)), memory


def _critic_input(agent: Agent, obs: tf.Tensor, outputs: list) -> tf.Tensor:
    """What a recurrent agent's critic reads: its own cell's output, the actor cell's without its gradient
    (sb3-contrib's `shared_lstm`: `latent_pi.detach()`), or the observations (their features, with an extractor)."""
    assert agent.lstm is not None  # a recurrent agent
    if agent.lstm.critic_cell:
        return outputs[1]
    return tf.stop_gradient(outputs[0]) if agent.lstm.shared else agent.lstm.features(obs)


def value_after(agent: Agent, obs: tf.Tensor, memory: tuple) -> tf.Tensor:
    """V(obs) continuing `memory` without a reset: the value of a finished episode's final observation."""
    if agent.lstm is None:
        return agent.critic(obs)
    if not (agent.lstm.critic_cell or agent.lstm.shared):
        return agent.critic(agent.lstm.features(obs))
    return agent.critic(_critic_input(agent, obs, agent.lstm(obs, memory)[0]))


def merge_steps(agent: Agent, params, order: tf.Tensor | None = None):
    """Replayed actor params [T, B, ...] -> [T * B, ...] (then the rows `order` picks, when given); gSDE's log-std
    (the same [L, A] at every step) stays one."""

    def merge(x: tf.Tensor) -> tf.Tensor:
        return merge_leading(x) if order is None else tf.gather(merge_leading(x), order)

    if agent.dist.state_dependent:
        mean, latent, log_std = params
        return merge(mean), merge(latent), log_std[0]
    return tf.nest.map_structure(merge, params)


def replay(
    agent: Agent,
    obs: tf.Tensor,
    episode_start: tf.Tensor,
    memory: tuple,
    restart: tf.Tensor | None = None,
    stored: tuple = (),
):
    """`act_step` over sequences: obs [T, B, D], episode_start [T, B], memory at t = 0 -> (params [T, B, ...],
    values [T, B], memories after each step [T, ...]). With `restart` (bool [T, B]) and `stored` (memories
    [T, B, units]), a step where `restart` starts from the stored memory instead of the carried one (a window of
    rollout rows that enters another env's steps); its episode-start reset still applies."""

    def step(carry, inputs):
        if restart is not None:
            carry = tuple(tf.where(inputs[2][:, None], s, c) for s, c in zip(inputs[3], carry))
        params, value, carry = act_step(agent, inputs[0], carry, inputs[1])
        return carry, (params, value, carry)

    _, outputs = scan(step, memory, (obs, episode_start) if restart is None else (obs, episode_start, restart, stored))
    return outputs


def make_agent(
    spec: AgentSpec,
    observation_dim: int,
    action_space: gym.spaces.Space,
    lstm_biases: int = 2,
    features_extractor: Callable[[], keras.layers.Layer] | None = None,
    share_features_extractor: bool | None = None,
    observation_space: gym.spaces.Space | None = None,
) -> Agent:
    """Networks for flat observations of `observation_dim` and `action_space`, initialized from `spec.seed`, and
    the optimizer `spec` names (default Adam, epsilon 1e-5, as SB3 and purejaxrl; Keras' or torch's update,
    `spec.adam_style`) with its slots built. `lstm_biases=1`: a recurrent agent's cells in the one-bias layout of
    agents saved before (`read_any_cells`). `features_extractor`: a zero-argument factory of a Keras layer the
    networks read the observations through (a user's Keras layer, `kppo.agent.extractors.extractor_factory`);
    without it, the one `spec.features_extractor` names for `observation_space` (needed then). One layer for both
    networks when `share_features_extractor` (default `spec.share_features_extractor`)."""
    if features_extractor is None and observation_space is not None:
        features_extractor = spec_extractor(spec, observation_space)
    elif features_extractor is None and spec.features_extractor != "flatten":
        raise ValueError(
            f"observation_space: expected the observation space for features_extractor={spec.features_extractor!r}, "
            f"got None"
        )
    share = spec.share_features_extractor if share_features_extractor is None else share_features_extractor
    extractors = make_extractors(features_extractor, share)
    input_dim = observation_dim if extractors[0] is None else features_dim(extractors[0], observation_dim)
    widths = spec.actor_widths
    latent_dim = widths[-1] if widths else (spec.lstm_hidden_size if spec.recurrent else input_dim)
    dist = make_distribution(
        action_space,
        spec.squash,
        spec.use_sde,
        latent_dim,
        spec.full_std,
        spec.box_actions == "rescale",
        spec.use_expln,
    )
    if spec.action_masks and not dist.mask_size:  # sb3-contrib's MaskablePPO asserts its supported spaces
        raise ArgumentError(
            f"action_masks: expected a Discrete, MultiDiscrete or MultiBinary action space, got {action_space} (The "
            f"algorithm only supports those as action spaces)"
        )
    actor, critic, memory = make_networks(spec, observation_dim, dist, spec.seed, lstm_biases, extractors)
    optimizer = make_optimizer(spec.adam_style, spec.learning_rate, spec.optimizer)
    agent = Agent(dist, actor, critic, optimizer, memory)
    optimizer.build(agent.variables)
    return agent


def with_weights(agent: Agent, params: list, fn: Callable[[], Any]) -> Any:
    """`fn()` with the agent's networks reading `params` (tensors, in `agent.variables` order) instead of their
    variables (Keras' StatelessScope: nothing is assigned); how a population runs rollouts and updates on the weights
    of one member."""
    with keras.StatelessScope(state_mapping=list(zip(agent.variables, params))):
        return fn()


def make_policy(
    agent: Agent,
    obs_stats: Moments,
    spec: AgentSpec,
    observation_space: gym.spaces.Space,
    action_space: gym.spaces.Space,
) -> Policy:
    """The agent's actor with frozen observation statistics (numpy copies: later training does not change it),
    normalized as `spec` trained it (`normalize_obs`, its keys, `clip_obs`, `norm_epsilon`); trained with
    `spec.action_masks`, its artifacts take a mask."""
    columns = normalized_columns(observation_space, spec.normalize_obs_keys)
    scaling = ObsScaling(
        np.asarray(obs_stats.mean),
        np.asarray(obs_stats.var),
        spec.normalize_obs,
        float(spec.clip_obs),
        float(spec.norm_epsilon),
        columns,
    )
    lstm = agent.lstm.actor_lstm() if agent.lstm is not None else None
    return Policy(agent.actor, agent.dist, scaling, observation_space, action_space, spec.action_masks, lstm)


def build_agent(
    spec: AgentSpec,
    observation_space: gym.spaces.Space,
    action_space: gym.spaces.Space,
    features_extractor: Callable[[], keras.layers.Layer] | None = None,
    strategy: Any = None,
) -> Agent:
    """The one builder of a run's agent (every runner, population member, `kppo.PPO`, SB3 saves and `load_agent`):
    `make_agent` for `observation_space` read flat (`gym_envs.spaces.flat_dim`) and `action_space`, initial weights
    from `spec.seed`; with a tf.distribute `strategy`, its variables created in the strategy's scope (mirrored)."""
    with strategy.scope() if strategy is not None else contextlib.nullcontext():
        return make_agent(
            spec,
            flat_dim(observation_space),
            action_space,
            features_extractor=features_extractor,
            observation_space=observation_space,
        )


def read_any_cells(read: Callable[[Agent], Any], agent: Agent, spec: AgentSpec, action_space: gym.spaces.Space) -> Any:
    """`read(agent)` (a restore into `agent`); for a recurrent agent whose files hold one bias per LSTM cell (kppo
    before its two-bias, torch-like cells), `read` into a one-bias twin, moved into `agent` (`move_one_bias_cells`).
    A file that fits neither layout raises the two-bias layout's ValueError."""
    try:
        return read(agent)
    except ValueError as err:
        if agent.lstm is None or agent.lstm.num_layers > 1:  # one-bias cells were one layer deep
            raise
        twin = make_agent(spec, int(agent.lstm.cells[0].kernel.shape[0]), action_space, lstm_biases=1)
        try:
            result = read(twin)
        except ValueError:
            raise err from None
        move_one_bias_cells(twin, agent)
        return result


def move_one_bias_cells(legacy: Agent, agent: Agent) -> None:
    """Copies an agent whose LSTM cells have one bias (`legacy`) into `agent`, whose cells have torch's two: the old
    bias becomes `input_bias` and `recurrent_bias` starts at zero, so the cells compute what they computed; Adam's
    moments move with their weights (zero for the new bias), and its step count and learning rate come along."""
    old_adam = adam_state_of(legacy.optimizer, legacy.variables)
    old = iter(zip(legacy.variables, old_adam.m, old_adam.v))
    m, v = [], []
    for variable in agent.variables:
        if variable.path.endswith("recurrent_bias"):
            value = first = second = tf.zeros_like(variable)
        else:
            value, first, second = next(old)
        variable.assign(value)
        m.append(first)
        v.append(second)
    assign_adam_state(agent.optimizer, agent.variables, AdamState(m, v, old_adam.steps))
    agent.optimizer.learning_rate.assign(legacy.optimizer.learning_rate)
