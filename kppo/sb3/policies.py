"""`model.policy` as Stable-Baselines3's `ActorCriticPolicy` surface over kppo's Keras networks, with tensors as
`tf.Tensor` where SB3 has torch tensors.

    predict(observation, state, episode_start, deterministic)   -> (actions in env units, state)
    forward(obs, deterministic=False)                           -> (actions, values [N, 1], log_prob [N])
    evaluate_actions(obs, actions)                              -> (values [N, 1], log_prob [N], entropy [N])
    get_distribution(obs)                                       -> Distribution (sample, mode, log_prob, entropy,
                                                                   get_actions(deterministic))
    predict_values(obs)                                         -> values [N, 1]
    obs_to_tensor(observation)                                  -> (obs [N, ...] float32, vectorized)
    set_training_mode(mode), reset_noise(n_envs)                    (gSDE's exploration matrices)
    net_arch, features_extractor, action_net, value_net, optimizer, observation_space, action_space
    state_dict() / load_state_dict(d)                           SB3's parameter names and torch's layouts, numpy

`obs` are what `model.predict` takes (the env's observations); the model's frozen normalization, if any, is applied
inside, as kppo keeps VecNormalize's statistics in the model. Actions out of `forward` / `get_distribution` are the
distribution's (a Gaussian's unclipped sample, a Discrete index), as SB3's. kppo's own policy (numpy acting, export)
is `model.kppo_policy`.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from kppo._tf import tf
from kppo.agent.agent import actor_critic, feature_extractors
from kppo.core.errors import ArgumentError
from kppo.sb3.saves.sb3_weights import assign_sb3_weights, sb3_state_dict
from kppo.sb3.utils import maybe_transpose

__all__ = ["ActorCriticPolicy", "Distribution"]


class Distribution:
    """SB3's `Distribution` at one batch of observations: `sample`, `mode`, `log_prob`, `entropy`, `get_actions`."""

    def __init__(self, dist: Any, params: Any, noise: tf.Tensor | None, key: tf.Tensor):
        self.dist, self.params, self._noise, self._key = dist, params, noise, key

    def sample(self) -> tf.Tensor:
        self._key = tf.random.experimental.stateless_split(self._key, 1)[0]
        return self.dist.sample(self.params, self._key, self._noise)

    def mode(self) -> tf.Tensor:
        return self.dist.mode(self.params)

    def get_actions(self, deterministic: bool = False) -> tf.Tensor:
        return self.mode() if deterministic else self.sample()

    def log_prob(self, actions: Any) -> tf.Tensor:
        return self.dist.log_prob(self.params, tf.convert_to_tensor(actions, self.dist.action_dtype))

    def entropy(self) -> tf.Tensor | None:
        """The entropy per observation; None for gSDE with a squashed output, as SB3 (no closed form)."""
        if getattr(self.dist, "squash", False):
            return None
        return self.dist.entropy(self.params)


class ActorCriticPolicy:
    """SB3's policy surface of a `kppo.PPO` (see the module docstring)."""

    def __init__(self, model: Any):
        self._model = model
        self.training = True
        self._noise: tf.Tensor | None = None
        self._key = tf.constant([int(model.seed) % 2**31, 7], tf.int32)

    # --- what SB3's policy holds ---
    @property
    def _agent(self) -> Any:
        return self._model._require_agent("policy")

    @property
    def observation_space(self) -> gym.spaces.Space:
        return self._model.observation_space

    @property
    def action_space(self) -> gym.spaces.Space:
        return self._model.action_space

    @property
    def net_arch(self) -> dict[str, list[int]]:
        config = self._model.config
        return dict(pi=list(config.actor_hidden_units), vf=list(config.critic_hidden_units))

    @property
    def features_extractor(self) -> Any:
        """The actor's features extractor (a Keras layer; shared with the critic unless
        `share_features_extractor=False`; a recurrent policy's LSTMs read it), or None for flat observations (SB3's
        FlattenExtractor)."""
        return feature_extractors(self._agent)[0]

    @property
    def action_net(self) -> Any:
        return self._agent.actor.head

    @property
    def value_net(self) -> Any:
        return self._agent.critic.head

    @property
    def optimizer(self) -> Any:
        return self._agent.optimizer

    def set_training_mode(self, mode: bool) -> None:
        """SB3's train / eval switch; kppo's networks have no dropout or batch norm, so it only records `mode`."""
        self.training = bool(mode)

    def reset_noise(self, n_envs: int = 1) -> None:
        """New gSDE exploration matrices for `n_envs` envs (SB3 asserts gSDE)."""
        dist = self._agent.dist
        if not dist.state_dependent:
            raise ArgumentError("reset_noise() is only available when using gSDE")
        self._key = tf.random.experimental.stateless_split(self._key, 1)[0]
        self._noise = dist.new_noise((None, None, self._agent.actor.sde_log_std), self._key, int(n_envs))

    # --- computations ---
    def obs_to_tensor(self, observation: Any) -> tuple[tf.Tensor, bool]:
        """(the networks' input [N, ...] float32, normalized with the model's statistics; whether `observation` was
        a batch)."""
        policy = self._model.kppo_policy
        batch, single = policy._batched(maybe_transpose(observation, self.observation_space))
        return policy.normalize(tf.constant(batch)), not single

    def _outputs(self, obs: Any) -> tuple[Any, tf.Tensor]:
        agent = self._agent
        if agent.lstm is not None:
            raise ValueError(
                "policy: expected an MLP or CNN policy; a recurrent policy steps with its LSTM state: use "
                "model.predict(obs, state, episode_start)"
            )
        tensor, _ = self.obs_to_tensor(obs)
        params, values = actor_critic(agent, tensor)
        return params, values

    def _distribution(self, params: Any, rows: int) -> Distribution:
        noise = self._noise if self._noise is not None and int(self._noise.shape[0]) == rows else None
        self._key = tf.random.experimental.stateless_split(self._key, 1)[0]
        return Distribution(self._agent.dist, params, noise, self._key)

    def get_distribution(self, obs: Any) -> Distribution:
        """SB3's `get_distribution`: the action distribution at `obs` (gSDE: with the matrices of `reset_noise`)."""
        params, values = self._outputs(obs)
        return self._distribution(params, int(values.shape[0]))

    def predict_values(self, obs: Any) -> tf.Tensor:
        """The critic's values at `obs`, [N, 1]."""
        _, values = self._outputs(obs)
        return tf.reshape(values, [-1, 1])

    def forward(self, obs: Any, deterministic: bool = False) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        """(actions drawn, or the mode when `deterministic`; values [N, 1]; their log-probabilities [N])."""
        params, values = self._outputs(obs)
        distribution = self._distribution(params, int(values.shape[0]))
        actions = distribution.get_actions(deterministic)
        return actions, tf.reshape(values, [-1, 1]), distribution.log_prob(actions)

    __call__ = forward

    def evaluate_actions(self, obs: Any, actions: Any) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor | None]:
        """(values [N, 1], log-probabilities of `actions` [N], entropy [N] or None) at `obs`, as the loss reads them."""
        params, values = self._outputs(obs)
        dist = self._agent.dist
        rows = int(values.shape[0])
        stored = np.asarray(actions).reshape((rows, *dist.action_shape))
        distribution = self._distribution(params, rows)
        return tf.reshape(values, [-1, 1]), distribution.log_prob(stored), distribution.entropy()

    def predict(self, observation: Any, state: Any = None, episode_start: Any = None, deterministic: bool = False):
        """SB3's `policy.predict`: the model's `predict` (actions in env units, and the recurrent state)."""
        return self._model.predict(observation, state, episode_start, deterministic)

    # --- parameters ---
    def state_dict(self) -> dict[str, np.ndarray]:
        """SB3's `policy.state_dict()` as numpy: SB3's names, torch's layouts (`kppo.sb3.saves.sb3_weights`)."""
        return sb3_state_dict(self._agent)

    def load_state_dict(self, state_dict: dict[str, Any], strict: bool = True) -> None:
        """Assigns SB3's `state_dict` (numpy arrays, or anything with `.numpy()` or `__array__`); checked first,
        nothing assigned on a one-line error. `strict=False` is refused: every kppo variable needs a tensor."""
        if not strict:
            raise ValueError(
                "strict: expected True (every kppo variable takes one tensor of the state_dict), got False"
            )
        arrays = {name: np.asarray(getattr(v, "numpy", lambda v=v: v)()) for name, v in state_dict.items()}
        assign_sb3_weights(self._agent, arrays, "state_dict")
        self._model._policy = None  # the next predict acts with the new weights
