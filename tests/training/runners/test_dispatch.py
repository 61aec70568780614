"""`kppo.training.runners.make_runner` / `runner_kind`: which runner serves which env."""

import gymnasium as gym
import numpy as np
import pytest

import kppo
from kppo import envs
from kppo.training.runners import Start, make_runner, runner_kind
from kppo.training.runners.native import make_iterations_fn
from kppo.training.runners.settings import resolve

TINY = dict(num_envs=2, num_steps=8, total_timesteps=32, eval_freq=1, num_eval_envs=2, num_hidden_units=8)


@pytest.mark.parametrize(
    "env, changes, kind",
    [
        ("CartPole-v1", {}, "native"),
        ("CartPole-v1", {"env_backend": "gymnasium"}, "host"),
        ("CartPole-v1", {"distribute": "mirrored"}, "replicated"),
        ("Taxi-v3", {}, "host"),
        (lambda: gym.make("CartPole-v1"), {}, "host"),
    ],
)
def test_runner_kind(env, changes, kind):
    assert runner_kind(env, resolve(kppo.Config(**changes))) == kind


def test_a_tf_native_env_instance_and_unknown_things_are_dispatched_or_named():
    assert runner_kind(envs.make("Pendulum-v1"), resolve(kppo.Config())) == "native"
    with pytest.raises(ValueError, match="env: expected a TF-native env"):
        runner_kind(3.5, resolve(kppo.Config()))
    with pytest.raises(ValueError):
        runner_kind("Taxi-v3", resolve(kppo.Config(env_backend="native")))  # names the built-in tasks


def test_starting_from_a_trained_agent_needs_a_gymnasium_env():
    with pytest.raises(ValueError, match="needs a gymnasium env"):
        make_runner("CartPole-v1", kppo.Config(**TINY), start=Start())


def test_atari_wrapper_and_frame_stack_wrap_gymnasium_env_ids_only():
    stacked = make_runner("CartPole-v1", kppo.Config(**TINY, env_backend="gymnasium", frame_stack=3))
    low = gym.make("CartPole-v1").observation_space.low
    assert stacked.observation_space.shape == (12,)  # CartPole's 4 values, 3 observations on the last axis
    np.testing.assert_array_equal(stacked.observation_space.low, np.repeat(low, 3))  # SB3's (repeated) bounds
    stacked.close()
    with pytest.raises(ValueError, match=r"^atari_wrapper: expected a gymnasium env id to wrap, got the TF-native env"):
        make_runner("CartPole-v1", kppo.Config(**TINY, atari_wrapper=True))
    with pytest.raises(ValueError, match=r"^frame_stack: expected a gymnasium env id to wrap, got function \("):
        make_runner(lambda: gym.make("CartPole-v1"), kppo.Config(**TINY, frame_stack=2))


@pytest.mark.parametrize("backend", ["tf", "gymnasium"])
def test_run_iterations_reports_completed_iterations(backend):
    runner = make_runner("CartPole-v1", kppo.Config(**TINY, env_backend=backend))
    result = runner.run_iterations(runner.state, 2, None)
    runner.close()
    assert result.completed == 2 and not result.stopped and int(result.state.iteration) == 2
    assert float(result.diagnostics.minibatch_steps) == 2 * 4 * 4  # 4 epochs x 4 minibatches per iteration
    assert runner.steps_on_host == (backend == "gymnasium")


def test_the_native_iterations_fn_traces_once_for_any_n():
    from kppo.training.runners.native import build_native
    from kppo._tf import tf

    spec = resolve(kppo.Config(**TINY))
    parts = build_native("CartPole-v1", spec)
    run = make_iterations_fn(parts.train_env, parts.agent, spec)
    state = parts.state
    for n in (1, 2, 1):
        state, _ = run(state, tf.constant(n))
    assert run.experimental_get_tracing_count() == 1
