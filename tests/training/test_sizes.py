"""Sizes that do not fit (issue 39): a config whose networks or buffers are larger than the device's memory is a
one-line `OutOfMemoryError` (a ValueError) naming its sizes, from `kppo.train`, `kppo.PPO` and the CLI; a run's
config.yaml whose widths its checkpoints do not have is refused before anything is built
(tests/agent/test_archive_properties.py)."""

from __future__ import annotations

import pytest

import kppo
from kppo.cli.main import main
from kppo.core.errors import OutOfMemoryError
from kppo.training.sizes import network_widths
from tests.helpers.fuzz import one_line

HUGE = 2**20  # a [2**20, 2**20] float32 kernel: 4 TiB
TINY = dict(num_envs=2, num_steps=8, num_minibatches=1, total_timesteps=16)


def test_network_widths_are_the_widths_the_networks_are_built_with():
    assert network_widths(kppo.Config(num_hidden_units=7)) == [("num_hidden_units", 7)]
    assert network_widths(kppo.Config(num_hidden_layers=0)) == []
    assert network_widths(kppo.Config(actor_hidden_units=(3, 4), critic_hidden_units=(5,))) == [
        ("actor_hidden_units", 3),
        ("actor_hidden_units", 4),
        ("critic_hidden_units", 5),
    ]
    lstm = kppo.Config(actor_hidden_units=(3,), recurrent="lstm", lstm_hidden_size=9)
    assert network_widths(lstm) == [("actor_hidden_units", 3), ("num_hidden_units", 64), ("lstm_hidden_size", 9)]
    cnn = kppo.Config(features_extractor="cnn", features_dim=32, num_hidden_layers=0)
    assert network_widths(cnn) == [("features_dim", 32)]


@pytest.mark.slow  # TensorFlow retries a failed allocation for 10 s
def test_networks_larger_than_memory_are_one_line_naming_the_sizes(tmp_path, capsys):
    with pytest.raises(OutOfMemoryError) as err:
        kppo.train("CartPole-v1", kppo.Config(**TINY, num_hidden_units=HUGE))
    assert isinstance(err.value, ValueError)
    one_line(str(err.value))
    for part in [f"num_hidden_units={HUGE}", "num_envs=2, num_steps=8", f"shape[{HUGE},{HUGE}]"]:
        assert part in str(err.value)
    with pytest.raises(OutOfMemoryError) as err:
        kppo.PPO("MlpPolicy", "CartPole-v1", n_steps=8, batch_size=8, policy_kwargs=dict(net_arch=[HUGE, HUGE]))
    one_line(str(err.value), [f"actor_hidden_units={HUGE}"])
    argv = ["train", "cartpole", "--set", f"num_hidden_units={HUGE}", "--quiet", "--out", str(tmp_path / "run")]
    assert main(argv) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("kppo train: error: config: expected sizes that fit in memory"), line
