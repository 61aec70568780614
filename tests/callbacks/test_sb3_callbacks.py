"""SB3's timestep and stop callbacks (`EveryNTimesteps`, `LogEveryNTimesteps`, `ProgressBarCallback`,
`StopTrainingOnNoModelImprovement`) and `CheckpointCallback(save_vecnormalize, save_replay_buffer)`, used as SB3's
"Callbacks" guide uses them, on a real `kppo.PPO` and real gymnasium envs with tiny budgets."""

from __future__ import annotations

import os

import gymnasium as gym
import numpy as np
import pytest

import kppo
from kppo.callbacks.builtin import vec_normalize_env
from kppo.callbacks import (
    BaseCallback,
    CallbackList,
    CheckpointCallback,
    EvalCallback,
    EveryNTimesteps,
    LogEveryNTimesteps,
    ProgressBarCallback,
    StopTrainingOnNoModelImprovement,
)

TINY = dict(n_steps=32, batch_size=32, n_epochs=1, seed=0, policy_kwargs=dict(net_arch=[8]))


@pytest.fixture(scope="module")
def model():
    """One small CartPole PPO for the tests that only train it (each `learn` restarts the timestep count)."""
    return kppo.PPO("MlpPolicy", "CartPole-v1", **TINY)


def _saved(folder) -> list[str]:
    """The checkpoint names in `folder` (a model saved as `name` or `name.zip`)."""
    return sorted(name.removesuffix(".zip") for name in os.listdir(folder))


class Count(BaseCallback):
    """Records `num_timesteps` at every call."""

    def __init__(self):
        super().__init__()
        self.at: list[int] = []

    def _on_step(self) -> bool:
        self.at.append(self.num_timesteps)
        return True


class StopAfter(BaseCallback):
    """Stops training at the `calls`-th step."""

    def __init__(self, calls: int):
        super().__init__()
        self.calls = calls

    def _on_step(self) -> bool:
        return self.n_calls < self.calls


class Parent:
    """Stands in for an EvalCallback: only `best_mean_reward`."""

    best_mean_reward = -np.inf


class StubModel:
    num_timesteps = 0
    logger = None

    def get_env(self):
        return None


def test_every_n_timesteps_checkpoints_as_the_guide_shows(model, tmp_path):
    # SB3's guide: EveryNTimesteps(n_steps=500, callback=CheckpointCallback(save_freq=1, save_path="./logs/"))
    checkpoint_on_event = CheckpointCallback(save_freq=1, save_path=str(tmp_path))
    model.learn(96, callback=EveryNTimesteps(n_steps=40, callback=checkpoint_on_event))
    # 1 env: timesteps 1, 2, ...; fires at 40 and at 80 (40 after the last firing)
    assert _saved(tmp_path) == ["rl_model_40_steps", "rl_model_80_steps"]
    assert checkpoint_on_event.n_calls == 2 and checkpoint_on_event.parent is not None


def test_every_n_timesteps_counts_timesteps_not_calls():
    child = Count()
    event = EveryNTimesteps(10, child)
    model = StubModel()
    event.init_callback(model)
    for step in range(1, 16):
        model.num_timesteps = 4 * step  # 4 envs
        event.on_step()
    # fires at the first call >= 10 after the last firing: 12, 24 (>= 22), 36, 48, 60
    assert child.at == [12, 24, 36, 48, 60]


def test_log_every_n_timesteps_dumps_the_logger(model):
    dumps: list[tuple[int, dict]] = []
    dump = model.logger.dump

    def recording_dump(step):
        dumps.append((step, dict(model.logger.values)))
        dump(step)

    model.logger.dump = recording_dump
    try:
        model.learn(64, callback=LogEveryNTimesteps(n_steps=20), log_interval=100)
    finally:
        model.logger.dump = dump
    assert [step for step, _ in dumps] == [20, 40, 60]
    assert [values["time/total_timesteps"] for _, values in dumps] == [20, 40, 60]
    episodes = [values for _, values in dumps if "rollout/ep_len_mean" in values]  # CartPole episodes end early
    assert episodes and all(values["rollout/ep_len_mean"] >= 8 for values in episodes)


def test_log_every_n_timesteps_needs_a_logger():
    with pytest.raises(RuntimeError, match="LogEveryNTimesteps: StubModel has no logger"):
        LogEveryNTimesteps(10).init_callback(StubModel())


def test_progress_bar_callback_counts_the_timesteps_of_this_learn_call(model):
    bar = ProgressBarCallback()
    model.learn(64, callback=[bar])
    task = bar.pbar.progress.tasks[0]
    assert (task.total, task.completed) == (64, 64)
    model.learn(32, callback=bar, reset_num_timesteps=False)  # the bar covers this call only
    task = bar.pbar.progress.tasks[0]
    assert (task.total, task.completed) == (32, 32)


@pytest.mark.parametrize(
    "bests, max_no_improvement, min_evals, stop_at",
    [
        # counting starts at evaluation 3: evals 3, 4, 5 without improvement -> 3 > 2 at evaluation 5
        ([1, 2, 2, 2, 2, 2], 2, 2, 5),
        # evaluation 1 improves on -inf; 2: 1 without; 3 improves (count back to 0); 4, 5 without: 2 > 1 at 5
        ([1, 1, 3, 3, 3, 3], 1, 0, 5),
        ([1, 2, 3, 4, 5], 0, 0, None),  # always improving
    ],
)
def test_stop_on_no_model_improvement_counts_evaluations(bests, max_no_improvement, min_evals, stop_at):
    parent = Parent()
    stop = StopTrainingOnNoModelImprovement(max_no_improvement, min_evals)
    stop.parent = parent  # type: ignore[assignment]
    stop.init_callback(StubModel())
    stopped = None
    for evaluation, best in enumerate(bests, start=1):
        parent.best_mean_reward = best
        if not stop.on_step():
            stopped = evaluation
            break
    assert stopped == stop_at


def test_stop_on_no_model_improvement_needs_an_eval_callback():
    stop = StopTrainingOnNoModelImprovement(3)
    stop.init_callback(StubModel())
    with pytest.raises(RuntimeError, match="callback_after_eval of an EvalCallback"):
        stop.on_step()


def test_eval_callback_stops_training_without_improvement(capsys):
    # SB3's guide: EvalCallback(eval_env, eval_freq=1000, callback_after_eval=stop_train_callback, verbose=1) with
    # StopTrainingOnNoModelImprovement(max_no_improvement_evals=3, min_evals=5, verbose=1). A deterministic lake
    # and a policy that does not change during the first rollout: every evaluation scores the same.
    eval_env = gym.make("FrozenLake-v1", is_slippery=False)
    stop_train_callback = StopTrainingOnNoModelImprovement(max_no_improvement_evals=3, min_evals=5, verbose=1)
    eval_callback = EvalCallback(eval_env, eval_freq=2, callback_after_eval=stop_train_callback, verbose=0, warn=False)
    model = kppo.PPO("MlpPolicy", gym.make("FrozenLake-v1", is_slippery=False), n_steps=64, batch_size=64, seed=0)
    model.learn(1000, callback=eval_callback)
    # evaluation 1 sets the best; 2..5 are not counted; 6, 7, 8, 9 are not better: 4 > 3 stops at evaluation 9
    assert len(eval_callback.evaluations_results) == 9 and model.num_timesteps == 18
    assert "no new best model in the last 4 evaluations" in capsys.readouterr().out


def test_checkpoint_saves_vecnormalize_and_skips_the_replay_buffer(tmp_path):
    env = kppo.VecNormalize(gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")] * 2))
    model = kppo.PPO("MlpPolicy", env, **TINY)
    checkpoint = CheckpointCallback(
        save_freq=8, save_path=str(tmp_path), name_prefix="ppo", save_replay_buffer=True, save_vecnormalize=True
    )
    model.learn(10_000, callback=CallbackList([checkpoint, StopAfter(16)]))  # stops within the first rollout
    assert _saved(tmp_path) == [
        "ppo_16_steps",
        "ppo_32_steps",
        "ppo_vecnormalize_16_steps.pkl",
        "ppo_vecnormalize_32_steps.pkl",
    ]  # 2 envs: calls 8 and 16 are timesteps 16 and 32; PPO has no replay buffer
    saved = kppo.VecNormalize.load(tmp_path / "ppo_vecnormalize_32_steps.pkl", env.venv).obs_rms
    checkpoint_path = next(p for p in tmp_path.iterdir() if p.name.startswith("ppo_32_steps"))
    stats = kppo.PPO.load(checkpoint_path).statistics()[0]  # the statistics the model had when both were saved
    np.testing.assert_array_equal(saved.mean, np.asarray(stats.mean))
    np.testing.assert_array_equal(saved.var, np.asarray(stats.var))


def test_checkpoint_without_vecnormalize_saves_only_the_model(model, tmp_path):
    model.learn(32, callback=CheckpointCallback(32, str(tmp_path), save_vecnormalize=True))
    assert _saved(tmp_path) == ["rl_model_32_steps"]


def test_the_vecnormalize_is_found_under_other_wrappers():
    class Wrapper:
        def __init__(self, inner, name):
            setattr(self, name, inner)

    class Normalizer:
        obs_rms, norm_obs = None, True

        def save(self, path):
            pass

    class Model:
        def __init__(self, env):
            self.env = env

        def get_env(self):
            return self.env

    normalizer = Normalizer()
    assert vec_normalize_env(Model(Wrapper(Wrapper(normalizer, "env"), "vector_env"))) is normalizer
    assert vec_normalize_env(Model(Wrapper(object(), "venv"))) is None
    model = Model(normalizer)
    model.get_vec_normalize_env = lambda: None  # SB3's getter, when the model has it, decides
    assert vec_normalize_env(model) is None
