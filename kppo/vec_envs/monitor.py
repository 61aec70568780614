"""Stable-Baselines3's `Monitor`: a gymnasium wrapper that records every episode's return, length and time, adds
them to the info of the episode's last step (`info["episode"] = {"r", "l", "t"}`) and writes them to SB3's
`monitor.csv` (a `#{"t_start": ..., "env_id": ...}` line, then the columns `r,l,t` and any `info_keywords`).
`EpisodeWriter` is that file, shared with `VecMonitor` (`kppo.vec_envs.vec_env`)."""

from __future__ import annotations

import csv
import json
import os
import time
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np

EXT = "monitor.csv"


def monitor_path(filename: str) -> str:
    """SB3's naming: a directory gets `monitor.csv` inside it; any other name gets `.monitor.csv` appended."""
    if filename.endswith(EXT):
        return filename
    return os.path.join(filename, EXT) if os.path.isdir(filename) else f"{filename}.{EXT}"


class EpisodeWriter:
    """One `monitor.csv`: the header line and the column names (when `override_existing`, else appended to), then
    a row per episode, flushed at once so a crashed run keeps what it wrote."""

    def __init__(self, filename: str, header: dict[str, Any], keys: tuple[str, ...], override_existing: bool = True):
        self.path = monitor_path(filename)
        try:
            self.file = open(self.path, "w" if override_existing else "a", newline="\n")  # kept open: a row per episode
        except OSError as err:
            raise ValueError(f"filename: could not open {self.path!r} for writing ({type(err).__name__})") from None
        self.writer = csv.DictWriter(self.file, fieldnames=("r", "l", "t", *keys))
        if override_existing:
            self.file.write(f"#{json.dumps(header)}\n")
            self.writer.writeheader()
        self.file.flush()

    def write(self, row: dict[str, Any]) -> None:
        self.writer.writerow(row)
        self.file.flush()

    def close(self) -> None:
        self.file.close()


class Monitor(gym.Wrapper):
    """SB3's `Monitor(env, filename=None, allow_early_resets=True, reset_keywords=(), info_keywords=(),
    override_existing=True)`.

    Args:
        env: the gymnasium env.
        filename: where to write `monitor.csv` (see `monitor_path`); None writes nothing.
        allow_early_resets: False makes a `reset` before the episode ended a RuntimeError (SB3's message).
        reset_keywords: keys of `reset(options=...)` written as columns (SB3 passes them as reset keywords;
            gymnasium's `reset` takes them in `options`).
        info_keywords: keys of the last step's info written as columns.
        override_existing: False appends to an existing file (no header written).
    """

    def __init__(
        self,
        env: gym.Env,
        filename: str | None = None,
        allow_early_resets: bool = True,
        reset_keywords: tuple[str, ...] = (),
        info_keywords: tuple[str, ...] = (),
        override_existing: bool = True,
    ):
        super().__init__(env)
        self.t_start = time.time()
        self.writer = None
        if filename is not None:
            header = {"t_start": self.t_start, "env_id": str(env.spec.id if env.spec is not None else None)}
            self.writer = EpisodeWriter(filename, header, (*reset_keywords, *info_keywords), override_existing)
        self.reset_keywords, self.info_keywords = tuple(reset_keywords), tuple(info_keywords)
        self.allow_early_resets = allow_early_resets
        self.rewards: list[float] = []
        self.needs_reset = True
        self.episode_returns: list[float] = []
        self.episode_lengths: list[int] = []
        self.episode_times: list[float] = []
        self.total_steps = 0
        self.current_reset_info: dict[str, Any] = {}

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        """Starts an episode (SB3's RuntimeError for an early reset when `allow_early_resets` is False)."""
        if not self.allow_early_resets and not self.needs_reset:
            raise RuntimeError(
                "Tried to reset an environment before done. If you want to allow early resets, wrap your env "
                "with Monitor(env, path, allow_early_resets=True)"
            )
        self.rewards, self.needs_reset = [], False
        for key in self.reset_keywords:
            value = (options or {}).get(key)
            if value is None:
                raise ValueError(f"reset: expected the keyword {key!r} in options (a Monitor reset_keyword)")
            self.current_reset_info[key] = value
        return self.env.reset(seed=seed, options=options)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict]:
        """Steps the env; at an episode's end its {"r", "l", "t"} go into `info["episode"]` and `monitor.csv`."""
        if self.needs_reset:
            raise RuntimeError("Tried to step environment that needs reset")
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.rewards.append(float(reward))
        self.total_steps += 1
        if terminated or truncated:
            self.needs_reset = True
            episode: dict[str, Any] = {
                "r": round(float(np.sum(self.rewards)), 6),
                "l": len(self.rewards),
                "t": round(time.time() - self.t_start, 6),
            }
            missing = [key for key in self.info_keywords if key not in info]
            if missing:
                raise KeyError(f"info_keywords: expected {missing} in the episode's last info, got keys {sorted(info)}")
            row = {**episode, **self.current_reset_info, **{key: info[key] for key in self.info_keywords}}
            self.episode_returns.append(episode["r"])
            self.episode_lengths.append(episode["l"])
            self.episode_times.append(time.time() - self.t_start)
            if self.writer is not None:
                self.writer.write(row)
            info["episode"] = {**episode, **{key: info[key] for key in self.info_keywords}}
        return obs, reward, terminated, truncated, info

    def close(self) -> None:
        """Closes the env and `monitor.csv`."""
        super().close()
        if self.writer is not None:
            self.writer.close()

    def get_total_steps(self) -> int:
        """Steps taken over all episodes."""
        return self.total_steps

    def get_episode_rewards(self) -> list[float]:
        """Every finished episode's return."""
        return self.episode_returns

    def get_episode_lengths(self) -> list[int]:
        """Every finished episode's length."""
        return self.episode_lengths

    def get_episode_times(self) -> list[float]:
        """Seconds from the Monitor's start to each episode's end."""
        return self.episode_times
