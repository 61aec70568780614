"""The action distribution, chosen once from the action space (SB3's `make_proba_distribution` idea).

Rollout, losses and the policy call only this interface, never branch on the action type:

    params = actor(obs)                      # what the actor head outputs, see `param_size`
    action = dist.sample(params, key)        # the stored action (Gaussian: pre-squash u)
    dist.log_prob(params, action), dist.entropy(params), dist.mode(params)
    env_action = dist.to_env(action)         # env units

Action masks (Discrete, MultiDiscrete and MultiBinary, as sb3-contrib's MaskablePPO): `masked(params, mask)` sets the
logits of invalid actions to `MASKED_LOGIT` (bool mask [..., mask_size], True = allowed; MultiDiscrete: the
dimensions' masks concatenated; MultiBinary: [may be 0, may be 1] per bit), so sampling never picks them, their
probability is exactly 0 and they add nothing to the entropy.
A mask of width 0 (`no_mask`) leaves the parameters as they are: what unmasked runs carry.

The host rollout acts in numpy, without a TensorFlow call per step, through the `*_host` twins of `sample`,
`new_noise`, `mode` and `to_env` (numpy arrays in and out, a `np.random.Generator` for randomness); log-probabilities
of those actions are then computed in TensorFlow, for the whole rollout at once.

Box actions of any shape are flattened (C order) for the networks and the stored actions, and `to_env` reshapes them
to the Box's shape in its dtype. They are always normalized: the policy acts in [-1, 1] per element and `to_env` maps
u -> low + (f(u) + 1) / 2 * (high - low) with f = tanh (squash) or clip to [-1, 1]; or, with `rescale=False` (SB3's
unsquashed PPO, CleanRL, purejaxrl), u clipped to [low, high]. The Gaussian's log-prob and
entropy are those of u (rex semantics: no tanh correction, the stored sample is u).
"""

from __future__ import annotations

import abc

import gymnasium as gym
import numpy as np
import tensorflow_probability as tfp

from kppo._tf import tf
from kppo.core import counter_rng
from kppo.core.errors import ArgumentError, NotSupportedError

tfd = tfp.distributions

#: The logit of a masked action (sb3-contrib's HUGE_NEG): exp(-1e8 - max) is exactly 0 in float32, and unlike -inf it
#: keeps 0 * log(0) terms (entropy) at 0 instead of NaN.
MASKED_LOGIT = -1e8


class ActionDistribution(abc.ABC):
    """Interface between an actor's outputs and actions."""

    #: Outputs of the actor head (logits, or Gaussian means).
    param_size: int
    #: Whether the actor also outputs a log-std (Gaussian).
    has_log_std: bool = False
    #: Whether the actor outputs gSDE parameters (mean, latent features, log-std matrix).
    state_dependent: bool = False
    #: Shape of one stored action, and its dtype.
    action_shape: tuple[int, ...]
    action_dtype: tf.DType
    #: Width of an action mask (the logits' width for Discrete and MultiDiscrete; 0: masks are not supported).
    mask_size: int = 0

    def masked(self, params, mask: tf.Tensor | None):
        """`params` with the logits of actions where `mask` is False set to `MASKED_LOGIT`; unchanged for a None or
        width-0 mask."""
        if mask is None or mask.shape[-1] == 0:
            return params
        return tf.where(tf.cast(mask, tf.bool), params, tf.constant(MASKED_LOGIT, params.dtype))

    def masked_np(self, params, mask: np.ndarray | None):
        """`masked` in numpy."""
        if mask is None or mask.shape[-1] == 0:
            return params
        return np.where(mask, params, np.float32(MASKED_LOGIT)).astype(np.float32, copy=False)

    def no_mask(self, batch_shape) -> tf.Tensor:
        """The width-0 mask of unmasked runs, bool [*batch_shape, 0]."""
        return tf.zeros([*batch_shape, 0], tf.bool)

    @abc.abstractmethod
    def distribution(self, params) -> tfp.distributions.Distribution:
        """The TFP distribution over stored actions (event shape = action_shape)."""

    @abc.abstractmethod
    def sample(self, params, key: tf.Tensor, noise: tf.Tensor | None = None) -> tf.Tensor:
        """A sample drawn from `key` (int32 [2]) with `kppo.core.counter_rng`, so it is the same under XLA and in TF
        kernels. `noise` (from `new_noise`) is used by gSDE only."""

    def noise_shape(self, num_envs: int) -> list[int]:
        """Shape of the exploration noise carried through a rollout: empty except for gSDE."""
        del num_envs
        return [0]

    def new_noise(self, params, key: tf.Tensor, num_envs: int) -> tf.Tensor:
        """Fresh exploration noise (gSDE's per-env exploration matrices); an empty tensor otherwise."""
        del params, key
        return tf.zeros(self.noise_shape(num_envs))

    def log_prob(self, params, action: tf.Tensor) -> tf.Tensor:
        return self.distribution(params).log_prob(action)

    def entropy(self, params) -> tf.Tensor:
        return self.distribution(params).entropy()

    @abc.abstractmethod
    def mode(self, params) -> tf.Tensor:
        """Deterministic action (stored-action units)."""

    @abc.abstractmethod
    def to_env(self, action: tf.Tensor) -> tf.Tensor:
        """Maps stored actions to env units."""

    def to_env_flat(self, action: tf.Tensor) -> tf.Tensor:
        """`to_env` before a Box's reshape and cast: [..., param_size] float32 (what exported artifacts output)."""
        return self.to_env(action)

    @abc.abstractmethod
    def sample_np(self, params, rng: np.random.Generator, noise: np.ndarray | None = None) -> np.ndarray:
        """`sample` in numpy (the same distribution; other random numbers)."""

    def new_noise_np(self, params, rng: np.random.Generator, num_envs: int) -> np.ndarray:
        """`new_noise` in numpy."""
        del params, rng
        return np.zeros(self.noise_shape(num_envs), np.float32)

    @abc.abstractmethod
    def mode_np(self, params) -> np.ndarray:
        """`mode` in numpy."""

    @abc.abstractmethod
    def to_env_np(self, action: np.ndarray) -> np.ndarray:
        """`to_env` in numpy."""


def _gumbel_max(logits: tf.Tensor, key: tf.Tensor) -> tf.Tensor:
    """One categorical draw per row of `logits` [..., n] (Gumbel-max), int32."""
    return tf.argmax(logits + counter_rng.gumbel(key, tf.shape(logits)), axis=-1, output_type=tf.int32)


def _gumbel_argmax(logits: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One categorical draw per row of `logits` [..., n] (Gumbel-max), int32."""
    return np.argmax(logits + rng.gumbel(size=logits.shape), axis=-1).astype(np.int32)


class Categorical(ActionDistribution):
    """Discrete(n) actions (with `start`): int32 index, logits from the actor."""

    def __init__(self, space: gym.spaces.Discrete):
        self.param_size = self.mask_size = int(space.n)
        self.start = int(space.start)
        self.action_shape = ()
        self.action_dtype = tf.int32

    def distribution(self, params):
        return tfd.Categorical(logits=params, dtype=tf.int32)

    def sample(self, params, key, noise=None):
        del noise
        return _gumbel_max(params, key)

    def mode(self, params):
        return tf.argmax(params, axis=-1, output_type=tf.int32)

    def to_env(self, action):
        return action + self.start

    def sample_np(self, params, rng, noise=None):
        return _gumbel_argmax(params, rng)

    def mode_np(self, params):
        return np.argmax(params, axis=-1).astype(np.int32)

    def to_env_np(self, action):
        return action + self.start


class DiagGaussian(ActionDistribution):
    """Box actions of any shape: independent Normal per element over u (flattened in C order: the networks and the
    stored actions are [..., prod(shape)]), mapped to [low, high] by tanh or clipping, then reshaped to the Box's
    shape and cast to its dtype (`to_env`, `to_env_np`; a float64 Box gets float64 actions, as the env expects)."""

    has_log_std = True

    def __init__(self, space: gym.spaces.Box, squash: bool, rescale: bool = True):
        if not (np.all(np.isfinite(space.low)) and np.all(np.isfinite(space.high))):
            raise ArgumentError(f"action_space: expected a bounded Box (actions are normalized), got {space}")
        self.env_shape = tuple(int(n) for n in space.shape)
        self.param_size = int(np.prod(self.env_shape, dtype=np.int64))
        self.action_shape = (self.param_size,)
        self.action_dtype = tf.float32
        self.squash, self.rescale = bool(squash), bool(rescale)
        # env units: the Box's float dtype (float32 for an integer Box, whose values the env's own cast rounds)
        self.env_dtype = np.dtype(space.dtype) if np.issubdtype(space.dtype, np.floating) else np.dtype(np.float32)
        low, high = np.asarray(space.low).reshape(-1), np.asarray(space.high).reshape(-1)
        self.low = tf.constant(low, tf.float32)
        self.high = tf.constant(high, tf.float32)
        self.low_np, self.high_np = low.astype(self.env_dtype), high.astype(self.env_dtype)

    def distribution(self, params):
        mean, log_std = params
        return tfd.Independent(tfd.Normal(mean, tf.exp(log_std)), reinterpreted_batch_ndims=1)

    def mode(self, params):
        return params[0]

    def sample(self, params, key, noise=None):
        del noise
        mean, log_std = params
        return mean + tf.exp(log_std) * counter_rng.normal(key, tf.shape(mean))

    def _shaped(self, action: tf.Tensor) -> tf.Tensor:
        """Flat env actions [..., A] -> [..., *env_shape] in the Box's dtype (unchanged for a 1-D float32 Box)."""
        if len(self.env_shape) != 1:
            action = tf.reshape(action, tf.concat([tf.shape(action)[:-1], self.env_shape], axis=0))
        return action if self.env_dtype == np.float32 else tf.cast(action, self.env_dtype)

    def to_env_flat(self, action):
        if not self.rescale:
            return tf.clip_by_value(action, self.low, self.high)
        unit = tf.tanh(action) if self.squash else tf.clip_by_value(action, -1.0, 1.0)
        return self.low + (unit + 1.0) * 0.5 * (self.high - self.low)

    def to_env(self, action):
        return self._shaped(self.to_env_flat(action))

    def sample_np(self, params, rng, noise=None):
        mean, log_std = params
        return mean + np.exp(log_std) * rng.standard_normal(mean.shape, dtype=np.float32)

    def mode_np(self, params):
        return params[0]

    def to_env_np(self, action):
        """`to_env` in numpy, computed in the Box's dtype (a float64 Box's bounds exactly)."""
        action = np.asarray(action, self.env_dtype)
        if not self.rescale:
            env = np.clip(action, self.low_np, self.high_np)
        else:
            unit = np.tanh(action) if self.squash else np.clip(action, -1.0, 1.0)
            env = self.low_np + (unit + 1.0) * 0.5 * (self.high_np - self.low_np)
        return env.reshape(*env.shape[:-1], *self.env_shape)


#: SB3's epsilon inside expln's log1p (StateDependentNoiseDistribution.epsilon).
EXPLN_EPSILON = 1e-6


class StateDependentNoise(DiagGaussian):
    """generalized State-Dependent Exploration (gSDE; Raffin et al. 2021, https://arxiv.org/abs/2005.05719), as
    SB3's `StateDependentNoiseDistribution` with learn_features=False; `use_expln` as SB3's (the std is exp(log_std)
    for log_std <= 0 and log1p(log_std + 1e-6) + 1 above, so it grows slowly).

    params = (mean [B, A], latent [B, L], log_std [L, A] or [L, 1] when not full_std). The exploration noise is
    a = mean + latent @ eps_b with eps_b ~ N(0, exp(log_std)^2) per env b, redrawn every `sde_sample_freq` steps;
    the policy density is N(mean, latent^2 @ exp(log_std)^2 + 1e-6) (latent not differentiated).
    """

    state_dependent = True
    has_log_std = False

    def __init__(
        self,
        space: gym.spaces.Box,
        squash: bool,
        latent_dim: int,
        full_std: bool = True,
        rescale: bool = True,
        use_expln: bool = False,
    ):
        super().__init__(space, squash, rescale)
        self.latent_dim = int(latent_dim)
        self.full_std = bool(full_std)
        self.use_expln = bool(use_expln)

    def _std(self, log_std: tf.Tensor) -> tf.Tensor:
        if self.use_expln:
            above = tf.math.log1p(tf.maximum(log_std, 0.0) + EXPLN_EPSILON) + 1.0
            std = tf.where(log_std <= 0.0, tf.exp(tf.minimum(log_std, 0.0)), above)
        else:
            std = tf.exp(log_std)
        return std * tf.ones([self.latent_dim, self.param_size])  # [L, A]

    def _policy_std(self, params) -> tf.Tensor:
        """The policy density's std [B, A]: sqrt(latent^2 @ std^2 + 1e-6), latent not differentiated."""
        _, latent, log_std = params
        return tf.sqrt(tf.matmul(tf.square(tf.stop_gradient(latent)), tf.square(self._std(log_std))) + 1e-6)

    def distribution(self, params):
        return tfd.Independent(tfd.Normal(params[0], self._policy_std(params)), reinterpreted_batch_ndims=1)

    def noise_shape(self, num_envs: int) -> list[int]:
        return [num_envs, self.latent_dim, self.param_size]

    def new_noise(self, params, key, num_envs):
        return counter_rng.normal(key, self.noise_shape(num_envs)) * self._std(params[2])

    def sample(self, params, key, noise=None):
        mean, latent, _ = params
        if noise is None:
            return mean + self._policy_std(params) * counter_rng.normal(key, tf.shape(mean))
        return mean + tf.einsum("bl,bla->ba", latent, noise)

    def _std_np(self, log_std: np.ndarray) -> np.ndarray:
        if self.use_expln:
            above = np.log1p(np.maximum(log_std, 0.0) + EXPLN_EPSILON) + 1.0
            std = np.where(log_std <= 0.0, np.exp(np.minimum(log_std, 0.0)), above).astype(np.float32)
        else:
            std = np.exp(log_std)
        return std * np.ones([self.latent_dim, self.param_size], np.float32)

    def new_noise_np(self, params, rng, num_envs):
        return rng.standard_normal(self.noise_shape(num_envs), dtype=np.float32) * self._std_np(params[2])

    def sample_np(self, params, rng, noise=None):
        mean, latent, log_std = params
        if noise is None:
            std = np.sqrt(np.square(latent) @ np.square(self._std_np(log_std)) + 1e-6)
            return mean + std * rng.standard_normal(mean.shape, dtype=np.float32)
        return mean + np.einsum("bl,bla->ba", latent, noise)


class MultiCategorical(ActionDistribution):
    """MultiDiscrete(nvec) actions: one independent categorical per dimension (logits concatenated), log-probs and
    entropies summed. Stored action: int32 [..., len(nvec)] index per dimension; env action adds `start`."""

    def __init__(self, space: gym.spaces.MultiDiscrete):
        if len(space.nvec.shape) != 1:
            raise NotSupportedError(
                f"action_space: expected a 1-D MultiDiscrete, got nvec of shape {space.nvec.shape}; flatten it"
            )
        self.sizes = [int(n) for n in space.nvec]
        self.param_size = self.mask_size = sum(self.sizes)
        self.action_shape = (len(self.sizes),)
        self.action_dtype = tf.int32
        self.start = tf.constant(np.asarray(space.start, np.int32))
        self.start_host = np.asarray(space.start, np.int32)

    def _parts(self, params):
        return [tfd.Categorical(logits=p, dtype=tf.int32) for p in tf.split(params, self.sizes, axis=-1)]

    def distribution(self, params):
        return tfd.Blockwise(self._parts(params))

    def sample(self, params, key, noise=None):
        del noise
        keys = tf.unstack(counter_rng.split(key, len(self.sizes)))
        return tf.stack([_gumbel_max(p, k) for p, k in zip(tf.split(params, self.sizes, axis=-1), keys)], axis=-1)

    def log_prob(self, params, action):
        parts = zip(self._parts(params), tf.unstack(action, axis=-1))
        return tf.add_n([d.log_prob(a) for d, a in parts])

    def entropy(self, params):
        return tf.add_n([d.entropy() for d in self._parts(params)])

    def mode(self, params):
        return tf.stack([tf.argmax(p, axis=-1, output_type=tf.int32) for p in tf.split(params, self.sizes, -1)], -1)

    def to_env(self, action):
        return action + self.start

    def _split_np(self, params: np.ndarray) -> list[np.ndarray]:
        return np.split(params, np.cumsum(self.sizes)[:-1], axis=-1)

    def sample_np(self, params, rng, noise=None):
        return np.stack([_gumbel_argmax(p, rng) for p in self._split_np(params)], axis=-1)

    def mode_np(self, params):
        return np.stack([np.argmax(p, axis=-1).astype(np.int32) for p in self._split_np(params)], axis=-1)

    def to_env_np(self, action):
        return action + self.start_host


class Bernoulli(ActionDistribution):
    """MultiBinary(n) actions: independent Bernoulli per bit, logits from the actor. Stored action: int32 [..., n].

    Action masks as sb3-contrib's MaskableBernoulliDistribution takes them: 2 entries per bit, [bit may be 0, bit may
    be 1] (mask_size = 2n). A bit allowed only one value gets the logit -+`MASKED_LOGIT` (probability exactly 1 of
    that value, entropy 0); a bit with both allowed keeps its logit. sb3-contrib parametrizes each bit by two logits
    (a 2-way categorical); kppo keeps one logit per bit, the same distributions."""

    def __init__(self, space: gym.spaces.MultiBinary):
        shape = tuple(np.atleast_1d(space.n))
        if len(shape) != 1:
            raise ArgumentError(f"action_space: expected a 1-D MultiBinary, got shape {shape}")
        self.param_size = int(shape[0])
        self.mask_size = 2 * self.param_size
        self.action_shape = (self.param_size,)
        self.action_dtype = tf.int32

    def masked(self, params, mask):
        if mask is None or mask.shape[-1] == 0:
            return params
        pairs = tf.reshape(tf.cast(mask, tf.bool), tf.concat([tf.shape(mask)[:-1], [self.param_size, 2]], axis=0))
        only_one = pairs[..., 1] & ~pairs[..., 0]
        only_zero = pairs[..., 0] & ~pairs[..., 1]
        big = tf.constant(-MASKED_LOGIT, params.dtype)
        return tf.where(only_one, big, tf.where(only_zero, -big, params))

    def masked_np(self, params, mask):
        if mask is None or mask.shape[-1] == 0:
            return params
        pairs = np.asarray(mask, bool).reshape(*mask.shape[:-1], self.param_size, 2)
        out = np.where(pairs[..., 1] & ~pairs[..., 0], np.float32(-MASKED_LOGIT), params)
        return np.where(pairs[..., 0] & ~pairs[..., 1], np.float32(MASKED_LOGIT), out).astype(np.float32, copy=False)

    def distribution(self, params):
        return tfd.Independent(tfd.Bernoulli(logits=params, dtype=tf.int32), reinterpreted_batch_ndims=1)

    def mode(self, params):
        return tf.cast(params > 0, tf.int32)

    def sample(self, params, key, noise=None):
        del noise
        return tf.cast(counter_rng.uniform(key, tf.shape(params)) < tf.sigmoid(params), tf.int32)

    def to_env(self, action):
        return action

    def sample_np(self, params, rng, noise=None):
        return (rng.logistic(size=params.shape) < params).astype(np.int32)  # P(L < x) = sigmoid(x)

    def mode_np(self, params):
        return (params > 0).astype(np.int32)

    def to_env_np(self, action):
        return action


def make_distribution(
    action_space: gym.spaces.Space,
    squash: bool = False,
    use_sde: bool = False,
    latent_dim: int = 0,
    full_std: bool = True,
    rescale: bool = True,
    use_expln: bool = False,
) -> ActionDistribution:
    """Picks the distribution for `action_space` (ValueError naming the space if unsupported).

    Args:
        use_sde: gSDE exploration (Box only); `latent_dim` is the width of the actor's last hidden layer.
        rescale: Box actions map [-1, 1] to [low, high] (else the sample is clipped to [low, high]).
    """
    if use_sde:
        if not isinstance(action_space, gym.spaces.Box):
            raise ValueError(f"use_sde: gSDE needs a Box action space, got {action_space}")  # SB3: ValueError too
        return StateDependentNoise(action_space, squash, latent_dim, full_std, rescale, use_expln)
    if isinstance(action_space, gym.spaces.Discrete):
        return Categorical(action_space)
    if isinstance(action_space, gym.spaces.Box):
        return DiagGaussian(action_space, squash, rescale)
    if isinstance(action_space, gym.spaces.MultiDiscrete):
        return MultiCategorical(action_space)
    if isinstance(action_space, gym.spaces.MultiBinary):
        return Bernoulli(action_space)
    raise ArgumentError(f"action_space: expected Box, Discrete, MultiDiscrete or MultiBinary, got {action_space}")
