"""kppo's convolutional towers in numpy, for acting at small batches on the host.

One compiled TensorFlow call costs more, whatever it computes, than SmallCNN's forward pass for 8 MinAtar grids in
numpy (im2col + one matmul per convolution) with single-threaded BLAS. For NatureCNN's 84x84 stacks TensorFlow's
kernels win at every batch. `numpy_tower` therefore runs a `Preprocessed(ConvTower)` extractor in numpy while a
call's multiply-accumulates stay under `NUMPY_MAX_MACS` and hands larger batches to the compiled call: a rule on the
batch's shape, not a timing, so the same seed acts the same on every machine (docs/benchmarks/images.md, "Acting:
compiled call vs numpy im2col", has the measurements it comes from).

Multi-threaded OpenBLAS stalls on these small matmuls when another core is busy, far longer than the product itself
takes; the host rollout holds `one_blas_thread()` while it acts through a numpy tower.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from kppo.agent.extractors import ConvTower, Preprocessed

#: The most multiply-accumulates one acting call runs in numpy: SmallCNN on MinAtar's grids (168k a grid) up to 47
#: envs, where numpy beats the compiled call by most at 8 envs and barely at 64; never NatureCNN (9.4M a frame),
#: where numpy loses at every batch and stalls on one frame outside a rollout's one-thread BLAS
#: (`docs/benchmarks/images.md`, "Measurements behind the defaults").
NUMPY_MAX_MACS = 8_000_000


def im2col(x: np.ndarray, kernel: int, stride: int) -> tuple[np.ndarray, tuple[int, int, int]]:
    """NHWC images [B, H, W, C] -> (patches [B * OH * OW, C * kernel * kernel] (valid padding, channel-major),
    (B, OH, OW))."""
    windows = np.lib.stride_tricks.sliding_window_view(x, (kernel, kernel), axis=(1, 2))[:, ::stride, ::stride]
    b, oh, ow = windows.shape[:3]
    return windows.reshape(b * oh * ow, -1), (b, oh, ow)


def tower_macs(tower: ConvTower) -> int:
    """Multiply-accumulates of `tower`'s forward pass for one observation."""
    h, w, channels = _hwc(tower)
    total = 0
    for conv in tower.convs:
        kernel, stride = conv.kernel_size[0], conv.strides[0]
        h, w = (h - kernel) // stride + 1, (w - kernel) // stride + 1
        total += h * w * kernel * kernel * channels * conv.filters
        channels = conv.filters
    return total + h * w * channels * tower.features_dim


def _hwc(tower: ConvTower) -> tuple[int, int, int]:
    shape = tower.observation_shape
    return (shape[1], shape[2], shape[0]) if tower.channels_first else (shape[0], shape[1], shape[2])


def _conv_tower(layer: Any) -> ConvTower | None:
    """The ConvTower a `Preprocessed` layer reads a single Box through, else None (Dict spaces, users' layers)."""
    if not isinstance(layer, Preprocessed) or len(layer.parts) != 1 or layer.parts[0][0] is not None:
        return None
    return layer.extractor if isinstance(layer.extractor, ConvTower) else None


def _numpy(variable) -> np.ndarray:
    return variable.numpy()


def numpy_tower(layer: Any, read: Callable[[Any], np.ndarray] = _numpy) -> Callable[[np.ndarray], np.ndarray] | None:
    """`layer` (a `Preprocessed(ConvTower)`, as `kppo.agent.extractors` builds NatureCNN and SmallCNN) in numpy on a
    copy of its current weights (`read`: a variable's value; a population member's are read from its stacked
    tensors): flat observations [B, D] (uint8 or float32) -> features float32 [B, F]; None for any other
    extractor."""
    tower = _conv_tower(layer)
    if tower is None:
        return None
    shape, image = layer.parts[0][1], layer.parts[0][2]
    convs = []
    for conv in tower.convs:
        kernel = read(conv.kernel)  # [k, k, C_in, C_out]; im2col's patches are (C, kh, kw)-ordered
        matrix = np.ascontiguousarray(kernel.transpose(2, 0, 1, 3).reshape(-1, kernel.shape[3]), np.float32)
        convs.append((matrix, read(conv.bias).astype(np.float32), conv.kernel_size[0], conv.strides[0]))
    dense, dense_bias = read(tower.linear.kernel), read(tower.linear.bias)

    def forward(obs: np.ndarray) -> np.ndarray:
        x = np.asarray(obs).reshape((obs.shape[0], *shape)).astype(np.float32)
        if image:
            x /= np.float32(255.0)  # `Preprocessed`: value / 255.0
        if tower.channels_first:
            x = x.transpose(0, 2, 3, 1)
        for matrix, bias, kernel, stride in convs:
            patches, (b, oh, ow) = im2col(x, kernel, stride)
            x = np.maximum(patches @ matrix + bias, np.float32(0.0)).reshape(b, oh, ow, -1)
        return np.maximum(x.reshape(x.shape[0], -1) @ dense + dense_bias, np.float32(0.0))

    return forward


def acting_extractor(
    layer: Any, compiled: Callable[[np.ndarray], np.ndarray], read: Callable[[Any], np.ndarray] = _numpy
) -> tuple[Callable[[np.ndarray], np.ndarray], bool]:
    """(the extractor a numpy actor calls: `numpy_tower(layer, read)` for batches within `NUMPY_MAX_MACS`, `compiled`
    for larger ones and for extractors numpy does not run; whether it may run numpy)."""
    tower = _conv_tower(layer)
    largest = 0 if tower is None else NUMPY_MAX_MACS // tower_macs(tower)  # the largest batch numpy takes
    in_numpy = numpy_tower(layer, read) if largest >= 1 else None
    if in_numpy is None:
        return compiled, False
    return (lambda obs: in_numpy(obs) if len(obs) <= largest else compiled(obs)), True


@functools.cache
def _controller() -> Any:
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


@contextlib.contextmanager
def one_blas_thread(in_numpy: bool = True) -> Iterator[None]:
    """numpy's BLAS limited to one thread inside the block (threadpoolctl; entering and leaving has a small fixed cost,
    `docs/benchmarks/images.md`, "Measurements behind the defaults") when `in_numpy` (an actor acting through
    `numpy_tower`), else nothing changes."""
    if not in_numpy:
        yield
        return
    with _controller().limit(limits=1, user_api="blas"):
        yield
