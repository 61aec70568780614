"""SB3's `RolloutBuffer` as a read-only view of kppo's last rollout (stable_baselines3/common/buffers.py): its field
names and shapes, and `get(batch_size)` in SB3's order. kppo's rollout lives in tensors; this is a numpy copy."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple

import numpy as np

from kppo.core.types import Rollout
from kppo.sb3.lightning import RolloutBufferSamples


class RolloutBufferView(NamedTuple):
    """SB3's `RolloutBuffer` fields of the last rollout, as numpy arrays [n_steps, n_envs, ...] (read-only: kppo's
    rollout lives in tensors; this is a copy). Observations are what the policy saw (normalized when
    `normalize_obs`), rewards as the update used them (scaled when `normalize_reward`), as in SB3's buffer."""

    observations: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    returns: np.ndarray
    episode_starts: np.ndarray
    values: np.ndarray
    log_probs: np.ndarray
    advantages: np.ndarray
    buffer_size: int
    n_envs: int
    gamma: float
    gae_lambda: float
    full: bool = True
    pos: int = 0

    def get(self, batch_size: int | None = None) -> Iterator[RolloutBufferSamples]:
        """SB3's `RolloutBuffer.get`: the rollout flattened env-major (row env * n_steps + step, SB3's
        `swap_and_flatten`), in the order of one `np.random.permutation`, in minibatches of `batch_size` (None:
        one of all rows)."""
        rows = self.buffer_size * self.n_envs
        size = rows if batch_size is None else int(batch_size)
        order = np.random.permutation(rows)

        def flat(x: np.ndarray) -> np.ndarray:
            return np.swapaxes(x, 0, 1).reshape(rows, *x.shape[2:])

        fields = (self.observations, self.actions, self.values, self.log_probs, self.advantages, self.returns)
        flats = [flat(x) for x in fields]
        for start in range(0, rows, size):
            index = order[start : start + size]
            yield RolloutBufferSamples(*(x[index] for x in flats))


def rollout_view(rollout: Rollout, gamma: float, gae_lambda: float) -> RolloutBufferView:
    """`rollout` with SB3's buffer names; a Discrete action becomes [n_steps, n_envs, 1] as in SB3."""
    traj = rollout.trajectory

    def array(x: Any) -> np.ndarray:
        return np.asarray(x.numpy() if hasattr(x, "numpy") else x)

    actions = array(traj.action)
    if actions.ndim == 2:
        actions = actions[..., None]
    steps, envs = actions.shape[:2]
    return RolloutBufferView(
        observations=array(traj.obs),
        actions=actions,
        rewards=array(traj.reward),
        returns=array(rollout.returns),
        episode_starts=array(traj.episode_start).astype(np.float32),
        values=array(traj.value),
        log_probs=array(traj.log_prob),
        advantages=array(rollout.advantages),
        buffer_size=int(steps),
        n_envs=int(envs),
        gamma=float(gamma),
        gae_lambda=float(gae_lambda),
        pos=int(steps),
    )
