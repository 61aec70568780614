"""The training loop (`kppo.training.train.run_loop`, its `hooks` and `plan`): rounds, hooks, schedules, stops."""

import numpy as np
import pytest

import kppo
from kppo.training.hooks import Hooks
from kppo.training.metrics import check_finite
from kppo.training.plan import Plan, round_sizes
from kppo.training.results import TrainingModel
from kppo.training.runners import make_runner
from kppo.training.train import run_loop
from kppo.core.types import Diagnostics

TINY = dict(num_envs=4, num_steps=8, total_timesteps=4 * 8 * 4, eval_freq=2, num_eval_envs=2, num_hidden_units=8)


def test_round_sizes_cover_every_iteration():
    assert round_sizes(10, 3) == [3, 4, 3]  # bounds round(10/3)=3, round(20/3)=7, 10
    assert round_sizes(4, 4) == [1, 1, 1, 1]
    assert sum(round_sizes(97, 10)) == 97


def test_a_non_finite_diagnostic_is_named():
    diag = Diagnostics(*[0.0] * len(Diagnostics._fields))._replace(value_loss=float("nan"))
    with pytest.raises(FloatingPointError, match="non-finite value_loss in iterations up to 7"):
        check_finite(diag, 7)


@pytest.mark.parametrize("backend", ["tf", "gymnasium"])
def test_hooks_see_every_call_and_the_schedule_forces_one_iteration_per_call(backend):
    config = kppo.Config(**TINY, env_backend=backend, iterations_per_call=4)
    runner = make_runner("CartPole-v1", config)
    model = TrainingModel(runner, config)
    calls, progress, rows = [], [], []
    hooks = Hooks(
        schedule=progress.append, on_call=lambda diag, n, p: calls.append((n, p.total_steps)), on_eval=rows.append
    )
    result = run_loop(runner, Plan([2, 2], True, 4, config.rollout_size, config.total_timesteps), hooks, model)
    runner.close()
    assert [n for n, _ in calls] == [1, 1, 1, 1]  # host-side schedules: one iteration per call
    assert [steps for _, steps in calls] == [32, 64, 96, 128] and model.num_timesteps == 128
    assert progress == [1.0, 0.75, 0.5, 0.25]  # progress_remaining before each rollout, as SB3
    assert len(rows) == 2 and rows[-1]["train/total_steps"] == 128 and rows[-1]["train/gradient_steps"] == 4 * 16
    assert not result.interrupted and not result.stopped and int(result.state.iteration) == 4


def test_should_stop_ends_the_loop_after_the_current_call():
    config = kppo.Config(**TINY, iterations_per_call=1)
    runner = make_runner("CartPole-v1", config)
    polls = []
    hooks = Hooks(should_stop=lambda: polls.append(1) or len(polls) == 3)
    result = run_loop(
        runner, Plan([2, 2], True, 1, config.rollout_size, config.total_timesteps), hooks, TrainingModel(runner, config)
    )
    assert result.interrupted and int(result.state.iteration) == 3 and len(result.rows) == 1


def test_a_plan_without_evaluation_makes_no_rows():
    config = kppo.Config(**TINY)
    runner = make_runner("CartPole-v1", config)
    result = run_loop(
        runner, Plan([3], False, 2, config.rollout_size, config.total_timesteps), Hooks(), TrainingModel(runner, config)
    )
    assert result.rows == [] and int(result.state.iteration) == 3
    assert np.isfinite(result.timings["total_s"])


class _Raises(kppo.BaseCallback):
    def _on_step(self):
        if self.n_calls == 3:
            raise KeyError("rewardz")
        return True


@pytest.mark.parametrize("backend", ["tf", "gymnasium"])
def test_a_callback_that_raises_is_one_line_and_keeps_the_checkpoints(tmp_path, backend):
    config = kppo.Config(**TINY, env_backend=backend, iterations_per_call=1)
    with pytest.raises(RuntimeError) as raised:
        kppo.train("CartPole-v1", config, seed=0, callback=_Raises(), checkpoint_dir=tmp_path)
    message = str(raised.value)
    assert "\n" not in message and message.startswith("callback: _Raises.on_step raised KeyError: 'rewardz' at step ")
    assert isinstance(raised.value.__cause__, KeyError)
    if backend == "tf":  # 3 compiled calls; the first round (2 iterations) ended with a checkpoint
        assert (tmp_path / "checkpoint").is_file()
