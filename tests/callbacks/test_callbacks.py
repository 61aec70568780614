"""`kppo.vec_envs.evaluation.evaluate_policy` and the SB3-style callbacks in `kppo.callbacks`, with small real test
models."""

from __future__ import annotations

import json
import os
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from kppo.callbacks import (
    BaseCallback,
    CallbackList,
    CheckpointCallback,
    ConvertCallback,
    EvalCallback,
    EventCallback,
    StopTrainingOnMaxEpisodes,
    StopTrainingOnRewardThreshold,
    make_callback,
)
from kppo.vec_envs.evaluation import evaluate_policy

MODES = [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP, AutoresetMode.DISABLED]


# ---------------------------------------------------------------------------------------------------------------
# Test models and envs
# ---------------------------------------------------------------------------------------------------------------


class RecordingLogger:
    def __init__(self):
        self.records: dict[str, list] = {}

    def record(self, key, value):
        self.records.setdefault(key, []).append(value)


class CartPoleModel:
    """The model interface for CartPole-v1: a fixed heuristic (balances for 500 steps) or uniform random actions."""

    def __init__(self, random: bool = False, env=None):
        self.random = random
        self.num_timesteps = 0
        self.logger = RecordingLogger()
        self.saved: list[str] = []
        self._env = env
        self._rng = np.random.default_rng(0)

    def predict(self, observation, state=None, episode_start=None, deterministic=False):
        obs = np.asarray(observation, dtype=np.float64)
        if self.random:
            return self._rng.integers(0, 2, size=obs.shape[:-1]), None
        return (obs[..., 2] + 0.5 * obs[..., 3] > 0).astype(np.int64), None

    def save(self, path):
        with open(path, "w") as f:
            json.dump({"num_timesteps": self.num_timesteps, "random": self.random}, f)
        self.saved.append(path)

    def get_env(self):
        return self._env


class CountdownEnv(gym.Env):
    """Episodes of 3, 4, 5, ... steps (one more after each reset), reward 2 per step, `is_success` at the end."""

    observation_space = spaces.Box(0.0, 100.0, (1,), np.float32)
    action_space = spaces.Discrete(2)

    def __init__(self):
        self.next_length, self.length, self.t = 3, 0, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.length, self.next_length, self.t = self.next_length, self.next_length + 1, 0
        return np.array([self.length], np.float32), {}

    def step(self, action):
        self.t += 1
        left = self.length - self.t
        info = {"is_success": True} if left == 0 else {}
        return np.array([left], np.float32), 2.0, left == 0, False, info


class ZeroModel:
    num_timesteps = 0

    def predict(self, observation, state=None, episode_start=None, deterministic=False):
        return np.zeros(np.shape(observation)[:-1], np.int64), None


class Recorder(BaseCallback):
    """Counts every hook; `on_step` returns `result`."""

    def __init__(self, result=True):
        super().__init__()
        self.result = result
        self.events: list[str] = []

    def _init_callback(self):
        self.events.append("init")

    def _on_training_start(self):
        self.events.append("training_start")

    def _on_rollout_start(self):
        self.events.append("rollout_start")

    def _on_step(self):
        self.events.append("step")
        return self.result

    def _on_rollout_end(self):
        self.events.append("rollout_end")

    def _on_training_end(self):
        self.events.append("training_end")


def seeded_cartpole(num_envs: int | None = None, mode=AutoresetMode.NEXT_STEP):
    if num_envs is None:
        env = gym.make("CartPole-v1")
    else:
        env = SyncVectorEnv([lambda: gym.make("CartPole-v1")] * num_envs, autoreset_mode=mode)
    env.reset(seed=0)
    return env


def countdown_vector(num_envs: int, mode, wrap=lambda env: env):
    return SyncVectorEnv([lambda: wrap(CountdownEnv())] * num_envs, autoreset_mode=mode)


def run_training(callback: BaseCallback, model, calls: int, steps_per_call: int = 4) -> list[bool]:
    """What a training loop does: advance `model.num_timesteps`, then `on_step`; returns the on_step results."""
    callback.init_callback(model)
    callback.on_training_start({}, {})
    results = []
    for _ in range(calls):
        model.num_timesteps += steps_per_call
        results.append(callback.on_step())
    callback.on_training_end()
    return results


# ---------------------------------------------------------------------------------------------------------------
# evaluate_policy
# ---------------------------------------------------------------------------------------------------------------


def test_evaluate_env_id():
    mean, std = evaluate_policy(CartPoleModel(), "CartPole-v1", n_eval_episodes=3)
    assert 200 <= mean <= 500 and std >= 0


def test_evaluate_env_returns_episode_lists():
    rewards, lengths = evaluate_policy(
        CartPoleModel(), seeded_cartpole(), n_eval_episodes=4, return_episode_rewards=True, warn=False
    )
    assert len(rewards) == len(lengths) == 4
    assert all(isinstance(r, float) for r in rewards) and all(isinstance(n, int) for n in lengths)
    assert rewards == [float(n) for n in lengths]  # CartPole: reward 1 per step
    assert min(lengths) >= 200


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
def test_evaluate_vector_env(mode):
    rewards, lengths = evaluate_policy(
        CartPoleModel(), seeded_cartpole(3, mode), n_eval_episodes=5, return_episode_rewards=True, warn=False
    )
    assert len(rewards) == len(lengths) == 5
    assert rewards == [float(n) for n in lengths]
    assert min(lengths) >= 200


def test_random_model_scores_much_lower():
    heuristic, _ = evaluate_policy(CartPoleModel(), seeded_cartpole(), n_eval_episodes=5, warn=False)
    random, _ = evaluate_policy(CartPoleModel(random=True), seeded_cartpole(), n_eval_episodes=5, warn=False)
    assert random < 100 < 400 < heuristic


def test_reward_threshold():
    evaluate_policy(CartPoleModel(), "CartPole-v1", n_eval_episodes=2, reward_threshold=150)
    with pytest.raises(AssertionError, match=r"^evaluate_policy: mean reward [\d.]+ is below reward_threshold 400.00$"):
        evaluate_policy(CartPoleModel(random=True), "CartPole-v1", n_eval_episodes=3, reward_threshold=400)


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
def test_vector_episodes_split_and_counted_exactly(mode):
    """7 episodes over 3 sub-envs: 2, 2, 3 (SB3's split); lengths 3, 4, 5 per sub-env; reset steps not counted."""
    steps = []
    rewards, lengths = evaluate_policy(
        ZeroModel(),
        countdown_vector(3, mode),
        n_eval_episodes=7,
        callback=lambda locals_, globals_: steps.append((locals_["i"], locals_["done"], locals_["info"])),
        return_episode_rewards=True,
        warn=False,
    )
    assert sorted(lengths) == [3, 3, 3, 4, 4, 4, 5]
    assert rewards == [2.0 * n for n in lengths]
    ends = [(i, info) for i, done, info in steps if done]
    assert [sum(i == k for i, _ in ends) for k in range(3)] == [2, 2, 3]
    assert all(info.get("is_success") for _, info in ends)  # the final step's info, whatever the mode
    assert len(steps) == sum(lengths)


def test_single_env_plays_sequential_episodes():
    steps = []
    rewards, lengths = evaluate_policy(
        ZeroModel(),
        CountdownEnv(),
        n_eval_episodes=3,
        callback=lambda locals_, globals_: steps.append(locals_["done"]),
        return_episode_rewards=True,
        warn=False,
    )
    assert lengths == [3, 4, 5] and rewards == [6.0, 8.0, 10.0] and sum(steps) == 3 and len(steps) == 12


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
def test_episode_statistics_are_used_and_silence_the_warning(mode):
    """Returns come from RecordEpisodeStatistics (inside a reward scaling): SB3's Monitor semantics."""

    def scaled(env):
        return gym.wrappers.TransformReward(gym.wrappers.RecordEpisodeStatistics(env), lambda r: 10 * r)

    vector = gym.wrappers.vector.TransformReward(
        gym.wrappers.vector.RecordEpisodeStatistics(countdown_vector(2, mode)), lambda r: 10 * r
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for env in [scaled(CountdownEnv()), countdown_vector(2, mode, scaled), vector]:
            rewards, lengths = evaluate_policy(ZeroModel(), env, n_eval_episodes=4, return_episode_rewards=True)
            assert rewards == [2.0 * n for n in lengths], type(env).__name__


def test_unmonitored_env_warns():
    with pytest.warns(UserWarning, match="no episode statistics"):
        evaluate_policy(ZeroModel(), CountdownEnv(), n_eval_episodes=1)


def test_evaluate_rejects_bad_arguments():
    message = r"^env: expected a gymnasium env id, a gym.Env or a gym.vector.VectorEnv, got int$"
    with pytest.raises(ValueError, match=message):
        evaluate_policy(ZeroModel(), 3)
    with pytest.raises(ValueError, match=r"^n_eval_episodes: expected an int >= 1, got 0$"):
        evaluate_policy(ZeroModel(), CountdownEnv(), n_eval_episodes=0)


# ---------------------------------------------------------------------------------------------------------------
# BaseCallback, CallbackList, ConvertCallback, make_callback
# ---------------------------------------------------------------------------------------------------------------


def test_base_callback_bookkeeping():
    callback, model = Recorder(), CartPoleModel()
    assert callback.model is None and callback.parent is None and callback.n_calls == 0 and callback.num_timesteps == 0
    with pytest.raises(RuntimeError, match=r"^Recorder: call init_callback\(model\) before using the callback$"):
        callback.on_step()
    callback.init_callback(model)
    model.num_timesteps = 8
    callback.on_training_start({"a": 1}, {"g": 2})
    assert callback.num_timesteps == 8 and callback.locals == {"a": 1} and callback.globals == {"g": 2}
    callback.on_rollout_start()
    for k in range(3):
        model.num_timesteps += 4
        callback.update_locals({"dones": k})
        assert callback.on_step() is True
    callback.on_rollout_end()
    callback.on_training_end()
    assert callback.n_calls == 3 and callback.num_timesteps == 20 and callback.locals == {"a": 1, "dones": 2}
    assert callback.events == [
        "init",
        "training_start",
        "rollout_start",
        "step",
        "step",
        "step",
        "rollout_end",
        "training_end",
    ]
    assert callback.logger is model.logger


def test_training_env_needs_an_env():
    callback = Recorder()
    callback.init_callback(CartPoleModel(env=None))
    with pytest.raises(RuntimeError, match=r"^Recorder: model.get_env\(\) returned None; the model needs an env$"):
        _ = callback.training_env
    env = CountdownEnv()
    callback.init_callback(CartPoleModel(env=env))
    assert callback.training_env is env


def test_callback_returning_false_is_reported():
    assert run_training(Recorder(result=False), CartPoleModel(), calls=2) == [False, False]
    assert run_training(make_callback(lambda locals_, globals_: False), CartPoleModel(), calls=1) == [False]


def test_make_callback_dispatch():
    noop = make_callback(None)
    assert isinstance(noop, ConvertCallback) and run_training(noop, CartPoleModel(), calls=2) == [True, True]
    recorder = Recorder()
    assert make_callback(recorder) is recorder

    seen = []
    function = make_callback(lambda locals_, globals_: seen.append(locals_["x"]) or True)
    assert isinstance(function, ConvertCallback)
    function.init_callback(CartPoleModel())
    function.on_training_start({"x": 0}, {})
    function.update_locals({"x": 5})
    assert function.on_step() is True and seen == [5]

    first, last = Recorder(result=False), Recorder()
    combined = make_callback([first, lambda locals_, globals_: True, last])
    assert isinstance(combined, CallbackList) and isinstance(combined.callbacks[1], ConvertCallback)
    assert run_training(combined, CartPoleModel(), calls=2) == [False, False]
    assert first.events == last.events == ["init", "training_start", "step", "step", "training_end"]  # all ran
    assert combined.n_calls == last.n_calls == 2 and last.num_timesteps == 8


@pytest.mark.parametrize("bad", [42, "callback", {"a": 1}, [Recorder(), 3]])
def test_make_callback_rejects(bad):
    message = r"^callback: expected None, a BaseCallback, a list of callbacks or a callable \(locals, globals\) -> bool"
    with pytest.raises(ValueError, match=message):
        make_callback(bad)


def test_callback_list_and_convert_validate():
    with pytest.raises(ValueError, match=r"^callbacks: expected a list of BaseCallback, got a list containing str$"):
        CallbackList([Recorder(), "x"])
    with pytest.raises(ValueError, match=r"^func: expected a callable"):
        ConvertCallback(3)


def test_event_callback_runs_child_on_event():
    child = Recorder()
    parent = EventCallback(child)
    assert child.parent is parent
    parent.init_callback(CartPoleModel())
    parent.on_training_start({}, {})
    assert parent.on_step() is True and child.n_calls == 0
    assert parent._on_event() is True and child.n_calls == 1
    assert child.events == ["init", "training_start", "step"]


# ---------------------------------------------------------------------------------------------------------------
# CheckpointCallback
# ---------------------------------------------------------------------------------------------------------------


def test_checkpoint_callback_saves_every_save_freq_calls(tmp_path):
    save_path = tmp_path / "checkpoints"
    model = CartPoleModel()
    callback = CheckpointCallback(save_freq=3, save_path=str(save_path), name_prefix="ppo", save_vecnormalize=True)
    assert all(run_training(callback, model, calls=10, steps_per_call=4))
    assert sorted(os.listdir(save_path)) == ["ppo_12_steps", "ppo_24_steps", "ppo_36_steps"]
    assert json.loads((save_path / "ppo_24_steps").read_text())["num_timesteps"] == 24
    assert model.saved == [str(save_path / f"ppo_{n}_steps") for n in (12, 24, 36)]


@pytest.mark.parametrize("save_freq", [0, -5, 1.5])
def test_checkpoint_callback_rejects_bad_save_freq(save_freq, tmp_path):
    with pytest.raises(ValueError, match=r"^save_freq: expected an int >= 1, got "):
        CheckpointCallback(save_freq=save_freq, save_path=str(tmp_path))


# ---------------------------------------------------------------------------------------------------------------
# EvalCallback and the stop callbacks
# ---------------------------------------------------------------------------------------------------------------


def test_eval_callback_evaluates_logs_and_saves(tmp_path, capsys):
    model = CartPoleModel()
    new_best, after_eval = Recorder(), Recorder()
    callback = EvalCallback(
        "CartPole-v1",
        callback_on_new_best=new_best,
        callback_after_eval=after_eval,
        n_eval_episodes=2,
        eval_freq=3,
        log_path=str(tmp_path / "logs"),
        best_model_save_path=str(tmp_path / "best"),
    )
    assert new_best.parent is callback and after_eval.parent is callback
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an env made from an id gives no warning
        assert all(run_training(callback, model, calls=7, steps_per_call=4))
    assert callback.evaluations_timesteps == [12, 24]
    assert callback.last_mean_reward == callback.best_mean_reward == 500.0
    with np.load(tmp_path / "logs" / "evaluations.npz", allow_pickle=False) as data:
        assert sorted(data.files) == ["ep_lengths", "results", "timesteps"]
        np.testing.assert_array_equal(data["timesteps"], [12, 24])
        assert data["results"].shape == data["ep_lengths"].shape == (2, 2)
        np.testing.assert_array_equal(data["results"], callback.evaluations_results)
        np.testing.assert_array_equal(data["ep_lengths"], callback.evaluations_length)
    assert json.loads((tmp_path / "best" / "best_model").read_text())["num_timesteps"] == 12  # saved once (no gain)
    assert new_best.n_calls == 1 and after_eval.n_calls == 2
    assert model.logger.records == {"eval/mean_reward": [500.0, 500.0], "eval/mean_ep_length": [500.0, 500.0]}
    out = capsys.readouterr().out
    assert "Eval num_timesteps=12, episode_reward=500.00 +/- 0.00" in out and out.count("New best mean reward!") == 1


def test_eval_callback_on_a_vector_env_records_success(tmp_path):
    model = ZeroModel()
    callback = EvalCallback(
        countdown_vector(2, AutoresetMode.SAME_STEP),
        n_eval_episodes=4,
        eval_freq=1,
        log_path=str(tmp_path),
        verbose=0,
        warn=False,
    )
    assert run_training(callback, model, calls=1) == [True]
    assert sorted(callback.evaluations_length[0]) == [3, 3, 4, 4]
    with np.load(tmp_path / "evaluations.npz", allow_pickle=False) as data:
        np.testing.assert_array_equal(data["successes"], [[True] * 4])


def test_stop_on_reward_threshold_after_first_evaluation():
    stop = StopTrainingOnRewardThreshold(reward_threshold=100, verbose=1)
    callback = EvalCallback("CartPole-v1", callback_on_new_best=stop, n_eval_episodes=2, eval_freq=2, verbose=0)
    assert run_training(callback, CartPoleModel(), calls=2) == [True, False]
    assert stop.parent is callback and callback.best_mean_reward >= 100


def test_random_model_does_not_reach_the_threshold():
    stop = StopTrainingOnRewardThreshold(reward_threshold=100)
    callback = EvalCallback("CartPole-v1", callback_on_new_best=stop, n_eval_episodes=3, eval_freq=1, verbose=0)
    assert run_training(callback, CartPoleModel(random=True), calls=2) == [True, True]


def test_stop_on_reward_threshold_needs_an_eval_callback():
    message = r"^StopTrainingOnRewardThreshold: must be used as callback_on_new_best of an EvalCallback \(no parent\)$"
    with pytest.raises(RuntimeError, match=message):
        make_callback([StopTrainingOnRewardThreshold(100)]).init_callback(CartPoleModel())
    # inside a CallbackList given as callback_on_new_best, the EvalCallback is its parent
    stop = StopTrainingOnRewardThreshold(100)
    callback = EvalCallback("CartPole-v1", callback_on_new_best=[stop], n_eval_episodes=1, eval_freq=1, verbose=0)
    assert run_training(callback, CartPoleModel(), calls=1) == [False] and stop.parent is callback


def test_stop_on_max_episodes():
    model = CartPoleModel(env=SyncVectorEnv([lambda: CountdownEnv()] * 2))
    callback = StopTrainingOnMaxEpisodes(max_episodes=2)
    callback.init_callback(model)
    callback.on_training_start({}, {})
    results = []
    for dones in ([True, False], [False, False], [True, True], [False, True]):
        callback.update_locals({"dones": np.array(dones)})
        results.append(callback.on_step())
    assert results == [True, True, True, False] and callback.n_episodes == 4
    bare = StopTrainingOnMaxEpisodes(max_episodes=1)
    bare.init_callback(model)
    with pytest.raises(RuntimeError, match=r"^StopTrainingOnMaxEpisodes: the training loop gave no `dones`"):
        bare.on_step()


def test_a_callbacks_model_makes_one_policy_per_rollout_during_train():
    """`kppo.train`'s model (`TrainingModel`): `policy` is made once per runner state (the weights change only
    between runner calls), so `predict` in `on_step` costs a numpy forward pass; stochastic keys count on."""
    import kppo

    class Look(BaseCallback):
        def __init__(self):
            super().__init__()
            self.seen: list[tuple] = []  # (policy, runner state, predict_calls): kept alive, compared by identity

        def _on_step(self) -> bool:
            action, _ = self.model.predict(np.zeros(4, np.float32), deterministic=False)
            assert action in (0, 1)
            policy = self.model.policy
            self.seen.append((policy, self.model.runner_state, policy.predict_calls))
            return True

    look = Look()
    config = kppo.Config(num_envs=2, num_steps=4, total_timesteps=24, eval_freq=1, num_hidden_units=8, seed=3)
    kppo.train(lambda: gym.make("CartPole-v1"), config, callback=look)
    assert len(look.seen) == 12  # 3 rollouts of 4 vector steps
    policies = [id(seen[0]) for seen in look.seen]
    assert [len(set(policies[i : i + 4])) for i in (0, 4, 8)] == [1, 1, 1] and len(set(policies)) == 3
    assert len({id(seen[1]) for seen in look.seen}) == 3  # one policy per rollout, from its runner state
    assert [seen[2] for seen in look.seen] == list(range(1, 13))  # keys [seed, 1], [seed, 2], ...
