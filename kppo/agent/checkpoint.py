"""Saving and loading a trained agent without pickle: `config.yaml` + `metadata.json` + a `tf.train.Checkpoint`.

Layout of a saved agent directory:

    config.yaml      the run's `kppo.Config` (`kppo.training.agents` reads it)
    metadata.json    kppo version, observation/action spaces, step counters, extra fields of the saver
    weights/         tf.train.Checkpoint: actor, critic, optimizer, observation and return statistics

Loading reads only YAML, JSON and TensorFlow checkpoint files: nothing in them is executed. The same files zipped
(`kppo.PPO.save`, SB3's habit) are read too (`kppo.agent.archive`). Every refusal is one line naming the agent (the
zip it came from) and the file; a config whose networks cannot fit in the saved weights (a changed `config.yaml`) is
refused before any network is built, so a file cannot make the loader allocate more than its weights hold.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np

from kppo._tf import tf
from kppo.agent.archive import agent_dir, source_name
from kppo.agent.spec import AgentSpec
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


def space_from_dict(d: Any) -> gym.spaces.Space:
    """The space `space_to_dict` described; a ValueError (or the KeyError, TypeError, OverflowError numpy and
    gymnasium raise for a value they cannot take) for anything else."""
    if not isinstance(d, dict):
        raise ValueError(f"expected a space description (a JSON object), got {type(d).__name__}")
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
        if not isinstance(d.get("spaces"), dict):
            raise ValueError(f"expected a Dict space's 'spaces' object, got {type(d.get('spaces')).__name__}")
        return gym.spaces.Dict({key: space_from_dict(sub) for key, sub in d["spaces"].items()})
    raise ValueError(f"unknown space type {kind!r}")


#: What numpy and gymnasium raise for a space description they cannot build (a missing key, a wrong type, a shape
#: that does not fit its bounds, a number past int64); RecursionError: Dict spaces nested past Python's stack.
_SPACE_ERRORS = (KeyError, TypeError, ValueError, IndexError, OverflowError, RecursionError)


def _read_space(metadata: dict[str, Any], key: str, source: str) -> gym.spaces.Space:
    try:
        return space_from_dict(metadata[key])
    except _SPACE_ERRORS as err:
        why = f"no {err}" if isinstance(err, KeyError) else reason(err)
        raise ValueError(
            f"{source}: metadata.json: {key}: expected a space kppo saves, got one it cannot read ({why})"
        ) from None


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
    config_yaml: str,
    agent: Any,
    obs_stats: Moments,
    return_stats: Moments,
    observation_space: gym.spaces.Space,
    action_space: gym.spaces.Space,
    extra: dict[str, Any] | None = None,
) -> Path:
    """Writes the agent directory atomically (to a temporary sibling, then renamed over `path`); `config_yaml`: the
    run's Config as YAML (`kppo.Config.to_yaml`)."""
    path, staging = Path(path), None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
        (staging / "config.yaml").write_text(config_yaml)
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


class AgentFiles(NamedTuple):
    """A saved agent's files, read: the directory (unzipped; its `config.yaml`, a Config's, is the training layer's to
    parse), the name errors give it, its metadata and spaces."""

    path: Path
    source: str
    metadata: dict[str, Any]
    observation_space: gym.spaces.Space
    action_space: gym.spaces.Space


def read_files(path: str | Path) -> AgentFiles:
    """The files of a saved agent (a directory, a zip of one, or a name saved as `name.zip`:
    `kppo.agent.archive.agent_dir`); one-line errors naming it for foreign input."""
    path = agent_dir(path)
    source = source_name(path)
    if not (path / "metadata.json").is_file() or not (path / "config.yaml").is_file():
        raise ValueError(f"path: expected a kppo agent directory with config.yaml and metadata.json, got {source}")
    metadata = _read_json(path / "metadata.json", source)
    if metadata.get("format") != FORMAT_VERSION:
        raise ValueError(f"{source}: metadata.json: expected format {FORMAT_VERSION}, got {metadata.get('format')!r}")
    if not isinstance(metadata.get("extra", {}), dict):
        raise ValueError(
            f"{source}: metadata.json: extra: expected a JSON object, got {type(metadata['extra']).__name__}"
        )
    observation_space, action_space = (
        _read_space(metadata, key, source) for key in ("observation_space", "action_space")
    )
    return AgentFiles(path, source, metadata, observation_space, action_space)


def _read_json(file: Path, source: str) -> dict[str, Any]:
    try:
        metadata = json.loads(file.read_bytes())
    except json.JSONDecodeError as err:
        raise ValueError(f"{source}: metadata.json: not valid JSON ({err.msg} at line {err.lineno})") from None
    except (UnicodeDecodeError, RecursionError) as err:  # not UTF-8 (nor UTF-16/32); arrays nested past the stack
        raise ValueError(f"{source}: metadata.json: expected JSON text, got {reason(err)}") from None
    if not isinstance(metadata, dict):
        raise ValueError(f"{source}: metadata.json: expected a JSON object, got {type(metadata).__name__}")
    return metadata


def check_fits(spec: AgentSpec, files: AgentFiles) -> None:
    """A one-line ValueError when the networks `spec` describes hold more numbers than the checkpoint's data files
    have bytes for: the config was changed after the weights were saved (e.g. `num_hidden_units: 1000000000`, which
    building would try to allocate), or the weights are missing or cut."""
    path, source = files.path, files.source
    held = sum(f.stat().st_size for f in (path / "weights").glob("ckpt.data-*") if f.is_file())
    least = spec.least_weights(gym.spaces.flatdim(files.observation_space))
    if 4 * least > held:
        raise ValueError(
            f"{source}: weights: expected the weights of config.yaml's networks (at least {4 * least:,} bytes of "
            f"float32), got {held:,} bytes in weights/ckpt.data-* (a changed config.yaml, or missing or cut weights)"
        )


def restore(path: str | Path, agent: Any, obs_shape: list[int]) -> tuple[Moments, Moments]:
    """Restores weights, optimizer and statistics into `agent` (a `kppo.agent.agent.Agent` built for the saved config
    and spaces; `kppo.training.agents.load_agent` does both).

    Returns:
        (observation statistics, return statistics).
    """
    ckpt, obs, ret = _trackable(agent, initial_stats(obs_shape), initial_stats(()))
    directory = agent_dir(path)
    try:
        ckpt.read(str(directory / "weights" / "ckpt")).assert_existing_objects_matched()
    except (tf.errors.OpError, ValueError, AssertionError, IndexError) as err:
        raise ValueError(
            f"weights: could not restore {source_name(directory)}'s weights/ckpt into this network ({reason(err)})"
        ) from None
    return obs.read(), ret.read()


# ---------------------------------------------------------------------------------------------------------------
# Checkpoints during training (resume)
# ---------------------------------------------------------------------------------------------------------------
