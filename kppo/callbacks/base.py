"""Callback machinery with Stable-Baselines3 2.x's interface: `BaseCallback`, `EventCallback`, `CallbackList`,
`ConvertCallback` and `make_callback` (the contract a training loop follows is in `kppo.callbacks`)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any
from collections.abc import Callable

FunctionCallback = Callable[[dict[str, Any], dict[str, Any]], bool]


class BaseCallback(ABC):
    """Base class of all callbacks: bookkeeping plus overridable `_on_*` hooks.

    Attributes:
        model: the model, set by `init_callback` (None before).
        n_calls: number of `on_step` calls so far.
        num_timesteps: `model.num_timesteps` at the last `on_training_start` / `on_step`.
        locals, globals: the training loop's variables, given to `on_training_start` and `update_locals`.
        parent: the callback that triggers this one (e.g. the `EvalCallback` of a `callback_on_new_best`), or None.
        verbose: 0 for no output, 1 for info messages, 2 for debug messages.

    Args:
        verbose: verbosity level.
    """

    def __init__(self, verbose: int = 0):
        self.model: Any = None
        self.n_calls = 0
        self.num_timesteps = 0
        self.verbose = verbose
        self.locals: dict[str, Any] = {}
        self.globals: dict[str, Any] = {}
        self.parent: BaseCallback | None = None

    @property
    def training_env(self) -> Any:
        """`model.get_env()`; RuntimeError (one line) when the model has no env."""
        env = self._require_model().get_env()
        if env is None:
            raise RuntimeError(f"{type(self).__name__}: model.get_env() returned None; the model needs an env")
        return env

    @property
    def logger(self) -> Any:
        """`model.logger`, or None when the model has none."""
        return getattr(self.model, "logger", None)

    def init_callback(self, model: Any) -> None:
        """Attaches the callback to `model`, then runs `_init_callback`."""
        self.model = model
        self._init_callback()

    def on_training_start(self, locals_: dict[str, Any], globals_: dict[str, Any]) -> None:
        """Keeps references to the training loop's variables and the model's step count, then `_on_training_start`."""
        self.locals = locals_
        self.globals = globals_
        self.num_timesteps = int(self._require_model().num_timesteps)
        self._on_training_start()

    def on_rollout_start(self) -> None:
        """Called before each rollout is collected (`_on_rollout_start`)."""
        self._on_rollout_start()

    def on_step(self) -> bool:
        """Called after every env step: counts the call, copies `model.num_timesteps`, returns `_on_step()`.

        Returns:
            False (or anything falsy) to stop training.
        """
        model = self._require_model()
        self.n_calls += 1
        self.num_timesteps = int(model.num_timesteps)
        return bool(self._on_step())

    def on_rollout_end(self) -> None:
        """Called after each rollout, before its update (`_on_rollout_end`)."""
        self._on_rollout_end()

    def on_training_end(self) -> None:
        """Called once when training ends (`_on_training_end`)."""
        self._on_training_end()

    def update_locals(self, locals_: dict[str, Any]) -> None:
        """Merges the training loop's current variables into `self.locals`, and into the child callbacks'."""
        self.locals.update(locals_)
        self.update_child_locals(locals_)

    def update_child_locals(self, locals_: dict[str, Any]) -> None:
        """Passes `locals_` on to child callbacks (none here)."""

    def _init_callback(self) -> None:
        pass

    def _on_training_start(self) -> None:
        pass

    def _on_rollout_start(self) -> None:
        pass

    @abstractmethod
    def _on_step(self) -> bool:
        """Returns False to stop training."""

    def _on_rollout_end(self) -> None:
        pass

    def _on_training_end(self) -> None:
        pass

    def _on_event(self) -> bool:
        """Runs when an event fires (see `EventCallback`); returns False to stop training."""
        return True

    def _require_model(self) -> Any:
        if self.model is None:
            raise RuntimeError(f"{type(self).__name__}: call init_callback(model) before using the callback")
        return self.model


class EventCallback(BaseCallback):
    """A callback that runs a child `callback` (its `parent` is set to this one) whenever an event fires.

    Subclasses decide when the event fires and then call `self._on_event()`.

    Args:
        callback: the child callback, or None.
        verbose: verbosity level.
    """

    def __init__(self, callback: BaseCallback | None = None, verbose: int = 0):
        super().__init__(verbose=verbose)
        self.callback = optional_callback(callback)
        if self.callback is not None:
            self.callback.parent = self

    def init_callback(self, model: Any) -> None:
        super().init_callback(model)
        if self.callback is not None:
            self.callback.init_callback(self.model)

    def _on_training_start(self) -> None:
        if self.callback is not None:
            self.callback.on_training_start(self.locals, self.globals)

    def _on_event(self) -> bool:
        return self.callback.on_step() if self.callback is not None else True

    def _on_step(self) -> bool:
        return True

    def update_child_locals(self, locals_: dict[str, Any]) -> None:
        if self.callback is not None:
            self.callback.update_locals(locals_)


class CallbackList(BaseCallback):
    """Runs several callbacks in order; training stops if any of them returns False (all still run).

    Args:
        callbacks: a list of `BaseCallback`.
    """

    def __init__(self, callbacks: list[BaseCallback]):
        super().__init__()
        if not isinstance(callbacks, (list, tuple)) or not all(isinstance(c, BaseCallback) for c in callbacks):
            raise ValueError(f"callbacks: expected a list of BaseCallback, got {_describe(callbacks)}")
        self.callbacks = list(callbacks)

    def _init_callback(self) -> None:
        for callback in self.callbacks:
            callback.parent = self.parent  # the list is transparent: children see the list's parent
            callback.init_callback(self.model)

    def _on_training_start(self) -> None:
        for callback in self.callbacks:
            callback.on_training_start(self.locals, self.globals)

    def _on_rollout_start(self) -> None:
        for callback in self.callbacks:
            callback.on_rollout_start()

    def _on_step(self) -> bool:
        results = [callback.on_step() for callback in self.callbacks]
        return all(results)

    def _on_rollout_end(self) -> None:
        for callback in self.callbacks:
            callback.on_rollout_end()

    def _on_training_end(self) -> None:
        for callback in self.callbacks:
            callback.on_training_end()

    def update_child_locals(self, locals_: dict[str, Any]) -> None:
        for callback in self.callbacks:
            callback.update_locals(locals_)


class ConvertCallback(BaseCallback):
    """Wraps a function `func(locals, globals) -> bool` (SB3's old-style callback) as a callback.

    As in SB3, the function's result is the `on_step` result: a falsy one, None included, stops training.

    Args:
        func: the function, or None for a callback that does nothing and never stops training.
        verbose: verbosity level.
    """

    def __init__(self, func: FunctionCallback | None, verbose: int = 0):
        super().__init__(verbose)
        if func is not None and not callable(func):
            raise ValueError(f"func: expected a callable (locals, globals) -> bool or None, got {_describe(func)}")
        self.callback = func

    def _on_step(self) -> bool:
        if self.callback is None:
            return True
        return self.callback(self.locals, self.globals)


def make_callback(callback: Any) -> BaseCallback:
    """The `BaseCallback` for what `learn(callback=...)` accepts.

    Args:
        callback: None (a callback that does nothing), a `BaseCallback` (returned as is), a list of callbacks
            (each converted by this function, then a `CallbackList`) or a callable `(locals, globals) -> bool`
            (a `ConvertCallback`).

    Raises:
        ValueError: (one line) for anything else.
    """
    if callback is None:
        return ConvertCallback(None)
    if isinstance(callback, BaseCallback):
        return callback
    if isinstance(callback, (list, tuple)):
        return CallbackList([make_callback(item) for item in callback])
    if callable(callback):
        return ConvertCallback(callback)
    raise ValueError(
        f"callback: expected None, a BaseCallback, a list of callbacks or a callable (locals, globals) -> bool, "
        f"got {_describe(callback)}"
    )


def optional_callback(callback: Any) -> BaseCallback | None:
    return None if callback is None else make_callback(callback)


def _describe(value: Any) -> str:
    """`type(value).__name__`, or for a list the type of its first non-callback item."""
    if isinstance(value, (list, tuple)):
        bad = [item for item in value if not isinstance(item, BaseCallback)]
        if bad:
            return f"a {type(value).__name__} containing {type(bad[0]).__name__}"
    return type(value).__name__
