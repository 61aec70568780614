"""The metric vocabulary (`kppo.training.metrics`): SB3's logger keys derive from `METRICS`."""

from kppo.training.metrics import METRICS, Progress, sb3_record, training_row
from kppo.core.types import Diagnostics


def _sums(**values):
    return Diagnostics(*[0.0] * len(Diagnostics._fields))._replace(**values)


def test_training_row_means_over_iterations_and_episodes():
    sums = _sums(total_loss=3.0, entropy=1.5, episode_return_sum=30.0, episode_length_sum=12.0, episodes=3.0)
    row = training_row(sums, 3, 64, 2.0, Progress(192, 3, 12, 1e-3, 0.2, 5.0))
    assert row["train/total_loss"] == 1.0 and row["train/entropy"] == 0.5
    assert row["rollout/ep_rew_mean"] == 10.0 and row["rollout/ep_len_mean"] == 4.0
    assert row["time/steps_per_s"] == 3 * 64 / 2.0 and row["train/gradient_steps"] == 12
    assert set(row) <= set(METRICS)


def test_sb3_record_renames_signs_and_casts_as_sb3():
    row = training_row(_sums(entropy=0.7, approx_kl=0.01), 1, 64, 0.5, Progress(64, 1, 4, 3e-4, 0.2, 0.5))
    record = sb3_record(row)
    assert record["train/entropy_loss"] == -0.7 and record["train/approx_kl"] == 0.01
    assert record["time/total_timesteps"] == 64 and isinstance(record["time/fps"], int) and record["time/fps"] == 128
    assert record["train/n_updates"] == 4 and record["train/clip_range"] == 0.2
    assert "train/grad_norm" not in record  # SB3 logs no such key
    assert set(record) == {m.sb3 for name, m in METRICS.items() if m.sb3 and name in row}
