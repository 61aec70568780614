"""Learning runs (slow): fixed seeds, thresholds from the issue, configs from configs/."""

from pathlib import Path

import pytest

import kppo

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(5))
def test_cartpole_fixed_setting_reaches_475(seed):
    result = kppo.train(config=kppo.Config.from_yaml(CONFIGS / "cartpole.yaml"), seed=seed)
    assert result.metrics["train/total_steps"][-1] == 244 * 2048
    assert result.metrics["eval/mean_returns"][-1] >= 475


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(3))
def test_pendulum_reaches_minus_250(seed):
    result = kppo.train(config=kppo.Config.from_yaml(CONFIGS / "pendulum.yaml"), seed=seed)
    assert result.metrics["eval/mean_returns"][-1] >= -250
