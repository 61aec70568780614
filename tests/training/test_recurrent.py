"""Recurrent (LSTM) agents on TF-native envs: the memory restarts at episode starts, the update replays whole env
sequences and sees the rollout's log-probabilities exactly, and an LSTM learns CartPole without velocities."""

import functools
import shutil
from pathlib import Path

import numpy as np
import pytest

from kppo.training.runners.settings import agent_spec
import kppo
from kppo import envs
from kppo._tf import tf
from kppo.agent.agent import initial_memory, make_agent, make_policy, replay
from kppo.core.tf_loops import swap_leading
from kppo.rollout.native import collect_rollout, initial_rollout_state
from kppo.training.runners.settings import rollout_settings, update_settings
from kppo.training.resume import load_run_checkpoint
from kppo.update.ppo import flatten, minibatch_loss
from kppo.update.recurrent import replay_window, rotated_indices, rows, window_segments
from tests.helpers.image_envs import BrightHalfEnv

SMALL = dict(recurrent="lstm", lstm_hidden_size=16, num_hidden_units=16, num_envs=4, num_steps=64, num_minibatches=2)


@functools.cache
def _cartpole_rollout(critic_lstm: bool, layers: int):
    """An agent of SMALL with these LSTM settings and its second CartPole rollout (the first warms the memory), built
    once per process: the replay tests only read them (the agent's weights are never updated)."""
    config = kppo.Config(**SMALL, enable_critic_lstm=critic_lstm, n_lstm_layers=layers)
    env = envs.make("CartPole-v1")
    agent = make_agent(agent_spec(config), 4, env.action_space)
    state = initial_rollout_state(env, agent, tf.constant([0, 1]), 4, False)
    state, rollout = collect_rollout(env, agent, rollout_settings(config), state, tf.constant([2, 3]))  # warm memory
    _, rollout = collect_rollout(env, agent, rollout_settings(config), state, tf.constant([4, 5]))
    return config, agent, rollout


@pytest.mark.parametrize("critic_lstm, layers", [(True, 1), (False, 1), (True, 2)])
def test_the_update_replays_the_rollout_exactly_and_the_memory_restarts_at_episode_starts(critic_lstm, layers):
    """Also with two stacked layers (`n_lstm_layers=2`): the memory holds both layers' states side by side."""
    config, agent, rollout = _cartpole_rollout(critic_lstm, layers)
    assert len(agent.lstm.cells) == (2 if critic_lstm else 1)
    traj = rollout.trajectory
    starts = traj.episode_start.numpy()
    start_memory = tuple(m[0] for m in traj.memory)
    assert starts[1:].any() and np.any(np.abs(start_memory[0].numpy()) > 0)  # resets inside; a live start memory
    batch = flatten(rollout)  # env-major sequences [B, T]
    assert batch.obs.shape == (4, 64, 4) and batch.memory[0].shape == (4, 16 * layers)
    _, info = minibatch_loss(agent, update_settings(config), batch)
    assert float(info.approx_kl) == 0.0 and float(info.clip_fraction) == 0.0  # ratio exactly 1
    params, values, memories = replay(agent, traj.obs, traj.episode_start, start_memory)
    np.testing.assert_array_equal(agent.dist.log_prob(params, traj.action).numpy(), traj.log_prob.numpy())
    for stored, after in zip(traj.memory, memories):  # the memory stored at step t is the one after step t - 1
        np.testing.assert_array_equal(stored.numpy()[1:], after.numpy()[:-1])
    chunked = flatten(rollout, 16)  # chunks of 16 steps from the memory stored at their first step
    assert chunked.obs.shape == (16, 16, 4)
    _, info = minibatch_loss(agent, update_settings(config), chunked)
    assert float(info.approx_kl) == 0.0
    np.testing.assert_array_equal(values.numpy(), traj.value.numpy())
    # From another start memory, every step after an env's first episode start is unchanged: the memory restarted.
    other = tuple(tf.random.normal(m.shape, seed=7) for m in start_memory)
    params_other, _, _ = replay(agent, traj.obs, traj.episode_start, other)
    after_reset = np.cumsum(starts, axis=0) > 0
    np.testing.assert_allclose(params_other.numpy()[after_reset], params.numpy()[after_reset], atol=1e-6)
    assert not np.allclose(params_other.numpy()[~after_reset], params.numpy()[~after_reset], atol=1e-6)


def test_a_convolutional_lstm_on_a_tf_native_minatar_game_replays_its_rollout_exactly():
    """CnnLstmPolicy's shape in the compiled loop: a CNN both LSTMs read (its weights in the agent's, once), on
    MinAtar Breakout's 10x10x4 grids stepped in the graph; the update sees the rollout's log-probabilities exactly
    and its gradient reaches the CNN through the LSTMs."""
    config = kppo.Config(
        **{**SMALL, "num_steps": 16}, features_extractor="small_cnn", features_dim=32, normalize_images=False
    )
    env = envs.make("breakout_minatar")
    agent = make_agent(agent_spec(config), 400, env.action_space, observation_space=env.observation_space)
    assert agent.lstm.features_width == 32 and agent.lstm.cells[0].kernel.shape == (32, 64)
    convs = agent.lstm.extractor.trainable_variables
    assert convs and sum(v is convs[0] for v in agent.variables) == 1
    state = initial_rollout_state(env, agent, tf.constant([0, 1]), 4, False)
    _, rollout = collect_rollout(env, agent, rollout_settings(config), state, tf.constant([2, 3]))
    with tf.GradientTape() as tape:
        loss, info = minibatch_loss(agent, update_settings(config), flatten(rollout))
    assert float(info.approx_kl) == 0.0 and float(info.clip_fraction) == 0.0
    grads = tape.gradient(loss, convs)
    assert all(g is not None and float(tf.reduce_max(tf.abs(g))) > 0 for g in grads)


def test_rotated_windows_replay_the_rollout_exactly_across_env_boundaries():
    """sb3-contrib's minibatches: windows of consecutive env-major rows at any offset; a window entering another
    env's steps restarts from that env's stored memory, so a window sees the rollout's log-probs (ratio 1; one longer
    than a rollout to float32 rounding, below)."""
    config = kppo.Config(**{**SMALL, "num_minibatches": 8}, lstm_batching="rotated")
    sequences, agent, rollout = _cartpole_rollout(True, 1)  # the minibatching changes neither agent nor rollout
    assert agent_spec(config) == agent_spec(sequences) and rollout_settings(config) == rollout_settings(sequences)
    batch = rows(rollout)
    np.testing.assert_array_equal(batch.obs.numpy()[64 + 5], rollout.trajectory.obs.numpy()[5, 1])  # env-major
    np.testing.assert_array_equal(np.flatnonzero(batch.restart.numpy()), [0, 64, 128, 192])
    settings = update_settings(config)
    assert settings.rotated_steps == 64
    for start in (0, 40, 100, 230):  # 40..71 enters env 1 at row 64; 230..261 wraps from env 3 to env 0
        window = tf.nest.map_structure(lambda x, start=start: tf.gather(x, np.arange(start, start + 32) % 256), batch)
        _, info = minibatch_loss(agent, settings, window)
        assert float(info.approx_kl) == 0.0 and float(info.clip_fraction) == 0.0, start
    starts = batch.episode_start.numpy().reshape(4, 64)
    env = next(e for e in (1, 2, 3) if not starts[e, :4].any())  # its first steps continue a live memory
    window = tf.nest.map_structure(lambda x: x[64 * env - 16 : 64 * env + 16], batch)
    _, params, _ = replay_window(agent, window, 64)
    np.testing.assert_array_equal(agent.dist.log_prob(params, window.action).numpy(), window.log_prob.numpy())
    _, params, _ = replay_window(agent, window._replace(restart=tf.zeros([32], tf.bool)), 64)  # one sequence
    moved = np.abs(agent.dist.log_prob(params, window.action).numpy() - window.log_prob.numpy())
    assert moved[16:20].max() > 1e-7 and moved[:16].max() == 0.0  # that env's first steps acted on the other's memory
    # Longer than a rollout: envs 0-2's segments replay side by side, 3 rows a step where the rollout stepped 4. A
    # CPU's matmul may sum a 2-3-row product in another order than a 4-row one (AVX2 without AVX-512, AMD EPYC Zen 3:
    # ~70% of the elements move by an ulp), so the logits equal the rollout's to float32 rounding (~1e-9 here) there;
    # a segment started from another env's memory moves them by up to ~2e-3.
    traj = rollout.trajectory
    acted, _, _ = replay(agent, traj.obs, traj.episode_start, tuple(m[0] for m in traj.memory))  # 4 rows: exact
    acted = tf.reshape(swap_leading(acted), [256, -1]).numpy()[40:136]  # env-major rows 40..135
    np.testing.assert_array_equal(agent.dist.log_prob(acted, batch.action[40:136]).numpy(), batch.log_prob[40:136])
    long = tf.nest.map_structure(lambda x: x[40:136], batch)
    _, params, _ = replay_window(agent, long, 64)
    np.testing.assert_allclose(params.numpy(), acted, rtol=0, atol=1e-8)
    wrong = long._replace(memory=tuple(tf.roll(m, 64, 0) for m in long.memory))  # each segment another env's memory
    assert np.abs(replay_window(agent, wrong, 64)[1].numpy() - acted).max() > 1e-4
    grid, index = window_segments(tf.constant(np.arange(48, 80) % 64 == 0), 64)  # rows 48..79 enter env 1 at 64
    np.testing.assert_array_equal(grid.numpy(), [list(range(16)) + [-1] * 16, list(range(16, 32)) + [-1] * 16])
    np.testing.assert_array_equal(index.numpy(), [2 * j for j in range(16)] + [2 * j + 1 for j in range(16)])
    indices = rotated_indices(tf.constant([7, 8]), 256, 3, 8).numpy()  # per epoch: a rotation cut in order
    assert indices.shape == (24, 32)
    for epoch in indices.reshape(3, 256):
        np.testing.assert_array_equal(epoch, (epoch[0] + np.arange(256)) % 256)
    assert len({int(e[0]) for e in indices.reshape(3, 256)}) == 3


def test_recurrent_settings_are_checked_in_one_line():
    with pytest.raises(
        ValueError,
        match=r"num_minibatches: expected a divisor of the 4 sequences \(num_envs x "
        r"num_steps / lstm_sequence_length; recurrent minibatches are whole "
        r"sequences\), got 3",
    ):
        kppo.Config(**{**SMALL, "num_minibatches": 3, "num_steps": 63})
    with pytest.raises(ValueError, match=r"lstm_sequence_length: expected 0 or a divisor of num_steps = 64, got 10"):
        kppo.Config(**SMALL, lstm_sequence_length=10)
    with pytest.raises(ValueError, match=r"lstm_batching: expected 'sequences' or 'rotated', got 'random'"):
        kppo.Config(**SMALL, lstm_batching="random")
    with pytest.raises(ValueError, match=r"lstm_sequence_length: expected 0 with lstm_batching='rotated' .*, got 16"):
        kppo.Config(**SMALL, lstm_batching="rotated", lstm_sequence_length=16)
    with pytest.raises(ValueError, match=r"recurrent: expected null or 'lstm', got 'gru'"):
        kppo.Config(recurrent="gru")


@pytest.mark.slow
def test_an_lstm_learns_cartpole_without_velocities_where_an_mlp_cannot():
    """CartPoleNoVel (positions only), RL-Zoo's ppo_lstm setting for it (8 envs x 32 steps, one minibatch, 20
    epochs, gamma 0.98, GAE 0.8, lr 1e-3 annealed, normalized observations and rewards, LSTM 64, pi/vf [64] ReLU),
    100,000 steps, 3 seeds each."""
    zoo = dict(
        num_envs=8,
        num_steps=32,
        num_minibatches=1,
        num_epochs=20,
        gamma=0.98,
        gae_lambda=0.8,
        learning_rate=1e-3,
        lr_schedule="linear",
        ent_coef=0.0,
        normalize_obs=True,
        normalize_reward=True,
        activation="relu",
        actor_hidden_units=[64],
        critic_hidden_units=[64],
        total_timesteps=100_000,
        eval_freq=5,
        num_eval_envs=16,
    )
    env = envs.wrap(envs.CartPoleNoVel())
    lstm = [kppo.train(env, kppo.Config(**zoo, recurrent="lstm", lstm_hidden_size=64), seed=s) for s in range(3)]
    mlp = [kppo.train(env, kppo.Config(**zoo), seed=s) for s in range(3)]
    lstm_final = [float(r.metrics["eval/mean_returns"][-1]) for r in lstm]
    mlp_final = [float(r.metrics["eval/mean_returns"][-1]) for r in mlp]
    print(f"lstm {lstm_final}, mlp {mlp_final}")
    assert min(lstm_final) > max(mlp_final), (lstm_final, mlp_final)


# One layer on CartPole reaches no code these two miss: the first acts on vector observations, the second on one layer.
@pytest.mark.parametrize("layers, env", [(2, "CartPole-v1"), (1, BrightHalfEnv)])
def test_host_acting_in_numpy_is_the_lstm_the_update_replays_and_its_update_sees_ratio_one(layers, env):
    """Also two stacked layers, and a CNN before the LSTMs (images acted on in numpy, replayed in TensorFlow)."""
    from kppo.core import normalization
    from kppo.gym_envs.make import gym_vec_env
    from kppo.agent.numpy_actor import actor_input, head_params, snapshot
    from kppo.rollout.gymnasium import HostRolloutState, collect_host_rollout
    from kppo.rollout.finish import finish_rollout

    cnn = {} if env == "CartPole-v1" else dict(features_extractor="small_cnn", features_dim=16)
    config = kppo.Config(**SMALL, n_lstm_layers=layers, **cnn)
    vec_env = gym_vec_env(env, 4, seed=0)
    dim = int(np.prod(vec_env.observation_space.shape))
    agent = make_agent(agent_spec(config), dim, vec_env.action_space, observation_space=vec_env.observation_space)
    settings = rollout_settings(config)
    obs = vec_env.reset(seed=0)
    memory = tuple(m.numpy() for m in initial_memory(agent, 4))
    state = HostRolloutState(
        obs,
        tf.zeros([4]),
        normalization.to_numpy(normalization.initial_stats([dim])),
        normalization.initial_stats(()),
        np.zeros(4),
        np.zeros(4, np.int32),
        memory=memory,
    )
    finish = lambda *a: finish_rollout(agent, settings, *a)  # noqa: E731
    state, _ = collect_host_rollout(vec_env, agent, settings, finish, state, tf.constant([1, 2]))
    assert np.any(np.abs(state.memory[0]) > 0) and len(state.memory) == 4
    _, rollout = collect_host_rollout(vec_env, agent, settings, finish, state, tf.constant([3, 4]))
    traj = rollout.trajectory
    assert traj.episode_start.numpy()[1:].any()
    _, info = minibatch_loss(agent, update_settings(config), flatten(rollout, 8))
    assert float(info.approx_kl) == 0.0
    # The numpy LSTM the rollout acted with is the TF one the update replays (float rounding apart).
    weights, actor_memory, numpy_params = snapshot(agent.actor, agent.lstm), tuple(traj.memory[:2]), []
    actor_memory = tuple(m.numpy()[0] for m in actor_memory)
    for t in range(64):
        features, actor_memory = actor_input(weights, traj.obs.numpy()[t], actor_memory, traj.episode_start.numpy()[t])
        numpy_params.append(head_params(weights, features))
    params, _, _ = replay(agent, traj.obs, traj.episode_start, tuple(m[0] for m in traj.memory))
    np.testing.assert_allclose(np.stack(numpy_params), params.numpy(), atol=1e-5)


@pytest.mark.slow  # ~30 s of tracing; a gymnasium LSTM population against its single runs is in the default suite
def test_a_recurrent_population_member_computes_what_its_single_run_computes():
    """A TF-native population of recurrent agents: the functional update replays each member's sequences as the Keras
    update replays a single run's (float32 rounding apart: Adam as a function of tensors)."""
    from kppo.training.runners import make_population_runner, make_runner
    from kppo.training.runners.population import member_agent

    base = kppo.Config(**{**SMALL, "num_steps": 32}, num_epochs=1, jit_rollout=False, jit_update=False, jit_eval=False)
    configs = [base.replace(seed=3), base.replace(seed=5, learning_rate=1e-3)]
    runner, population = make_population_runner("cartpole", configs)
    result = runner.run_iterations(runner.state, 1)
    for index, config in enumerate(configs):
        single = make_runner("cartpole", config)
        alone = single.run_iterations(single.state, 1)
        np.testing.assert_allclose(result.diagnostics.total_loss[index], alone.diagnostics.total_loss, rtol=1e-4)
        for mine, theirs in zip(member_agent(population, index).variables, single.agent.variables):
            np.testing.assert_allclose(mine.numpy(), theirs.numpy(), rtol=1e-4, atol=1e-6)


def test_a_recurrent_run_trains_evaluates_checkpoints_and_resumes_bit_identically(tmp_path):
    """The LSTM cells, their Adam moments and the rollout's memory are checkpointed: stopping after 3 of 6
    iterations and resuming ends where the uninterrupted run ends, bit for bit (rollouts of 32 steps, 2 epochs: the
    checkpoint's contents do not depend on the update's size)."""
    config = kppo.Config(
        **{**SMALL, "num_steps": 32},
        num_epochs=2,
        total_timesteps=4 * 32 * 6,
        eval_freq=2,
        num_eval_envs=2,
        iterations_per_call=1,
    )
    whole = kppo.train("cartpole", config)
    assert np.isfinite(whole.metrics["train/total_loss"]).all() and len(whole.metrics["eval/mean_returns"]) == 2
    assert len(initial_memory(whole.agent, 3)) == 4  # (h, c) of the actor's and the critic's LSTM
    calls = []
    stopped = kppo.train(
        "cartpole", config, checkpoint_dir=tmp_path, should_stop=lambda: calls.append(1) or len(calls) == 3
    )
    assert stopped.interrupted and (tmp_path / "checkpoint").is_file()
    resumed = kppo.train("cartpole", config, checkpoint_dir=tmp_path, resume=True)
    for a, b in zip(
        whole.agent.variables + whole.agent.optimizer.variables,
        resumed.agent.variables + resumed.agent.optimizer.variables,
    ):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.mark.parametrize("backend", ["tf", "gymnasium"])
def test_gsde_with_an_lstm_trains_on_both_paths_from_the_replayed_log_probs(backend):
    """gSDE's log-std is the same at every replayed step (kept once, not stacked): Pendulum with chunks of 16."""
    config = kppo.Config(
        **{**SMALL, "num_steps": 32},
        use_sde=True,
        sde_sample_freq=4,
        lstm_sequence_length=16,
        total_timesteps=4 * 32 * 2,
        eval_freq=1,
        num_eval_envs=2,
        env_backend=backend,
    )
    result = kppo.train("Pendulum-v1", config)
    assert np.isfinite(result.metrics["train/total_loss"]).all()
    assert float(result.metrics["train/mean_approxkl"][0]) < 0.05


def test_a_run_checkpointed_with_one_bias_lstm_cells_is_read_and_resumes(tmp_path):
    """tests/fixtures/legacy/one_bias_recurrent_run: a recurrent run stopped after 2 of 6 iterations by kppo before its
    two-bias LSTM cells (record_one_bias_recurrent_run.py, run with that kppo). Its newest checkpoint loads into the
    agent it was (same actions as then) and the run resumes to its end, checkpointing in today's layout."""
    legacy = Path(__file__).resolve().parents[1] / "fixtures" / "legacy"
    recorded = np.load(legacy / "one_bias_recurrent_run.npz")
    run = tmp_path / "run"
    shutil.copytree(legacy / "one_bias_recurrent_run", run)
    saved = load_run_checkpoint(run)
    assert saved.metadata["iteration"] == int(recorded["iteration"])
    policy = make_policy(
        saved.agent, saved.obs_stats, agent_spec(saved.config), saved.observation_space, saved.action_space
    )
    state = None
    for step, obs in enumerate(recorded["obs"]):
        action, state = policy.predict(obs, state=state, deterministic=True)
        np.testing.assert_array_equal(action, recorded["actions"][step])
    config = kppo.Config.from_yaml(run / "config.yaml")
    result = kppo.train(config.env, config, checkpoint_dir=run / "checkpoints", resume=True)
    assert int(result.runner_state.iteration) == config.num_iterations == 6
    assert load_run_checkpoint(run).metadata["iteration"] == 6  # the new checkpoints: two biases, read directly
