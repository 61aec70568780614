"""Saving and loading a trained agent without pickle: `config.yaml` + `metadata.json` + a `tf.train.Checkpoint`.

Layout of a saved agent directory:

    config.yaml      the resolved `kppo.Config`
    metadata.json    kppo version, observation/action spaces, step counters, extra fields of the saver
    weights/         tf.train.Checkpoint: actor, critic, optimizer, observation and return statistics

Loading reads only YAML, JSON and TensorFlow checkpoint files: nothing in them is executed. The same files zipped
(`kppo.PPO.save`, SB3's habit) are read too (`kppo.agent.archive`).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from kppo._tf import tf
from kppo.agent.archive import agent_dir
from kppo.config.options import Config
from kppo.core.errors import reason
from kppo.core.normalization import MomentVariables, initial_stats
from kppo.core.types import Moments
from kppo.version import __version__

FORMAT_VERSION = 1


def space_to_dict(space: gym.spaces.Space) -> dict[str, Any]:
    """JSON description of the spaces kppo supports (Box, Discrete, MultiDiscrete, MultiBinary, Dict of Boxes)."""
    if isinstance(space, gym.spaces.Box):
        return {
            "type": "Box",
            "low": space.low.tolist(),
            "high": space.high.tolist(),
            "shape": list(space.shape),
            "dtype": str(space.dtype),
        }
    if isinstance(space, gym.spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, gym.spaces.MultiDiscrete):
        return {"type": "MultiDiscrete", "nvec": space.nvec.tolist(), "start": np.asarray(space.start).tolist()}
    if isinstance(space, gym.spaces.MultiBinary):
        return {"type": "MultiBinary", "n": np.asarray(space.n).tolist()}
    if isinstance(space, gym.spaces.Dict):
        return {"type": "Dict", "spaces": {key: space_to_dict(sub) for key, sub in space.spaces.items()}}
    raise ValueError(f"space: cannot describe {space} (expected Box, Discrete, MultiDiscrete, MultiBinary or Dict)")


def space_from_dict(d: dict[str, Any]) -> gym.spaces.Space:
    kind = d.get("type")
    if kind == "Box":
        low, high = (np.asarray(d[k], dtype=d["dtype"]).reshape(d["shape"]) for k in ("low", "high"))
        return gym.spaces.Box(low, high, tuple(d["shape"]), np.dtype(d["dtype"]))
    if kind == "Discrete":
        return gym.spaces.Discrete(d["n"], start=d["start"])
    if kind == "MultiDiscrete":
        return gym.spaces.MultiDiscrete(d["nvec"], start=d["start"])
    if kind == "MultiBinary":
        return gym.spaces.MultiBinary(d["n"])
    if kind == "Dict":
        return gym.spaces.Dict({key: space_from_dict(sub) for key, sub in d["spaces"].items()})
    raise ValueError(f"metadata.json: unknown space type {kind!r}")


def _trackable(agent: Any, obs_stats: Moments, return_stats: Moments):
    """A checkpoint of the agent (a `kppo.agent.agent.Agent`) and both statistics (held in variables while it is written
    or read)."""
    obs, ret = MomentVariables(obs_stats.mean.shape), MomentVariables(())
    obs.assign(obs_stats)
    ret.assign(return_stats)
    cells = {} if getattr(agent, "lstm", None) is None else {"memory": agent.lstm}  # a recurrent agent's LSTMs
    ckpt = tf.train.Checkpoint(
        actor=agent.actor, critic=agent.critic, optimizer=agent.optimizer, obs_stats=obs, return_stats=ret, **cells
    )
    return ckpt, obs, ret


def save(
    path: str | Path,
    config: Config,
    agent: Any,
    obs_stats: Moments,
    return_stats: Moments,
    observation_space: gym.spaces.Space,
    action_space: gym.spaces.Space,
    extra: dict[str, Any] | None = None,
) -> Path:
    """Writes the agent directory atomically (to a temporary sibling, then renamed over `path`)."""
    path, staging = Path(path), None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
        config.to_yaml(staging / "config.yaml")
        metadata = {
            "format": FORMAT_VERSION,
            "kppo_version": __version__,
            "tensorflow_version": tf.__version__,
            "observation_space": space_to_dict(observation_space),
            "action_space": space_to_dict(action_space),
            "extra": extra or {},
        }
        (staging / "metadata.json").write_text(json.dumps(metadata, indent=2))
        ckpt, _, _ = _trackable(agent, obs_stats, return_stats)
        ckpt.write(str(staging / "weights" / "ckpt"))
        _swap_in(staging, path)
    except (OSError, tf.errors.OpError) as err:  # a full disk, a read-only folder: one line; `path` keeps its files
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
        why = getattr(err, "strerror", None) or reason(err)
        raise OSError(f"path: could not write the agent to {str(path)!r} ({why}); nothing there was changed") from err
    except BaseException:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
        raise
    return path


def _swap_in(staging: Path, path: Path) -> None:
    """Renames `staging` to `path`; an existing `path` is moved aside first and put back if the rename fails."""
    if not path.exists():
        os.replace(staging, path)
        return
    aside = staging.with_name(staging.name + ".previous")
    os.replace(path, aside)
    try:
        os.replace(staging, path)
    except OSError:
        os.replace(aside, path)
        raise
    shutil.rmtree(aside, ignore_errors=True)


def read_metadata(path: str | Path) -> tuple[Config, dict[str, Any], gym.spaces.Space, gym.spaces.Space]:
    """(config, metadata, observation_space, action_space) of a saved agent (a directory, a zip of one, or a name
    saved as `name.zip`: `kppo.agent.archive.agent_dir`); one-line errors for foreign input."""
    path = agent_dir(path)
    if not (path / "metadata.json").is_file() or not (path / "config.yaml").is_file():
        raise ValueError(f"path: expected a kppo agent directory with config.yaml and metadata.json, got {str(path)!r}")
    try:
        metadata = json.loads((path / "metadata.json").read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"metadata.json: not valid JSON ({err.msg} at line {err.lineno})") from None
    if metadata.get("format") != FORMAT_VERSION:
        raise ValueError(f"metadata.json: expected format {FORMAT_VERSION}, got {metadata.get('format')!r}")
    config = Config.from_yaml(path / "config.yaml")
    return config, metadata, space_from_dict(metadata["observation_space"]), space_from_dict(metadata["action_space"])


def restore(path: str | Path, agent: Any, obs_shape: list[int]) -> tuple[Moments, Moments]:
    """Restores weights, optimizer and statistics into `agent` (a `kppo.agent.agent.Agent` built for the saved config
    and spaces; `kppo.agent.agent.load_agent` does both).

    Returns:
        (observation statistics, return statistics).
    """
    ckpt, obs, ret = _trackable(agent, initial_stats(obs_shape), initial_stats(()))
    prefix = str(agent_dir(path) / "weights" / "ckpt")
    try:
        ckpt.read(prefix).assert_existing_objects_matched()
    except (tf.errors.OpError, ValueError, AssertionError, IndexError) as err:
        raise ValueError(f"weights: could not restore {prefix!r} into this network ({reason(err)})") from None
    return obs.read(), ret.read()


# ---------------------------------------------------------------------------------------------------------------
# Checkpoints during training (resume)
# ---------------------------------------------------------------------------------------------------------------
