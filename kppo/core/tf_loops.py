"""`scan`: jax.lax.scan semantics on `tf.while_loop` (compiles to one loop, never unrolls).

The stacked outputs are preallocated tensors written row by row (`tf.tensor_scatter_nd_update`, an in-place
dynamic-update-slice under XLA), not TensorArrays: `tf.vectorized_map` turns TensorArrays inside a loop into
TensorLists that XLA cannot compile, and populations vectorize whole training iterations.

`tie_to_members` prepares the initial values of kppo's inner loops (`scan` and the update's minibatch loop): under
`vectorizing(anchor)` it ties them to `anchor`, a tensor of the vectorized inputs (see there)."""

from __future__ import annotations

import contextlib
import threading
from typing import Any
from collections.abc import Callable, Iterator

from kppo._tf import tf

_vectorized = threading.local()  # .anchor: set while a function for tf.vectorized_map traces (per thread)


@contextlib.contextmanager
def vectorizing(anchor: tf.Tensor) -> Iterator[None]:
    """Traces the enclosed code for `tf.vectorized_map`, with `anchor` (a scalar computed from the vectorized inputs,
    e.g. a member's key) standing for "per member".

    tf.vectorized_map (pfor) converts a `tf.while_loop` by converting its body. When an initial value does not depend
    on the vectorized inputs (the zeros of a scan's output buffers, an update's sums) but the body makes it per-member,
    pfor finds the mismatch only after converting the body, converts it again, abandons that, and starts over: three
    conversions of every loop body. Tying every initial value but the loop counter to `anchor` makes them per-member
    from the start, so each body is converted once and a population traces faster (`docs/benchmarks/populations.md`,
    "Measurements behind the defaults")."""
    previous = getattr(_vectorized, "anchor", None)
    _vectorized.anchor = anchor
    try:
        yield
    finally:
        _vectorized.anchor = previous


def vectorizing_now() -> bool:
    """Whether code traces for `tf.vectorized_map` (inside `vectorizing`)."""
    return getattr(_vectorized, "anchor", None) is not None


def _per_member(x: tf.Tensor, anchor: tf.Tensor) -> tf.Tensor:
    """`x`, bit for bit, as a value that depends on `anchor` (a select between x and itself)."""
    return tf.where(tf.equal(anchor, anchor), x, x)


def tie_to_members(loop_vars: tuple) -> tuple:
    """A `tf.while_loop`'s initial values, its first (a counter shared by every member) as it is; under `vectorizing`,
    the others tied to the anchor. Outside `vectorizing`, `loop_vars` unchanged."""
    anchor = getattr(_vectorized, "anchor", None)
    if anchor is None:
        return loop_vars
    counter, *rest = loop_vars
    return (counter, *tf.nest.map_structure(lambda x: _per_member(x, anchor), rest))


def _spec(t: tf.Tensor) -> tf.TensorSpec:
    return tf.TensorSpec(t.shape, t.dtype)


def output_spec(body: Callable[[Any, Any], tuple[Any, Any]], carry: Any, x: Any) -> Any:
    """The nest of `tf.TensorSpec` that `body(carry, x)[1]` returns, found by tracing `body` in a scratch graph
    (nothing runs, nothing is added to the caller's graph)."""
    traced = tf.function(lambda c, x_: body(c, x_)[1], autograph=False)
    concrete = traced.get_concrete_function(tf.nest.map_structure(_spec, carry), tf.nest.map_structure(_spec, x))
    return concrete.structured_outputs


def scan(
    body: Callable[[Any, Any], tuple[Any, Any]],
    carry: Any,
    xs: Any = None,
    length: int | None = None,
    until: Callable[[Any], tf.Tensor] | None = None,
) -> tuple[Any, Any]:
    """Runs `carry, y = body(carry, x)` over the leading axis of `xs`; returns (final carry, stacked ys).

    Works eagerly, in `tf.function` and under XLA. `body` is traced once more in a scratch graph to learn the
    dtypes and shapes of `y` (cheaper than peeling the first step, which would double the compiled graph).

    Args:
        body: pure step function; `y` may be any nest of tensors (stacked on a new leading axis).
        carry: initial carry, a nest of tensors with fixed shapes.
        xs: nest of tensors sliced along axis 0, or None (then x is the int32 step index).
        length: number of steps; required when `xs` is None.
        until: carry -> bool scalar: stop early once it holds (the remaining ys stay zeros), e.g. when every
            evaluation episode has ended; ignored while a population traces (`vectorizing`).
    """
    steps = length if xs is None else tf.nest.flatten(xs)[0].shape[0]
    if steps is None or steps < 1:
        raise ValueError(f"scan: expected a static number of steps >= 1, got {steps}")

    def x_at(i):
        return i if xs is None else tf.nest.map_structure(lambda t: tf.gather(t, i), xs)

    spec = output_spec(body, carry, x_at(tf.constant(0, tf.int32)))
    buffers = tf.nest.map_structure(lambda s: tf.zeros([steps, *s.shape.as_list()], s.dtype), spec)

    def write(buffer, value, i):  # an empty output (e.g. the width-0 action mask) has nothing to write
        return buffer if buffer.shape.num_elements() == 0 else tf.tensor_scatter_nd_update(buffer, [[i]], value[None])

    def loop_body(i, carry, buffers):
        carry, y = body(carry, x_at(i))
        return i + 1, carry, tf.nest.map_structure(lambda b, v: write(b, v, i), buffers, y)

    start = tie_to_members((tf.constant(0, tf.int32), carry, buffers))
    if vectorizing_now():
        until = None  # a population's members stop together: pfor's loop with a per-member exit does not compile

    def cond(i, carry, _):
        return i < steps if until is None else tf.logical_and(i < steps, tf.logical_not(until(carry)))

    _, carry, buffers = tf.while_loop(cond, loop_body, start, maximum_iterations=steps)
    return carry, buffers


def swap_leading(x: tf.Tensor) -> tf.Tensor:
    """[A, B, ...] -> [B, A, ...]: time-major to env-major and back."""
    return tf.transpose(x, [1, 0, *range(2, len(x.shape))])


def merge_leading(x: tf.Tensor) -> tf.Tensor:
    """[A, B, ...] -> [A * B, ...]."""
    return tf.reshape(x, [-1, *x.shape[2:].as_list()])
