"""`scan`: jax.lax.scan semantics on `tf.while_loop` + `tf.TensorArray` (compiles to one loop, never unrolls)."""

from __future__ import annotations

from typing import Any, Callable

from kppo._tf import tf


def scan(body: Callable[[Any, Any], tuple[Any, Any]], carry: Any, xs: Any = None, length: int | None = None) -> tuple[Any, Any]:
    """Runs `carry, y = body(carry, x)` over the leading axis of `xs`; returns (final carry, stacked ys).

    The first step runs before the loop: its output fixes the dtypes and shapes of the stacked ys, so `body` needs
    no output signature. Works eagerly, in `tf.function` and under XLA.

    Args:
        body: pure step function; `y` may be any nest of tensors (stacked on a new leading axis).
        carry: initial carry, a nest of tensors with fixed shapes.
        xs: nest of tensors sliced along axis 0, or None (then x is the int32 step index).
        length: number of steps; required when `xs` is None.
    """
    steps = length if xs is None else tf.nest.flatten(xs)[0].shape[0]
    if steps is None or steps < 1:
        raise ValueError(f"scan: expected a static number of steps >= 1, got {steps}")

    def x_at(i):
        return i if xs is None else tf.nest.map_structure(lambda t: tf.gather(t, i), xs)

    carry, y0 = body(carry, x_at(tf.constant(0, tf.int32)))
    arrays = tf.nest.map_structure(
        lambda v: tf.TensorArray(v.dtype, size=steps, element_shape=v.shape).write(0, v), y0
    )

    def loop_body(i, carry, arrays):
        carry, y = body(carry, x_at(i))
        return i + 1, carry, tf.nest.map_structure(lambda a, v: a.write(i, v), arrays, y)

    _, carry, arrays = tf.while_loop(
        lambda i, *_: i < steps, loop_body, (tf.constant(1, tf.int32), carry, arrays), maximum_iterations=steps - 1
    )
    return carry, tf.nest.map_structure(lambda a: a.stack(), arrays)
