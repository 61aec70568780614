"""A traced `tf.function` run on other variables of the same shapes (`Rebound`), so that a second run of one
configuration calls the program the first run traced and compiled instead of tracing its own.

A `tf.function` that reads variables it closes over (an agent's weights, its optimizer's slots) captures their
resource handles: a concrete function's `captured_inputs` are passed with its arguments on every call. `Rebound`
calls the same concrete function with another run's handles in their place, mapped one to one from the variables
the function was traced on (`owner`) to the new run's (`variables`, in the same order and of the same shapes). The
ops, their order and the compiled XLA clusters are the traced program's own, so a rebound call computes bit for bit
what a function traced on the new variables computes.

A capture the mapping does not cover (a variable outside `owner`: a generator's state, say) makes the program not
rebindable: the call then runs `fallback()`, a function traced on the new variables. `rebinding_supported` says
whether the installed TensorFlow has the calls this uses (the pinned version does; a test checks it).
"""

from __future__ import annotations

import functools
from typing import Any
from collections.abc import Callable, Sequence

from kppo._tf import tf

__all__ = ["Rebound", "rebinding_supported", "resource_handle"]


def _function_type_utils() -> Any:
    from tensorflow.python.eager.polymorphic_function import function_type_utils

    return function_type_utils


@functools.cache
def rebinding_supported() -> bool:
    """Whether this TensorFlow's concrete functions take other captured inputs (`_call_flat`); asked once."""
    try:
        _function_type_utils().canonicalize_function_inputs  # noqa: B018
    except (ImportError, AttributeError):
        return False
    concrete = tf.function(lambda: tf.constant(0)).get_concrete_function()
    return callable(getattr(concrete, "_call_flat", None)) and hasattr(concrete, "captured_inputs")


def resource_handle(variable: Any) -> tf.Tensor:
    """The resource handle a traced function captures for `variable` (a Keras variable or a `tf.Variable`)."""
    inner = getattr(variable, "_value", None)  # a Keras variable holds its tf.Variable here
    return (inner if inner is not None else variable).handle


class Rebound:
    """`function` (a `tf.function` traced on `owner`'s variables) called on `variables` instead.

    Args:
        function: the `tf.function`; each call looks up (or traces, on the owner's variables) the concrete function
            for its arguments, then runs it with the handles of `variables` in place of `owner`'s.
        owner: the variables `function` reads, in a fixed order.
        variables: the new run's variables, in the same order and of the same shapes and dtypes.
        fallback: makes the same function traced on `variables`: used when a capture falls outside `owner`.
    """

    def __init__(self, function: Any, owner: Sequence[Any], variables: Sequence[Any], fallback: Callable[[], Callable]):
        if not self.fits(owner, variables):
            raise ValueError(
                f"variables: expected {len(owner)} of the shapes and dtypes the program was traced on, got others"
            )
        self.function = function
        self._handles = {id(resource_handle(o)): resource_handle(v) for o, v in zip(owner, variables)}
        self._fallback = fallback
        self._own: Callable | None = None  # the fallback, once a capture fell outside `owner`
        self._captured: dict[int, tuple[Any, list | None]] = {}  # id(concrete) -> (concrete, `captures(concrete)`)

    @staticmethod
    def fits(owner: Sequence[Any], variables: Sequence[Any]) -> bool:
        """Whether `variables` match `owner` one to one in shape and dtype."""
        return len(owner) == len(variables) and all(
            tuple(o.shape) == tuple(v.shape) and o.dtype == v.dtype for o, v in zip(owner, variables)
        )

    def captures(self, concrete: Any) -> list | None:
        """The new run's captured inputs for `concrete`, or None when one is a handle outside `owner`."""
        captured = []
        for tensor in concrete.captured_inputs:
            if tensor.dtype == tf.resource:
                tensor = self._handles.get(id(tensor))
                if tensor is None:
                    return None
            captured.append(tensor)
        return captured

    def get_concrete_function(self, *args: Any) -> Any:
        if self._own is not None:
            return self._own.get_concrete_function(*args)  # type: ignore[attr-defined]
        return self.function.get_concrete_function(*args)

    def __call__(self, *args: Any) -> Any:
        if self._own is not None:
            return self._own(*args)
        concrete = self.function.get_concrete_function(*args)
        if id(concrete) not in self._captured:  # mapped once per concrete function, not on every call
            self._captured[id(concrete)] = concrete, self.captures(concrete)
        captured = self._captured[id(concrete)][1]
        if captured is None:
            self._own = self._fallback()
            return self._own(*args)
        bound = _function_type_utils().canonicalize_function_inputs(args, {}, concrete.function_type)
        return concrete._call_flat(concrete.function_type.unpack_inputs(bound), captured)
