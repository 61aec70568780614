"""What a front end plugs into the training loop (`Hooks`) and how the loop calls it: Stable-Baselines3 callbacks
(one-line errors naming the callback, the event and the step), the host runner's per-step hook."""

from __future__ import annotations

from typing import Any, NamedTuple
from collections.abc import Callable

from kppo.core.errors import first_line
from kppo.core.types import Diagnostics
from kppo.rollout.gymnasium import StepRecord
from kppo.training.metrics import Progress


class Hooks(NamedTuple):
    """What a front end plugs into the loop (all optional)."""

    callback: Any = None  # an initialized kppo.callbacks.BaseCallback (SB3's callback contract)
    schedule: Callable[[float], None] | None = None  # progress_remaining -> sets lr/clip (then one iteration a call)
    on_env_step: Callable[[StepRecord], None] | None = None  # host path: each vector step, before callbacks
    on_call: Callable[[Diagnostics, int, Progress], None] | None = None  # (summed diagnostics, iterations, progress)
    on_eval: Callable[[dict], None] | None = None  # each round's metric row
    on_progress: Callable[[int], None] | None = None  # environment steps so far, after every call
    should_stop: Callable[[], bool] | None = None  # polled after every call: True checkpoints and returns
    keras: Any = None  # kppo.training.keras_callbacks.KerasCallbacks (then one iteration a call: an epoch)
    # after each round's row (before its checkpoint): (runner, state, row) -> the state to go on from (PBT)
    between_rounds: Callable[[Any, Any, dict], Any] | None = None


def run_callback(callback: Any, event: str, model: Any, *args: Any) -> Any:
    """`callback.<event>(*args)`; an exception in user code becomes one line naming the callback, the event and the
    step (the original is chained), and stops training with everything written so far kept."""
    try:
        return getattr(callback, event)(*args)
    except Exception as err:  # any user error: named, chained, re-raised
        raise RuntimeError(
            f"callback: {type(callback).__name__}.{event} raised {type(err).__name__}"
            f"{first_line(err)} at step {model.num_timesteps:,}; training stopped "
            "(checkpoints and files written so far are kept)"
        ) from err


def step_hook(hooks: Hooks, model: Any, num_envs: int) -> Callable[[StepRecord], bool] | None:
    """The host runner's per-step hook: counts the step, then SB3's `update_locals` + `on_step`."""
    if hooks.callback is None and hooks.on_env_step is None:
        return None

    def on_step(record: StepRecord) -> bool:
        model.num_timesteps += num_envs
        if hooks.on_env_step is not None:
            hooks.on_env_step(record)
        if hooks.callback is None:
            return True
        hooks.callback.update_locals(record.sb3_locals())
        return run_callback(hooks.callback, "on_step", model)

    return on_step
