"""TF-native vectorized environments: `make(name)` for the built-in tasks, `wrap(task)` for your own."""

from __future__ import annotations

from kppo._tf import tf
from kppo.core import counter_rng
from kppo.envs.tasks.acrobot import Acrobot
from kppo.envs.base import StepResult, Task, VecEnv
from kppo.envs.tasks.cartpole import CartPole, CartPoleNoVel
from kppo.envs.tasks.minatar_asterix import Asterix, AsterixGymnax
from kppo.envs.tasks.minatar_breakout import Breakout, BreakoutGymnax
from kppo.envs.tasks.minatar_freeway import Freeway, FreewayGymnax
from kppo.envs.tasks.minatar_seaquest import Seaquest, SeaquestGymnax
from kppo.envs.tasks.minatar_space_invaders import SpaceInvaders, SpaceInvadersGymnax
from kppo.envs.tasks.mountain_car import MountainCar, MountainCarContinuous
from kppo.envs.tasks.pendulum import Pendulum
from kppo.envs.wrappers import (
    EnvState,
    EpisodeStatistics,
    EpisodeStatsState,
    FixedInit,
    OffsetStep,
    TimeLimitAutoReset,
    wrap,
)

#: Built-in tasks by gymnasium id; `make` also accepts the lower-case short names ("cartpole", ...).
TASKS: dict[str, type[Task]] = {
    "CartPole-v1": CartPole,
    "Acrobot-v1": Acrobot,
    "MountainCar-v0": MountainCar,
    "MountainCarContinuous-v0": MountainCarContinuous,
    "Pendulum-v1": Pendulum,
}
"""Built-in TF-native tasks by gymnasium id; `make` also accepts the lower-case short names ("cartpole", ...)."""
MINATAR_TASKS: dict[str, type[Task]] = {
    "MinAtar/Asterix-v1": Asterix,
    "MinAtar/Breakout-v1": Breakout,
    "MinAtar/Freeway-v1": Freeway,
    "MinAtar/Seaquest-v1": Seaquest,
    "MinAtar/SpaceInvaders-v1": SpaceInvaders,
    "Asterix-MinAtar": AsterixGymnax,
    "Breakout-MinAtar": BreakoutGymnax,
    "Freeway-MinAtar": FreewayGymnax,
    "Seaquest-MinAtar": SeaquestGymnax,
    "SpaceInvaders-MinAtar": SpaceInvadersGymnax,
}
"""MinAtar games by the minatar package's gymnasium id (sticky actions, no time limit) and by gymnax's id (no sticky
actions, 1000 steps); short names "breakout_minatar", "breakout_minatar_gymnax", ... Kept apart from TASKS, whose
entries are checked against gymnasium's own environments (tests/envs/test_parity.py)."""
_SHORT_NAMES = {
    "cartpole": "CartPole-v1",
    "acrobot": "Acrobot-v1",
    "mountaincar": "MountainCar-v0",
    "mountaincar_continuous": "MountainCarContinuous-v0",
    "pendulum": "Pendulum-v1",
    "asterix_minatar": "MinAtar/Asterix-v1",
    "breakout_minatar": "MinAtar/Breakout-v1",
    "freeway_minatar": "MinAtar/Freeway-v1",
    "seaquest_minatar": "MinAtar/Seaquest-v1",
    "space_invaders_minatar": "MinAtar/SpaceInvaders-v1",
    "asterix_minatar_gymnax": "Asterix-MinAtar",
    "breakout_minatar_gymnax": "Breakout-MinAtar",
    "freeway_minatar_gymnax": "Freeway-MinAtar",
    "seaquest_minatar_gymnax": "Seaquest-MinAtar",
    "space_invaders_minatar_gymnax": "SpaceInvaders-MinAtar",
}


def resolve_name(name: str) -> str:
    """Maps a short name or gymnasium id to the gymnasium id of a built-in task (ValueError otherwise)."""
    if name in TASKS or name in MINATAR_TASKS:
        return name
    key = name.lower().replace("-", "_")
    if key in _SHORT_NAMES:
        return _SHORT_NAMES[key]
    raise ValueError(f"env: expected one of {sorted(TASKS | MINATAR_TASKS) + sorted(_SHORT_NAMES)}, got {name!r}")


def make(
    name: str,
    *,
    dtype: tf.DType = tf.float32,
    max_episode_steps: int | None = None,
    fixed_init: bool = False,
    offset_step: bool = False,
    episode_statistics: bool = True,
) -> VecEnv:
    """Builds a built-in TF-native environment by gymnasium id (e.g. "CartPole-v1") or short name ("cartpole").

    Args:
        name: gymnasium id or short name of a built-in task.
        dtype: float dtype of observations, rewards and the physics. Defaults to `tf.float32`
            (`tf.float64` reproduces each gymnasium transition to 1e-9; over long CartPole/Acrobot trajectories
            the last-bit differences of sin/cos grow chaotically, and MountainCarContinuous matches for actions
            inside [-1, 1] only, since gymnasium drops to float32 arithmetic when it clips).
        max_episode_steps: time limit; defaults to gymnasium's for that id.
        fixed_init: restart each env from its own first initial state (rex FIXED_INIT).
        offset_step: stagger the step counters (rex OFFSET_STEP).
        episode_statistics: track episode returns/lengths in the state. Defaults to True.
    """
    task = (TASKS | MINATAR_TASKS)[resolve_name(name)](dtype=dtype)
    return wrap(
        task,
        max_episode_steps=max_episode_steps,
        fixed_init=fixed_init,
        offset_step=offset_step,
        episode_statistics=episode_statistics,
    )


__all__ = [
    "MINATAR_TASKS",
    "TASKS",
    "Acrobot",
    "CartPole",
    "CartPoleNoVel",
    "EnvState",
    "EpisodeStatistics",
    "EpisodeStatsState",
    "FixedInit",
    "MountainCar",
    "MountainCarContinuous",
    "OffsetStep",
    "Pendulum",
    "StepResult",
    "Task",
    "TimeLimitAutoReset",
    "VecEnv",
    "counter_rng",
    "make",
    "resolve_name",
    "wrap",
]
