import contextlib
import functools
import io
import shutil
import types

import gymnasium as gym
import numpy as np
import pytest

import kppo
from kppo import envs
from kppo._tf import tf
from kppo.training.checkpointer import TrainingCheckpointer
from kppo.training.metrics import METRICS

TINY = dict(num_envs=4, num_steps=16, total_timesteps=4 * 16 * 6, eval_freq=2, num_eval_envs=3, num_hidden_units=16)


def _train(env="CartPole-v1", seed=0, checkpoint_dir=None, **changes):
    return kppo.train(env, kppo.Config(**{**TINY, **changes}), seed=seed, checkpoint_dir=checkpoint_dir)


@functools.cache
def _default_run():
    """`_train()` as is (TINY, seed 0), trained once per process for the tests that only read a default run."""
    return _train()


#: 8 iterations in 2 rounds of 4 (eval_freq: the number of rounds), one a call: the resume tests' setting.
RESUMABLE = {**TINY, "total_timesteps": 4 * 16 * 8, "eval_freq": 2, "iterations_per_call": 1}


@functools.cache
def _uninterrupted(seeds=None):
    """The RESUMABLE run without a stop, trained once per process: what each resume test must end equal to."""
    return kppo.train("CartPole-v1", kppo.Config(**RESUMABLE), seed=None if seeds is None else list(seeds))


#: TINY with one iteration a call and a checkpoint every 2 iterations (at 2, 4 and 6).
CHECKPOINTED = {**TINY, "checkpoint_every": 2, "iterations_per_call": 1}


@pytest.fixture(scope="module")
def one_a_call(tmp_path_factory):
    """The CHECKPOINTED run (TINY, seed 0, one iteration a call) with verbose=1 and debug=True, trained once per module:
    its result, what it printed and its checkpoint directory (a test that changes the directory copies it first).
    Neither checkpoints nor printing change a run."""
    path = tmp_path_factory.mktemp("checkpointed")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        result = _train(checkpoint_every=2, iterations_per_call=1, verbose=1, debug=True, checkpoint_dir=path)
    return types.SimpleNamespace(result=result, printed=printed.getvalue(), checkpoint_dir=path)


def _comparable(metrics):
    return {k: v for k, v in metrics.items() if not k.startswith("time/")}


def test_metrics_have_one_row_per_round():
    result = _default_run()
    assert set(METRICS) <= set(result.metrics)
    assert all(len(v) == 2 for v in result.metrics.values())
    np.testing.assert_array_equal(result.metrics["train/total_steps"], [192, 384])
    assert int(result.runner_state.iteration) == 6
    assert result.metrics["eval/total_episodes"][-1] <= 3
    assert set(result.timings) == {"compile_s", "run_s", "total_s"}


def _eval_metrics_fn(total_steps, diagnostics, transitions):
    return {
        "eval/active_steps": tf.reduce_sum(tf.cast(transitions.active, tf.int32)),
        "eval/steps_seen": total_steps,
    }


@pytest.fixture(scope="module")
def hooked():
    """`_train()` again (TINY, seed 0) with an eval_metrics_fn and an on_eval hook, trained once per module: the second
    run of the same seed, and the hooks' run (they add eval metrics and change nothing else). The hook's rows too."""
    seen = []
    config = kppo.Config(**TINY)
    result = kppo.train("CartPole-v1", config, seed=0, eval_metrics_fn=_eval_metrics_fn, on_eval=seen.append)
    return types.SimpleNamespace(result=result, seen=seen)


def test_same_seed_same_run_and_other_seed_differs(hooked):
    a, b, c = _default_run(), hooked.result, _train(seed=1)
    for key, value in _comparable(a.metrics).items():
        np.testing.assert_array_equal(value, b.metrics[key], err_msg=key)
    for va, vb in zip(a.agent.variables, b.agent.variables):
        np.testing.assert_array_equal(va.numpy(), vb.numpy())
    assert not np.array_equal(a.metrics["train/total_loss"], c.metrics["train/total_loss"])


def test_iterations_per_call_does_not_change_the_run(one_a_call):
    # the default run's calls are its rounds of 3 iterations (iterations_per_call 16, a call ends at its round's end)
    one, three = one_a_call.result, _default_run()
    for va, vb in zip(one.agent.variables, three.agent.variables):
        np.testing.assert_allclose(va.numpy(), vb.numpy(), rtol=1e-6, atol=1e-7)


def test_jit_eval_changes_only_how_the_evaluation_is_compiled():
    plain, xla = _default_run(), _train(jit_eval=True)  # jit_eval null: not compiled for one run
    for key, value in _comparable(plain.metrics).items():
        if key.startswith("train/") or key.startswith("rollout/"):
            np.testing.assert_array_equal(value, xla.metrics[key], err_msg=key)
    for result in (plain, xla):  # CartPole pays 1 per step: each first episode's return is its length
        np.testing.assert_allclose(result.metrics["eval/mean_returns"], result.metrics["eval/mean_lengths"], rtol=1e-6)
        assert np.all(result.metrics["eval/mean_lengths"] >= 8)


def test_hooks_are_called(hooked):
    result, seen = hooked.result, hooked.seen
    assert len(seen) == 2 and seen[-1]["train/total_steps"] == 384
    np.testing.assert_array_equal(result.metrics["eval/steps_seen"], [192, 384])
    # every step of the first episodes was active: their lengths sum to the active steps
    assert result.metrics["eval/active_steps"][-1] == pytest.approx(3 * result.metrics["eval/mean_lengths"][-1])


def test_verbose_prints_one_line_per_round(one_a_call):
    out = one_a_call.printed
    assert out.count("[kppo] steps") == 2
    assert out.count("[kppo debug] iteration") == 6


def test_policy_on_single_and_batched_observations():
    policy = _default_run().policy
    batch = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
    actions = policy.get_action(batch)
    assert actions.shape == (5,) and actions.dtype == np.int32
    assert policy.get_action(batch[0]) == actions[0]
    logits = policy.actor(tf.constant(batch)).numpy()
    np.testing.assert_array_equal(actions, logits.argmax(-1))
    np.testing.assert_array_equal(policy.get_action(batch, rng=3), policy.get_action(batch, rng=3))
    np.testing.assert_array_equal(policy.apply_actor(batch), actions)
    with pytest.raises(ValueError, match=r"obs: expected shape \(4,\) or \[N, \*\(4,\)\], got \(5, 3\)"):
        policy.get_action(batch[:, :3])


def test_continuous_options_path():
    result = _train(
        "Pendulum-v1",
        squash=True,
        normalize_obs=True,
        normalize_reward=True,
        target_kl=0.01,
        clip_range_vf=0.2,
        fixed_init=True,
        offset_step=True,
        state_independent_std=False,
        lr_schedule="constant",
    )
    assert np.all(np.isfinite(result.metrics["train/total_loss"]))
    scaling = result.obs_scaling
    assert scaling.enabled and scaling.mean.shape == (3,) and np.all(scaling.var > 0)
    assert result.act_scaling.squash and result.act_scaling.low[0] == -2.0
    obs = np.random.default_rng(0).normal(scale=5.0, size=(100, 3)).astype(np.float32)
    for rng in (None, 1):
        actions = result.policy.get_action(obs, rng=rng)
        assert actions.shape == (100, 1) and np.all(np.abs(actions) <= 2.0)
    # policy = normalize -> actor mean -> tanh -> rescale to [-2, 2]
    z = np.clip((obs - scaling.mean) / np.sqrt(scaling.var + 1e-8), -10, 10)
    mean = result.agent.actor(tf.constant(z, tf.float32))[0].numpy()
    np.testing.assert_allclose(result.policy.get_action(obs), 2.0 * np.tanh(mean), rtol=1e-5, atol=1e-6)


class _Walk(envs.Task):
    """Custom task for the VecEnv path: walk right to position 3."""

    observation_space = gym.spaces.Box(-10.0, 10.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)
    max_episode_steps = 20

    def initial_state(self, key, num_envs):
        return tf.zeros([num_envs], self.dtype)

    def observe(self, state):
        return state[:, None]

    def transition(self, state, action):
        state = state + tf.cast(2 * action - 1, self.dtype)
        return state, -tf.ones_like(state), state >= 3.0


def test_custom_env_trains_without_episode_statistics_wrapper():
    env = envs.TimeLimitAutoReset(_Walk())
    result = kppo.train(env, kppo.Config(**{**TINY, "total_timesteps": 4 * 16 * 40, "learning_rate": 3e-3}))
    # optimal: 3 steps right, return -3
    assert result.metrics["eval/mean_returns"][-1] > -20


def test_bad_env_is_named():
    with pytest.raises(ValueError, match="env: expected one of"):
        _train("Nope-v0", env_backend="tf")
    with pytest.raises(ValueError, match=r"env: expected a TF-native env .* or a gymnasium env .*, got int"):
        kppo.train(3, kppo.Config(**TINY))


@pytest.mark.slow
def test_resume_from_a_checkpoint_is_bit_identical(tmp_path):
    """Slow: test_a_resume_inside_a_round_makes_the_rounds_row_an_uninterrupted_run_makes[one run] keeps the check in
    the default suite (a stop inside a round, a resume to the end, weights, Adam moments and every metric equal)."""
    config = kppo.Config(**RESUMABLE)
    full = _uninterrupted()
    calls = []
    stopped = kppo.train(
        "CartPole-v1", config, checkpoint_dir=tmp_path, should_stop=lambda: calls.append(1) or len(calls) == 5
    )
    assert stopped.interrupted and int(stopped.runner_state.iteration) == 5
    resumed = kppo.train("CartPole-v1", config, checkpoint_dir=tmp_path, resume=True)
    assert not resumed.interrupted and int(resumed.runner_state.iteration) == 8
    for a, b in zip(
        full.agent.variables + full.agent.optimizer.variables,
        resumed.agent.variables + resumed.agent.optimizer.variables,
    ):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    np.testing.assert_array_equal(full.metrics["train/total_steps"], resumed.metrics["train/total_steps"])
    np.testing.assert_array_equal(full.metrics["eval/mean_returns"], resumed.metrics["eval/mean_returns"])
    np.testing.assert_array_equal(full.metrics["train/gradient_steps"], resumed.metrics["train/gradient_steps"])


def test_a_checkpoint_at_a_rounds_end_holds_its_row_so_a_resume_from_it_loses_none(tmp_path, monkeypatch):
    # checkpoint_every = a round: the periodic save and the round's row meet at iterations 4 and 8. A checkpoint
    # there without the row (a kill before the round's own save, or a stop asked at that call) lost the row.
    config = kppo.Config(**RESUMABLE, checkpoint_every=4)
    saves = []
    real_save = TrainingCheckpointer.save
    monkeypatch.setattr(
        TrainingCheckpointer,
        "save",
        lambda self, state, rows, it, *part: saves.append((it, len(rows))) or real_save(self, state, rows, it, *part),
    )
    full = _uninterrupted()  # checkpoint_every changes nothing without a checkpoint_dir
    calls = []
    stopped = kppo.train(
        "CartPole-v1", config, checkpoint_dir=tmp_path, should_stop=lambda: calls.append(1) or len(calls) == 4
    )
    assert stopped.interrupted and len(stopped.metrics["eval/mean_returns"]) == 1  # evaluated, then stopped
    assert all(rows == it // 4 for it, rows in saves if it % 4 == 0), saves
    resumed = kppo.train("CartPole-v1", config, checkpoint_dir=tmp_path, resume=True)
    assert all(rows == it // 4 for it, rows in saves if it % 4 == 0), saves
    for name, values in full.metrics.items():
        if not name.startswith("time/"):
            np.testing.assert_array_equal(resumed.metrics[name], values, err_msg=name)


@pytest.mark.parametrize("seeds", [None, pytest.param([0, 1], marks=pytest.mark.slow)], ids=["one run", "population"])
def test_a_resume_inside_a_round_makes_the_rounds_row_an_uninterrupted_run_makes(tmp_path, seeds):
    # Rounds of 4 iterations; the stop comes after the 2nd and the run resumes inside the first round. Its row once
    # averaged only the 2 iterations after the resume (the round's sums so far were not checkpointed).
    config = kppo.Config(**RESUMABLE)
    full = _uninterrupted(None if seeds is None else tuple(seeds))
    calls = []
    stopped = kppo.train(
        "CartPole-v1",
        config,
        seed=seeds,
        checkpoint_dir=tmp_path,
        should_stop=lambda: calls.append(1) or len(calls) == 2,
    )
    assert stopped.interrupted and len(stopped.metrics) == 0  # no round ended
    resumed = kppo.train("CartPole-v1", config, seed=seeds, checkpoint_dir=tmp_path, resume=True)
    assert set(resumed.metrics) == set(full.metrics)
    for name, values in full.metrics.items():
        if not name.startswith("time/"):
            np.testing.assert_array_equal(resumed.metrics[name], values, err_msg=name)
    if seeds is None:  # the resumed weights and Adam moments are the uninterrupted run's, bit for bit
        assert int(stopped.runner_state.iteration) == 2
        assert not resumed.interrupted and int(resumed.runner_state.iteration) == 8
        for a, b in zip(
            full.agent.variables + full.agent.optimizer.variables,
            resumed.agent.variables + resumed.agent.optimizer.variables,
        ):
            np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_resume_falls_back_when_the_newest_checkpoint_is_corrupted(one_a_call, tmp_path):
    config = kppo.Config(**CHECKPOINTED)
    shutil.copytree(one_a_call.checkpoint_dir, tmp_path, dirs_exist_ok=True)
    newest = sorted(tmp_path.glob("ckpt-*.data-*"), key=lambda p: int(p.name.split("-")[1].split(".")[0]))[-1]
    newest.write_bytes(b"garbage")
    with pytest.warns(UserWarning, match="could not be read"):
        result = kppo.train("CartPole-v1", config, checkpoint_dir=tmp_path, resume=True)
    assert int(result.runner_state.iteration) == 6


def test_resume_needs_a_checkpoint(tmp_path):
    with pytest.raises(ValueError, match=r"resume: expected a checkpoint in .* that fits this config, got none"):
        kppo.train("CartPole-v1", kppo.Config(**TINY), checkpoint_dir=tmp_path, resume=True)


class _NanReward(_Walk):
    def transition(self, state, action):
        state, reward, terminated = super().transition(state, action)
        return state, reward * float("nan"), terminated


def test_a_non_finite_loss_stops_training_and_keeps_the_last_checkpoint(tmp_path):
    env = envs.wrap(_NanReward())
    with pytest.raises(FloatingPointError, match=r"training: non-finite total_loss.* in iterations up to 1 "):
        kppo.train(env, kppo.Config(**{**TINY, "iterations_per_call": 1}), checkpoint_dir=tmp_path)
    assert not list(tmp_path.glob("ckpt-*"))  # nothing was written after the bad update


class _CountingCallback(kppo.BaseCallback):
    def __init__(self, stop_at=None):
        super().__init__()
        self.stop_at, self.seen, self.events = stop_at, [], []

    def _on_training_start(self):
        self.events.append("start")

    def _on_rollout_start(self):
        self.events.append("rollout_start")

    def _on_step(self):
        self.seen.append({k: self.locals[k] for k in ("iterations", "rewards", "dones", "infos") if k in self.locals})
        return self.stop_at is None or self.n_calls < self.stop_at

    def _on_training_end(self):
        self.events.append("end")


def test_train_takes_sb3_callbacks_once_per_compiled_call_on_tf_native_envs():
    callback = _CountingCallback()
    result = kppo.train("CartPole-v1", kppo.Config(**TINY, iterations_per_call=2), seed=0, callback=callback)
    # 6 iterations in 2 evaluation rounds of 3, at most 2 per compiled call
    assert callback.n_calls == 4 and [s["iterations"] for s in callback.seen] == [2, 1, 2, 1]
    assert callback.events == ["start"] + ["rollout_start"] * 4 + ["end"]
    assert callback.num_timesteps == 6 * 64 and not result.stopped
    assert callback.model.predict(np.zeros(4, np.float32), deterministic=True)[0] in (0, 1)


def test_train_takes_sb3_callbacks_every_step_on_gymnasium_envs_and_a_false_stops_at_once():
    config = kppo.Config(**TINY, env_backend="gymnasium")
    callback = _CountingCallback(stop_at=20)  # 16 steps a rollout: stops in the second, before its update
    result = kppo.train("CartPole-v1", config, seed=0, callback=callback)
    assert callback.n_calls == 20 and result.stopped and int(result.runner_state.iteration) == 1
    assert all(s["rewards"].shape == (4,) and len(s["infos"]) == 4 for s in callback.seen)
    assert callback.num_timesteps == 20 * 4 and result.metrics == {}  # stopped before the first round's end


def test_evaluate_policy_accepts_a_train_result_policy():
    result = _default_run()
    env = gym.make("CartPole-v1")
    env.reset(seed=0)
    mean, std = kppo.evaluate_policy(result.policy, env, n_eval_episodes=3, warn=False)
    assert mean > 0 and std >= 0
    action, state = result.policy.predict(np.zeros(4, np.float32), deterministic=True)
    assert state is None and action == result.policy.get_action(np.zeros(4, np.float32))


def test_resume_with_checkpoints_of_another_config_says_why(one_a_call):
    other = kppo.Config(**{**CHECKPOINTED, "num_hidden_units": 32})
    with pytest.raises(
        ValueError, match=r"resume: expected a checkpoint in .* that fits this config, got \d unreadable"
    ):
        kppo.train("CartPole-v1", other, checkpoint_dir=one_a_call.checkpoint_dir, resume=True)


def test_a_config_that_is_not_a_config_is_a_one_line_error():
    with pytest.raises(TypeError, match=r"^config: expected a kppo.Config or a Config.sweep\(...\), got dict$"):
        kppo.train("CartPole-v1", {"num_envs": 4})
