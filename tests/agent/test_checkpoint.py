"""Agent directories: round trip, foreign or mismatched input, corrupted files; never pickle."""

import json

import gymnasium as gym
import numpy as np
import pytest

from kppo.training.agents import read_metadata
from kppo.training.runners.settings import agent_spec
from kppo.agent import checkpoint
from kppo.core import normalization
from kppo._tf import tf
from kppo.config.options import Config
from kppo.agent.agent import make_agent

OBS = gym.spaces.Dict({"a": gym.spaces.Box(-1, 1, (2,), np.float32), "b": gym.spaces.Box(0, 5, (1,), np.float32)})
ACT = gym.spaces.Box(np.array([-3.0, 0.0], np.float32), np.array([0.5, 4.0], np.float32))


SMALL = Config(num_hidden_units=8)


def _saved(tmp_path, config=SMALL):
    agent = make_agent(agent_spec(config), 3, ACT)
    stats = normalization.update_moments(
        normalization.initial_stats([3]), tf.constant([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]])
    )
    ret = normalization.update_moments(normalization.initial_stats(()), tf.constant([4.0, 6.0]))
    path = checkpoint.save(tmp_path / "agent", config.to_yaml(), agent, stats, ret, OBS, ACT, {"note": 1})
    return path, agent, stats, ret


def test_round_trip(tmp_path):
    path, agent, stats, ret = _saved(tmp_path)
    config, metadata, obs_space, act_space = read_metadata(path)
    assert config == Config(num_hidden_units=8) and metadata["extra"] == {"note": 1}
    assert obs_space == OBS and act_space == ACT
    fresh = make_agent(agent_spec(config.replace(seed=5)), 3, act_space)
    obs_stats, ret_stats = checkpoint.restore(path, fresh, [3])
    for a, b in zip(agent.variables, fresh.variables):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    for got, want in zip(list(obs_stats) + list(ret_stats), list(stats) + list(ret)):
        np.testing.assert_allclose(got.numpy(), want.numpy())
    assert not list(path.rglob("*.pkl")) and not list(path.rglob("*.pickle"))


def test_mismatched_network_is_a_one_line_error(tmp_path):
    path, *_ = _saved(tmp_path)
    wider = make_agent(agent_spec(Config(num_hidden_units=16)), 3, ACT)
    with pytest.raises(ValueError, match="weights: could not restore") as err:
        checkpoint.restore(path, wider, [3])
    assert "\n" not in str(err.value)


def test_corrupted_weights_are_a_clear_error(tmp_path):
    path, *_ = _saved(tmp_path)
    for data in path.glob("weights/ckpt.data-*"):
        data.write_bytes(data.read_bytes()[:100])
    with pytest.raises(ValueError, match="weights: could not restore"):
        checkpoint.restore(path, make_agent(agent_spec(Config(num_hidden_units=8)), 3, ACT), [3])


def test_foreign_directories_and_versions(tmp_path):
    with pytest.raises(ValueError, match="path: expected a kppo agent directory"):
        read_metadata(tmp_path)
    path, *_ = _saved(tmp_path)
    meta = json.loads((path / "metadata.json").read_text())
    meta["format"] = 99
    (path / "metadata.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match=r"metadata.json: expected format 1, got 99"):
        read_metadata(path)


def test_save_replaces_atomically(tmp_path):
    path, agent, stats, ret = _saved(tmp_path)
    checkpoint.save(path, Config(num_hidden_units=8).to_yaml(), agent, stats, ret, OBS, ACT)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["agent"]  # no staging directories left behind


def test_a_failing_write_is_one_line_and_leaves_the_previous_agent_as_it_was(tmp_path, monkeypatch):
    """A full disk simulated by a write that fails half way: the earlier agent directory is untouched."""
    import errno
    import pathlib

    path, agent, stats, ret = _saved(tmp_path)
    before = sorted((p.relative_to(path), p.read_bytes()) for p in path.rglob("*") if p.is_file())

    def full_disk(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pathlib.Path, "write_text", full_disk)
    with pytest.raises(OSError) as raised:
        checkpoint.save(path, Config(num_hidden_units=8).to_yaml(), agent, stats, ret, OBS, ACT)
    monkeypatch.undo()
    assert str(raised.value) == (
        f"path: could not write the agent to {str(path)!r} (No space left on device); nothing there was changed"
    )
    after = sorted((p.relative_to(path), p.read_bytes()) for p in path.rglob("*") if p.is_file())
    assert after == before and [p.name for p in tmp_path.iterdir()] == ["agent"]  # no staging left behind


def test_a_read_only_folder_is_one_line(tmp_path, monkeypatch):
    """What a read-only run directory does to the save (simulated: CI runs as root, which writes anywhere)."""
    import errno
    import tempfile

    _path, agent, stats, ret = _saved(tmp_path)

    def read_only(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(tempfile, "mkdtemp", read_only)
    with pytest.raises(OSError, match=r"path: could not write the agent to .*other' \(Permission denied\); nothing"):
        checkpoint.save(tmp_path / "other", Config(num_hidden_units=8).to_yaml(), agent, stats, ret, OBS, ACT)
