"""`Policy`: the trained actor with observation normalization and action scaling (rex's Policy).

get_action(obs) = to_env(mode_or_sample(actor(clip((obs - mean) / sqrt(var + 1e-8), -10, 10))))

`get_action`, `predict` and `step` act in numpy, from a snapshot of the actor's weights (`kppo.agent.numpy_actor`,
what the host rollout acts with): a TensorFlow call costs far more than the forward pass itself for one observation
and a 2x64 MLP (`docs/benchmarks/speed.md`, "Measurements behind the defaults"). The snapshot is taken at the first
of those calls and kept: a Policy acts with the weights it first acted with (`refresh()` takes a new snapshot). The
TensorFlow twins (`get_action_flat`, `step_flat`, `apply_actor`) read the actor's variables as they are; they are
the reference exported artifacts are checked against. Deterministic actions of both paths are the same (discrete:
identical; Box: float32 rounding, within 1e-6 of the action range).

Random numbers (stochastic actions): `rng` is None (deterministic), a `np.random.Generator` (drawn from), an int
seed s or a stateless key [k0, k1]: the actions are drawn from `np.random.default_rng([k0, k1])` (s -> [s, 0]; each
half as uint32; `kppo.agent.numpy_actor.key_rng`), so the same key gives the same actions. `predict` uses the key
[seed, n] for its n-th stochastic call (`seed`, `predict_calls`).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np

from kppo.core import normalization
from kppo._tf import tf
from kppo.core.distributions import ActionDistribution
from kppo.gym_envs.spaces import (
    encode_rows,
    flatten_obs,
    input_dim,
    input_rows,
    integer_input,
    is_encoded,
    is_image_space,
    layout,
    one_line,
)
from kppo.agent.features import actor_extractor
from kppo.agent.networks import Actor
from kppo.agent.numpy_actor import NumpyActor, key_rng, make_numpy_actor
from kppo.core.types import Moments


class ObsScaling(NamedTuple):
    """Frozen observation normalization: z = clip((obs - mean) / sqrt(var + epsilon), -clip, clip) if enabled, on
    the `columns` (bool [D]; None: all; `kppo.gym_envs.spaces.normalized_columns`: a Dict's images are not)."""

    mean: np.ndarray
    var: np.ndarray
    enabled: bool
    clip: float = normalization.CLIP
    epsilon: float = normalization.EPSILON
    columns: np.ndarray | None = None


class ActScaling(NamedTuple):
    """Box: env action = low + (f(u) + 1) / 2 * (high - low), f = tanh if squash else clip to [-1, 1]; without
    `rescale`, clip(u, low, high). Discrete: env action = index + start (low = high = None)."""

    low: np.ndarray | None
    high: np.ndarray | None
    squash: bool
    start: int = 0
    rescale: bool = True


class PredictKeys:
    """The keys of stochastic `predict` calls, counted once per model: [seed, n] for the n-th call."""

    def __init__(self, seed: int = 0):
        self.seed, self.calls = int(seed), 0

    def next(self) -> np.ndarray:
        self.calls += 1
        return np.array([self.seed, self.calls], np.int32)


def _generator(rng) -> np.random.Generator | None:
    """None (deterministic), a `np.random.Generator` as it is, or the generator of an int seed or key [2]."""
    if rng is None or isinstance(rng, np.random.Generator):
        return rng
    return key_rng(rng)


def _as_key(rng) -> tf.Tensor:
    """int seed, or a [2] int array (a stateless key) -> int32 [2] key."""
    if isinstance(rng, (int, np.integer)):
        return tf.constant([int(rng), 0], tf.int32)
    key = tf.cast(tf.convert_to_tensor(rng), tf.int32)
    if key.shape != (2,):
        raise ValueError(f"rng: expected an int seed or a key of shape [2], got shape {tuple(key.shape)}")
    return key


def _numbers(value, where: str) -> np.ndarray:
    """`value` as an array of bool, integer or float numbers; a one-line ValueError naming `where` otherwise (numpy
    would raise its own, naming neither the observation nor what it expected, or cast complex numbers silently)."""
    try:
        array = np.asarray(value)
    except (ValueError, TypeError) as err:  # ragged lists, objects numpy cannot hold as one array
        raise ValueError(f"{where}: expected an array of numbers, got {type(value).__name__} ({err})") from None
    if array.dtype.kind not in "biuf":
        raise ValueError(f"{where}: expected numbers (bool, integer or float), got dtype {array.dtype}")
    return array


def _check_shape(array: np.ndarray, space: gym.spaces.Space, single: bool, where: str) -> None:
    """One observation of `space` ([*shape]) or a batch ([N, *shape]); a one-line ValueError otherwise."""
    shape = tuple(space.shape)  # type: ignore[arg-type]  # a Box, Discrete, MultiDiscrete or MultiBinary
    if not single and (array.ndim != len(shape) + 1 or array.shape[1:] != shape):
        raise ValueError(f"{where}: expected shape {shape} or [N, *{shape}], got {array.shape}")


def _check_integers(space: gym.spaces.Space, batch) -> None:
    """The Discrete / MultiDiscrete / MultiBinary parts of a batch hold integers of their range; a one-line
    ValueError naming the part otherwise."""
    for part in layout(space):
        if part.kind == "Box":
            continue
        values = np.asarray(batch if part.key is None else batch[part.key], np.float64)
        values = values.reshape(len(values), part.raw.stop - part.raw.start)
        sizes = part.sizes or (2,) * values.shape[1]  # MultiBinary: 0 or 1
        starts = np.asarray(part.starts or (0,) * values.shape[1])
        where = "obs" if part.key is None else f"obs[{part.key!r}]"
        integral = np.isfinite(values).all() and np.array_equal(values, np.round(values))
        if not integral or ((values < starts) | (values >= starts + np.asarray(sizes))).any():
            sub = space if part.key is None else space[part.key]  # type: ignore[index]  # a Dict's part
            raise ValueError(
                f"{where}: expected integers in [start, start + n) of {one_line(sub)}, got "
                f"{one_line(values.reshape(-1)[:8].tolist())}"
            )


class Policy:
    """Acts in env units from raw observations; one observation [*obs_shape] or a batch [N, *obs_shape].

    Args:
        actor: the trained actor.
        dist: the action distribution of the action space.
        obs_scaling: frozen normalization statistics.
        observation_space: the gymnasium observation space of one env.
        action_space: the gymnasium action space of one env.
        action_masks: the policy was trained with action masks: `get_action` and `predict` take them (bool
            [n] or [N, n], True = allowed; MultiDiscrete: the dimensions' masks concatenated) and its artifacts have
            a mask input. A mask may be given to any Discrete or MultiDiscrete policy.
        lstm: a recurrent policy's LSTM cell (the actor's): `predict` carries its state as sb3-contrib's
            RecurrentPPO does ((h, c), each [layers, N, units], zeros where `episode_start`), and `get_action`
            (stateless) refuses it.
    """

    def __init__(
        self,
        actor: Actor,
        dist: ActionDistribution,
        obs_scaling: ObsScaling,
        observation_space: gym.spaces.Space,
        action_space: gym.spaces.Space,
        action_masks: bool = False,
        lstm=None,
    ):
        self.actor = actor
        self.lstm = lstm
        self._compiled_step = tf.function(self._step_graph, reduce_retracing=True)
        self.action_masks = bool(action_masks)
        self.dist = dist
        self.obs_scaling = obs_scaling
        self.observation_space = observation_space
        self.action_space = action_space
        self._stats = Moments(
            tf.constant(obs_scaling.mean, tf.float32), tf.constant(obs_scaling.var, tf.float32), tf.constant(1.0)
        )
        self._compiled_actor = tf.function(self._apply_actor, reduce_retracing=True)
        self._compiled_get_action = tf.function(self._get_action_graph, reduce_retracing=True)
        self._stats_np = normalization.to_numpy(Moments(obs_scaling.mean, obs_scaling.var, 1.0))
        self._numpy_actor: NumpyActor | None = None
        #: Stochastic `predict` calls draw from the key [seed, n] of the n-th call (`PredictKeys`); a model whose
        #: policy is rebuilt after training hands the same keys on, so its calls keep counting.
        self.keys = PredictKeys()

    @property
    def seed(self) -> int:
        return self.keys.seed

    @seed.setter
    def seed(self, value: int) -> None:
        self.keys.seed = int(value)

    @property
    def predict_calls(self) -> int:
        return self.keys.calls

    @property
    def numpy_actor(self) -> NumpyActor:
        """The numpy actor `get_action`, `predict` and `step` act with: a snapshot of the actor's weights, taken at
        the first use and kept until `refresh()`."""
        if self._numpy_actor is None:
            scaling = self.obs_scaling
            norm = normalization.Constants(clip_obs=scaling.clip, epsilon=scaling.epsilon)
            self._numpy_actor = make_numpy_actor(
                self.actor, self.dist, scaling.enabled, self.lstm, scaling.columns, norm
            )
        return self._numpy_actor

    def refresh(self) -> None:
        """Drops the weight snapshot: the next action is computed from the actor's weights as they are then (call it
        after changing the actor's weights in place; a new Policy does not need it)."""
        self._numpy_actor = None

    @property
    def act_scaling(self) -> ActScaling:
        if isinstance(self.action_space, gym.spaces.Box):
            return ActScaling(
                self.action_space.low,
                self.action_space.high,
                bool(getattr(self.dist, "squash", False)),
                rescale=bool(getattr(self.dist, "rescale", True)),
            )
        return ActScaling(None, None, False, int(getattr(self.action_space, "start", 0)))

    def normalize(self, obs: tf.Tensor) -> tf.Tensor:
        """Raw observations -> the networks' input: normalized with the frozen statistics and clipped (float32)."""
        if not self.obs_scaling.enabled:
            return tf.cast(obs, tf.float32)
        scaling = self.obs_scaling
        return normalization.normalize(self._stats, obs, scaling.clip, scaling.columns, scaling.epsilon)

    def _apply_actor(self, norm_obs: tf.Tensor, key: tf.Tensor | None, mask: tf.Tensor | None = None) -> tf.Tensor:
        return self._act(self.dist.masked(self.actor(norm_obs), mask), key)

    def _act(self, params, key: tf.Tensor | None) -> tf.Tensor:
        """The mode of the action distribution at `params`, or a draw with `key`."""
        return self.dist.mode(params) if key is None else self.dist.sample(params, key)

    def _batched(self, obs) -> tuple[np.ndarray, bool]:
        """One observation or a batch -> flat float32 [N, D] (Dict observations flattened in key order; Discrete and
        MultiDiscrete parts one-hot). One-line ValueErrors naming the observation for anything but numbers (strings,
        None, objects, complex numbers, ragged lists), another shape, and values of a Discrete, MultiDiscrete or
        MultiBinary part that are not its integers (their one-hot rows would be all zeros). NaN and infinite values
        of a Box pass through, as Stable-Baselines3's `predict` passes them (its networks then act on NaN)."""
        space = self.observation_space
        if isinstance(space, gym.spaces.Dict):
            if not isinstance(obs, dict) or set(obs) != set(space.keys()):
                raise ValueError(f"obs: expected a dict with keys {list(space.keys())}, got {type(obs).__name__}")
            values = {k: _numbers(obs[k], f"obs[{k!r}]") for k in space.keys()}
            single = all(values[k].shape == space[k].shape for k in space.keys())
            for k in space.keys():
                _check_shape(values[k], space[k], single, f"obs[{k!r}]")
            parts = {k: v[None] if single else v for k, v in values.items()}
            if len({len(v) for v in parts.values()}) > 1:
                counts = {k: len(v) for k, v in parts.items()}
                raise ValueError(f"obs: expected as many observations under every key, got {counts}")
            _check_integers(space, parts)
            return flatten_obs(space, parts), single
        array = _numbers(obs, "obs")
        assert space.shape is not None  # a Box, Discrete, MultiDiscrete or MultiBinary (checked at construction)
        single = array.shape == tuple(space.shape)
        _check_shape(array, space, single, "obs")
        batch = array[None] if single else array
        if is_encoded(space):
            _check_integers(space, batch)
            return flatten_obs(space, batch), single
        with np.errstate(over="ignore"):  # beyond float32's range: infinite, passed through as NaN is
            rows = batch.astype(np.float32)
        return rows.reshape(len(batch), int(np.prod(space.shape))), single  # [0, D] too

    def apply_actor(self, norm_obs, rng=None) -> np.ndarray:
        """Actor on normalized flat observations [D] or [N, D]: the unscaled action (Gaussian u, or index).
        Deterministic if rng is None."""
        batch = np.asarray(norm_obs, np.float32)
        single = batch.ndim == 1
        batch = batch[None] if single else batch
        key = None if rng is None else _as_key(rng)
        out = self._compiled_actor(tf.constant(batch), key).numpy()
        return out[0] if single else out

    def get_action(self, obs, rng=None, action_mask=None) -> np.ndarray:
        """Raw observation(s) -> action(s) in env units, computed in numpy (see the module docstring).
        Deterministic (mean / argmax) if rng is None, else drawn with `rng` (a `np.random.Generator`, an int seed
        or a key [2]); only among the actions `action_mask` allows when given."""
        if self.lstm is not None:
            raise ValueError(
                "get_action: a recurrent policy acts with its memory; use predict(obs, state, "
                "episode_start) or step(...)"
            )
        batch, single = self._batched(obs)
        out, _ = self.numpy_actor.env_action(
            self._stats_np, batch, self.mask_rows(action_mask, len(batch)), rng=_generator(rng)
        )
        return out[0] if single else out

    def predict(self, observation, state=None, episode_start=None, deterministic: bool = False, action_masks=None):
        """Stable-Baselines3's `predict` (sb3-contrib MaskablePPO's with `action_masks`): `(action(s), None)` for one
        raw observation or a batch (a recurrent policy: `(action(s), (h, c))`, see `step`), so `evaluate_policy`,
        `EvalCallback` and SB3-style code accept a policy. Stochastic actions are drawn with the key [seed, n] of
        the n-th stochastic call (see the module docstring)."""
        rng = None if deterministic else self.keys.next()
        if self.lstm is not None:
            return self.step(observation, state, episode_start, rng, action_masks)
        return self.get_action(observation, rng=rng, action_mask=action_masks), None

    def step(self, obs, state=None, episode_start=None, rng=None, action_mask=None):
        """A recurrent policy's step, in numpy: (action(s) in env units, new state (h, c), each float32
        [layers, N, units], as sb3-contrib's). `state` None starts from zeros; the state restarts from zeros where
        `episode_start` (bool [N]) is True; `rng` as `get_action`'s."""
        batch, single = self._batched(obs)
        rows, layers, units = len(batch), self.lstm.num_layers, self.lstm.units
        if state is None:
            state = (np.zeros((layers, rows, units), np.float32),) * 2
        try:  # sb3-contrib's [layers, N, units] -> the cell's [N, layers * units]
            h, c = (
                np.asarray(part, np.float32).reshape(layers, rows, units).transpose(1, 0, 2).reshape(rows, -1)
                for part in state
            )
        except (TypeError, ValueError) as err:
            raise ValueError(
                f"state: expected (h, c), each of shape [{layers}, {rows}, {units}], got "
                f"{[np.shape(p) for p in state] if isinstance(state, (tuple, list)) else type(state)}"
            ) from err
        starts = None if episode_start is None else np.asarray(episode_start, bool).reshape(rows)
        action, (h, c) = self.numpy_actor.env_action(
            self._stats_np, batch, self.mask_rows(action_mask, rows), (h, c), starts, _generator(rng)
        )
        h, c = (part.reshape(rows, layers, units).transpose(1, 0, 2) for part in (h, c))
        return (action[0] if single else action), (h, c)

    def step_flat(
        self,
        flat_obs: np.ndarray,
        h: np.ndarray,
        c: np.ndarray,
        episode_start: np.ndarray,
        rng=None,
        action_mask: np.ndarray | None = None,
    ) -> tuple:
        """`step` in TensorFlow (the reference artifacts are checked against), on flattened observations [N, D] and
        states [N, layers * units]: (actions, h, c, actor params (masked))."""
        key = None if rng is None else _as_key(rng)
        mask = None if action_mask is None else tf.constant(action_mask, tf.bool)
        out = self._compiled_step(
            tf.constant(np.asarray(flat_obs, np.float32)),
            key,
            mask,
            tf.constant(h),
            tf.constant(c),
            tf.constant(episode_start),
        )
        return tuple(tf.nest.map_structure(lambda x: x.numpy(), out))

    def _step_graph(self, obs, key, mask, h, c, episode_start):
        keep = 1.0 - tf.cast(episode_start, tf.float32)[:, None]
        features, (h, c) = self.lstm(self.normalize(obs), [h * keep, c * keep])
        params = self.dist.masked(self.actor(features), mask)
        return self.dist.to_env(self._act(params, key)), h, c, params

    def mask_rows(self, action_mask, rows: int) -> np.ndarray | None:
        """An action mask for `rows` observations as bool [rows, mask_size] (None stays None); one-line errors."""
        if action_mask is None:
            return None
        if not self.dist.mask_size:
            raise ValueError(
                f"action_masks: expected None for {self.action_space} (masks are for Discrete and "
                f"MultiDiscrete actions), got a mask"
            )
        mask = np.asarray(action_mask)
        if mask.size != rows * self.dist.mask_size:
            raise ValueError(
                f"action_masks: expected {self.dist.mask_size} entries per observation ({rows}), got shape {mask.shape}"
            )
        mask = mask.reshape(rows, self.dist.mask_size).astype(bool)
        if not mask.any(axis=1).all():
            raise ValueError("action_masks: expected at least one allowed action per observation, got a row of False")
        return mask

    def get_action_flat(self, flat_obs: np.ndarray, rng=None, action_mask: np.ndarray | None = None) -> np.ndarray:
        """`get_action` in TensorFlow (the reference artifacts are checked against; it reads the actor's variables
        as they are), on flattened observations float32 [N, D] (Dict observations in the Dict's key order), with
        an optional bool mask [N, mask_size]; `rng` None, an int seed or a key [2] (TensorFlow's stateless draws)."""
        key = None if rng is None else _as_key(rng)
        mask = None if action_mask is None else tf.constant(action_mask, tf.bool)
        return self._compiled_get_action(tf.constant(np.asarray(flat_obs, np.float32)), key, mask).numpy()

    # Input rows: what an exported artifact takes. For a Box or a Dict of Boxes the flat observation itself; with
    # Discrete / MultiDiscrete / MultiBinary parts their raw integers, which `encode` one-hot encodes; for an image
    # Box (`kppo.gym_envs.spaces.is_image_space`) the image itself, uint8 in the env's layout (HWC or CHW).

    @property
    def layout(self) -> list:
        """The observation's parts in the input row and in the encoded row (`kppo.gym_envs.spaces.Part`)."""
        return layout(self.observation_space)

    @property
    def extractor(self) -> Any:
        """The features extractor the actor reads observations through (its own, or the one before its LSTM); None
        where it reads them as they are."""
        return actor_extractor(self.actor, self.lstm)

    @property
    def image(self) -> bool:
        """The observation space is an image Box: input rows are the images themselves, uint8 [*input_shape]."""
        return is_image_space(self.observation_space)

    @property
    def input_dim(self) -> int:
        """The number of values in one input row (an image's H * W * C)."""
        if is_encoded(self.observation_space):
            return input_dim(self.observation_space)
        return int(self._stats.mean.shape[0])

    @property
    def input_shape(self) -> tuple[int, ...]:
        """One input row's shape: the image's own shape ((H, W, C), or (C, H, W) for a CHW space) for an image Box,
        else (input_dim,)."""
        if self.image:
            return tuple(int(d) for d in self.observation_space.shape)  # type: ignore[union-attr]
        return (self.input_dim,)

    @property
    def input_dtype(self) -> np.dtype:
        """uint8 for an image Box, int32 when every part of the observation is an integer, else float32."""
        if self.image:
            return np.dtype(np.uint8)
        encoded = is_encoded(self.observation_space)
        return np.dtype(np.int32 if encoded and integer_input(self.observation_space) else np.float32)

    def input_row(self, obs) -> np.ndarray:
        """One raw observation -> its input row [*input_shape] (an image as it is, uint8)."""
        space = self.observation_space
        if self.image:
            image = np.asarray(obs)
            if image.shape != self.input_shape:
                raise ValueError(f"obs: expected an image of shape {self.input_shape}, got shape {image.shape}")
            return image.astype(np.uint8)
        batch = {k: np.asarray(v)[None] for k, v in obs.items()} if isinstance(obs, dict) else np.asarray(obs)[None]
        return input_rows(space, batch)[0].astype(self.input_dtype)

    def encode(self, rows: np.ndarray) -> np.ndarray:
        """Input rows [N, *input_shape] -> the flat float32 observations [N, D] the networks see (an image's bytes
        as 0.0-255.0: the actor's features extractor divides them)."""
        if self.image:
            rows = np.asarray(rows)
            return rows.reshape(len(rows), self.input_dim).astype(np.float32)
        if not is_encoded(self.observation_space):
            return np.asarray(rows, np.float32)
        return encode_rows(self.observation_space, rows)

    def encode_graph(self, rows: tf.Tensor) -> tf.Tensor:
        """`encode` in TensorFlow, with ops TFLite Micro has too: one_hot(x - start, n) is computed as
        max(1 - |x - (start + range(n))|, 0) in float32 (the converter would turn tf.one_hot, or equal + cast, into
        ONE_HOT, which TFLite Micro lacks); exact for integers below 2^24, all zeros out of range, as `encode`. Images
        [N, *input_shape] (uint8) are cast to float32 and flattened to [N, input_dim]."""
        if self.image:
            return tf.reshape(tf.cast(rows, tf.float32), [-1, self.input_dim])
        if not is_encoded(self.observation_space):
            return tf.cast(rows, tf.float32)
        parts = layout(self.observation_space)
        blocks = []
        for part in parts:
            values = tf.cast(rows if len(parts) == 1 else rows[:, part.raw], tf.float32)
            if not part.sizes:
                blocks.append(values)
            for column, (size, start) in enumerate(zip(part.sizes, part.starts)):
                positions = tf.constant(np.arange(start, start + size, dtype=np.float32)[None])
                value = values if len(part.sizes) == 1 else values[:, column : column + 1]
                blocks.append(tf.maximum(1.0 - tf.abs(value - positions), 0.0))
        return blocks[0] if len(blocks) == 1 else tf.concat(blocks, axis=1)

    def _get_action_graph(self, obs: tf.Tensor, key: tf.Tensor | None, mask: tf.Tensor | None = None) -> tf.Tensor:
        return self.dist.to_env(self._apply_actor(self.normalize(obs), key, mask))
