"""Features extractors: the Keras layers the actor and critic read observations through (SB3's
`features_extractor_class`): `NatureCNN`, `SmallCNN` (grids under 36 pixels), `CombinedExtractor` (Dict
observations) and a user's own Keras layer.

kppo's rollouts keep observations flat ([B, D]; an image Box as its uint8 bytes, `kppo.gym_envs.spaces`).
`Preprocessed` turns a flat batch back into the observation space's shape (a dict of them for a Dict space), float32,
images divided by 255 when `normalize_images` (SB3's `preprocess_obs`), and hands that to the extractor, so an
extractor reads what SB3's extractors read. TensorFlow's convolutions are NHWC: an image whose smallest dimension
comes first (CHW, SB3's `is_image_space_channels_first`) is transposed to HWC inside the CNN, so one set of weights
serves both layouts and SB3's weights transplant either way (its flatten order is CHW: `kppo.agent.extractors` users
transplanting a Linear layer after the convolutions permute its rows accordingly).

SB3's initialization: with `kernel_init="orthogonal"` (SB3's `ortho_init=True`) every Conv2D and Dense of an extractor
is orthogonal with gain sqrt(2) and a zero bias (SB3's `module_gains[features_extractor] = sqrt(2)`); with
`"torch_default"` they are torch's Conv2d / Linear defaults, U(+-1/sqrt(fan_in)) for kernels and biases.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import keras
import numpy as np

from kppo._tf import tf
from kppo.agent.networks import HIDDEN_GAIN, make_initializer
from kppo.agent.spec import AgentSpec
from kppo.config.choices import FEATURES_EXTRACTORS
from kppo.core.errors import ArgumentError, ArgumentTypeError
from kppo.gym_envs.spaces import flat_dim, has_image, is_channels_first, is_image_space, space_shape

#: NatureCNN's convolutions (filters, kernel, stride), as Mnih et al. (2015) and SB3.
NATURE_CONVS = ((32, 8, 4), (64, 4, 2), (64, 3, 1))
#: SmallCNN's convolution: MinAtar's network (Young & Tian, 2019): 16 filters of 3x3, stride 1.
SMALL_CONVS = ((16, 3, 1),)


def hwc(shape: tuple[int, ...]) -> tuple[int, int, int]:
    """An image shape as (H, W, C), read as CHW when its smallest dimension comes first."""
    if len(shape) != 3:
        raise ArgumentError(f"observation_space: expected an image of 3 dimensions (H, W, C), got shape {shape}")
    h, w, c = (shape[1], shape[2], shape[0]) if is_channels_first(shape) else shape
    return int(h), int(w), int(c)


def conv_output(size: int, convs: tuple) -> int:
    """The spatial size after `convs` (valid padding) from `size` (<= 0: the image is too small)."""
    for _, kernel, stride in convs:
        size = (size - kernel) // stride + 1 if size >= kernel else 0
    return size


def _initializer(kernel_init: str, bias_init: str, fan_in: int, seed: int) -> dict[str, Any]:
    bias: Any = "zeros"
    if bias_init == "torch_default":
        bound = 1.0 / math.sqrt(fan_in)
        bias = keras.initializers.RandomUniform(-bound, bound, seed=seed + 50)
    return {"kernel_initializer": make_initializer(kernel_init, HIDDEN_GAIN, seed), "bias_initializer": bias}


class ConvTower(keras.layers.Layer):
    """Convolutions (ReLU, valid padding) -> flatten -> Dense(features_dim, ReLU) on float images [B, *shape]: the
    body of `NatureCNN` and `SmallCNN`. One-line `ArgumentError` for an image too small for the convolutions."""

    def __init__(
        self,
        observation_shape: tuple[int, ...],
        convs: tuple,
        features_dim: int,
        name_of: str,
        kernel_init: str = "orthogonal",
        bias_init: str = "zeros",
        seed: int = 0,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        self.observation_shape = tuple(int(d) for d in observation_shape)
        self.channels_first = is_channels_first(self.observation_shape)
        h, w, channels = hwc(self.observation_shape)
        out_h, out_w = conv_output(h, convs), conv_output(w, convs)
        if out_h < 1 or out_w < 1:
            raise ArgumentError(
                f"observation_space: expected an image of at least {_minimum(convs)}x{_minimum(convs)} pixels for "
                f"{name_of}, got shape {self.observation_shape}; use features_extractor='small_cnn' for small grids"
            )
        self.features_dim = int(features_dim)
        self.convs = []
        for i, (filters, kernel, stride) in enumerate(convs):
            self.convs.append(
                keras.layers.Conv2D(
                    filters,
                    kernel,
                    strides=stride,
                    activation="relu",
                    name=f"conv_{i}",
                    **_initializer(kernel_init, bias_init, channels * kernel * kernel, seed + i),
                )
            )
            channels = filters
        flat = out_h * out_w * channels
        self.linear = keras.layers.Dense(
            self.features_dim,
            activation="relu",
            name="linear",
            **_initializer(kernel_init, bias_init, flat, seed + len(convs)),
        )

    def call(self, images):
        """Float images [B, *observation_shape] -> features [B, features_dim]."""
        x = tf.transpose(images, [0, 2, 3, 1]) if self.channels_first else images
        for conv in self.convs:
            x = conv(x)
        return self.linear(tf.reshape(x, [tf.shape(x)[0], -1]))


def _minimum(convs: tuple) -> int:
    size = 1
    while conv_output(size, convs) < 1:
        size += 1
    return size


def _shape_of(observation: gym.spaces.Space | tuple[int, ...]) -> tuple[int, ...]:
    return space_shape(observation) if isinstance(observation, gym.spaces.Space) else tuple(observation)


class NatureCNN(ConvTower):
    """SB3's NatureCNN (Mnih et al. 2015): 32 8x8/4, 64 4x4/2, 64 3x3/1 convolutions, ReLU, then `features_dim`
    (512) ReLU features; `NatureCNN(observation_space, features_dim)` as SB3 builds it (a shape works too)."""

    def __init__(self, observation_space, features_dim: int = 512, **kwargs: Any):
        kwargs.setdefault("name", "nature_cnn")
        super().__init__(_shape_of(observation_space), NATURE_CONVS, features_dim, "NatureCNN", **kwargs)


class SmallCNN(ConvTower):
    """MinAtar's network (Young & Tian 2019): one 16 3x3/1 convolution, ReLU, then `features_dim` (128) ReLU
    features: for grids NatureCNN cannot read (under 36 pixels a side)."""

    def __init__(self, observation_space, features_dim: int = 128, **kwargs: Any):
        kwargs.setdefault("name", "small_cnn")
        super().__init__(_shape_of(observation_space), SMALL_CONVS, features_dim, "SmallCNN", **kwargs)


def any_cnn(observation_space, features_dim: int | None = None, **kwargs: Any) -> ConvTower:
    """NatureCNN for images of at least 36x36 pixels, SmallCNN below (SB3's CnnPolicy would refuse those)."""
    h, w, _ = hwc(_shape_of(observation_space))
    build = SmallCNN if min(h, w) < _minimum(NATURE_CONVS) else NatureCNN
    return build(observation_space, **({} if features_dim is None else {"features_dim": features_dim}), **kwargs)


class CombinedExtractor(keras.layers.Layer):
    """SB3's CombinedExtractor for Dict observations: a CNN (`any_cnn`, `cnn_output_dim` features) per image key, the
    flattened values of every other key, concatenated in the Dict's key order."""

    def __init__(self, observation_space: gym.spaces.Dict, cnn_output_dim: int = 256, **kwargs: Any):
        tower = {k: kwargs.pop(k) for k in ("kernel_init", "bias_init", "seed") if k in kwargs}
        super().__init__(**kwargs)
        self.keys = list(observation_space.spaces)
        self.cnns = {}
        for i, (key, space) in enumerate(observation_space.spaces.items()):
            if is_image_space(space):
                options = {**tower, "seed": tower.get("seed", 0) + 10 * i}
                self.cnns[key] = any_cnn(space_shape(space), cnn_output_dim, **options)

    def call(self, observations):
        """A dict of preprocessed observations per key -> the features, [B, sum of the parts' widths]."""
        parts = []
        for key in self.keys:
            value = observations[key]
            parts.append(self.cnns[key](value) if key in self.cnns else tf.reshape(value, [tf.shape(value)[0], -1]))
        return tf.concat(parts, axis=-1)


class FlattenExtractor(keras.layers.Layer):
    """SB3's FlattenExtractor: the (preprocessed) observations flattened, [B, D] (a Dict's values concatenated in
    `keys` order); no weights."""

    def __init__(self, keys: list | None = None, **kwargs: Any):
        super().__init__(**kwargs)
        self.keys = keys

    def call(self, observations):
        """Preprocessed observations (a dict per key for a Dict space) -> [B, D]."""
        values = [observations] if self.keys is None else [observations[key] for key in self.keys]
        return tf.concat([tf.reshape(v, [tf.shape(v)[0], -1]) for v in values], axis=-1)


def _input_shape(space: gym.spaces.Space) -> tuple[int, ...]:
    """The shape of one observation of `space` as an extractor reads it, SB3's `preprocess_obs`: a Discrete or
    MultiDiscrete part one-hot ([n], [sum(nvec)]: its width in kppo's flat rows), a Box or MultiBinary its shape."""
    if isinstance(space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete)):
        return (flat_dim(space),)
    return space_shape(space)


class Preprocessed(keras.layers.Layer):
    """Flat observations [B, D] (or already shaped [B, *shape]) -> the space's shape, float32, images / 255 when
    `normalize_images` (a dict per key for a Dict space) -> `extractor`."""

    def __init__(self, extractor: keras.layers.Layer, observation_space: gym.spaces.Space, normalize_images: bool):
        super().__init__(name="features_extractor")
        self.extractor = extractor
        items: Any = [(None, observation_space)]
        if isinstance(observation_space, gym.spaces.Dict):
            items = observation_space.spaces.items()
        self.parts = [
            (key, _input_shape(space), bool(normalize_images and is_image_space(space))) for key, space in items
        ]

    def call(self, obs):
        """Flat rows [B, D] (any dtype) -> the extractor's features."""
        batch = tf.shape(obs)[0]
        key, shape, image = self.parts[0]
        if key is None:  # a Box: no slicing (an exported artifact keeps only the reshape)
            value = tf.reshape(tf.cast(obs, tf.float32), [batch, *shape])
            return self.extractor(value / 255.0 if image else value)
        flat = tf.reshape(tf.cast(obs, tf.float32), [batch, -1])
        values, start = {}, 0
        for key, shape, image in self.parts:
            size = int(np.prod(shape, dtype=np.int64))
            value = tf.reshape(flat[:, start : start + size], [batch, *shape])
            values[key] = value / 255.0 if image else value
            start += size
        return self.extractor(values)


def extractor_factory(
    extractor: str | type,
    observation_space: gym.spaces.Space,
    kwargs: dict | None = None,
    normalize_images: bool = True,
    kernel_init: str = "orthogonal",
    bias_init: str = "zeros",
    seed: int = 0,
) -> Callable[[], Preprocessed] | None:
    """A zero-argument factory of the features extractor `extractor` names (one of `Config.features_extractor`'s
    values; "flatten": None)
    or builds (a Keras layer class, called as SB3 calls one: `extractor(observation_space, **kwargs)`), reading
    `observation_space` through `Preprocessed`. One-line errors for an unknown name, a class that is not a Keras layer
    and an observation space the extractor cannot read."""
    options = dict(kwargs or {})
    if isinstance(extractor, str):
        if extractor not in FEATURES_EXTRACTORS:
            raise ArgumentError(f"features_extractor: expected one of {FEATURES_EXTRACTORS}, got {extractor!r}")
        if extractor == "flatten":
            return None
        build = _builtin(extractor, observation_space, options, normalize_images, (kernel_init, bias_init, seed))
    elif isinstance(extractor, type) and issubclass(extractor, keras.layers.Layer):
        build = lambda: extractor(observation_space, **options)  # noqa: E731
    else:
        raise ArgumentTypeError(f"features_extractor_class: expected a Keras layer class, got {extractor!r}")
    build()  # its one-line errors now, not when the networks are built
    return lambda: Preprocessed(build(), observation_space, normalize_images)


#: SB3's NatureCNN assertion (stable_baselines3/common/torch_layers.py), its first sentence and hint on one line: what
#: an SB3 program matches when CnnPolicy meets a space that is no image.
NATURE_CNN_ASSERT = (
    "You should use NatureCNN only with images not with {} (you are probably using `CnnPolicy` instead of "
    "`MlpPolicy` or `MultiInputPolicy`)"
)


def _builtin(
    name: str, space: gym.spaces.Space, options: dict, normalize_images: bool, init: tuple[str, str, int]
) -> Callable[[], keras.layers.Layer]:
    tower: dict[str, Any] = dict(zip(("kernel_init", "bias_init", "seed"), init))
    if name == "combined":
        if not isinstance(space, gym.spaces.Dict):
            raise ArgumentError(f"features_extractor: expected a Dict observation space for 'combined', got {space}")
        return lambda: CombinedExtractor(space, **options, **tower)
    if isinstance(space, gym.spaces.Dict) or len(space_shape(space)) != 3:
        raise ArgumentError(
            f"{NATURE_CNN_ASSERT.format(space)} (observation_space: expected an image Box (H, W, C) for "
            f"features_extractor={name!r}, got {space})"
        )
    if normalize_images and not is_image_space(space):  # SB3's NatureCNN asserts the same
        raise ArgumentError(
            f"{NATURE_CNN_ASSERT.format(space)} (observation_space: expected a uint8 image Box in [0, 255] for "
            f"features_extractor={name!r} (float images: normalize_images=False), got {space})"
        )
    build = {"cnn": any_cnn, "nature_cnn": NatureCNN, "small_cnn": SmallCNN}[name]
    return lambda: build(space_shape(space), **options, **tower)


def spec_extractor(spec: AgentSpec, observation_space: gym.spaces.Space) -> Callable[[], Preprocessed] | None:
    """The factory of the extractor `spec.features_extractor` names for `observation_space`, with `spec`'s
    features_dim, normalize_images and initialization; for 'flatten', None (the MLP reads the flat rows), or a
    `FlattenExtractor` when the space holds images to divide by 255 (SB3's MlpPolicy on images)."""
    if spec.features_extractor == "flatten":
        if not (spec.normalize_images and has_image(observation_space)):
            return None
        keys = list(observation_space.spaces) if isinstance(observation_space, gym.spaces.Dict) else None
        return lambda: Preprocessed(FlattenExtractor(keys), observation_space, True)  # SB3's MlpPolicy: images / 255
    kwargs = {}
    if spec.features_dim is not None:
        kwargs["cnn_output_dim" if spec.features_extractor == "combined" else "features_dim"] = spec.features_dim
    return extractor_factory(
        spec.features_extractor,
        observation_space,
        kwargs,
        spec.normalize_images,
        spec.kernel_init,
        spec.bias_init,
        spec.seed * 1000 + 900,
    )
