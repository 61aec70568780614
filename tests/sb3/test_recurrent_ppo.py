"""`kppo.RecurrentPPO` (sb3-contrib's interface) and a recurrent `Policy`: the state through `predict`, its reset
at episode starts, save/load, `evaluate_policy` carrying the state, and sb3-contrib's policy_kwargs."""

import gymnasium as gym
import numpy as np
import pytest

import kppo

SMALL = dict(n_steps=32, batch_size=32, n_epochs=2, seed=0, policy_kwargs=dict(lstm_hidden_size=16, net_arch=[16]))


def _episode(model, env, obs) -> float:
    """One deterministic episode from `obs`, the state carried (the first step an episode start)."""
    state, start, total, done = None, True, 0.0, False
    while not done:
        action, state = model.predict(obs, state=state, episode_start=np.array([start]), deterministic=True)
        obs, reward, terminated, truncated, _ = env.step(action)
        total, start, done = total + reward, False, terminated or truncated
    return total


@pytest.fixture(scope="module")
def model():
    model = kppo.RecurrentPPO("MlpLstmPolicy", kppo.make_vec_env("CartPole-v1", n_envs=4, seed=0), **SMALL)
    model.learn(256)
    return model


@pytest.fixture(scope="module")
def layered():
    """`model` with two stacked LSTM layers (sb3-contrib's n_lstm_layers=2)."""
    kwargs = dict(lstm_hidden_size=16, n_lstm_layers=2, net_arch=[16])
    model = kppo.RecurrentPPO(
        "MlpLstmPolicy", kppo.make_vec_env("CartPole-v1", n_envs=4, seed=0), **{**SMALL, "policy_kwargs": kwargs}
    )
    model.learn(256)
    return model


def test_predict_carries_the_state_and_restarts_it_at_episode_starts(model):
    obs = np.random.default_rng(0).normal(size=(4, 4)).astype(np.float32) * 0.1
    action, state = model.predict(obs, deterministic=True)
    assert action.shape == (4,) and [s.shape for s in state] == [(1, 4, 16), (1, 4, 16)]
    assert np.abs(state[0]).max() > 0
    _, carried = model.predict(obs, state=state, deterministic=True)
    assert not np.allclose(carried[0], state[0])  # the second step continues the first one's memory
    _, restarted = model.predict(obs, state=state, episode_start=np.ones(4, bool), deterministic=True)
    np.testing.assert_allclose(restarted[0], state[0], atol=1e-6)  # = the first step from zeros
    single, single_state = model.predict(obs[0], deterministic=True)
    assert np.ndim(single) == 0 and single_state[0].shape == (1, 1, 16)
    with pytest.raises(ValueError, match=r"get_action: a recurrent policy acts with its memory"):
        model.kppo_policy.get_action(obs)
    with pytest.raises(ValueError, match=r"state: expected \(h, c\), each of shape \[1, 4, 16\]"):
        model.predict(obs, state=(np.zeros(3), np.zeros(3)))


def test_stacked_layers_keep_sb3_contribs_state_layout_and_torch_names(layered, tmp_path):
    """n_lstm_layers=2: predict's state is [2, N, 16] (layer 0 first, as torch.nn.LSTM's), the second layer reads the
    first's output, every layer restarts at episode starts, and the weights are torch's `*_l0` / `*_l1`; a save loads
    with its depth."""
    obs = np.random.default_rng(1).normal(size=(4, 4)).astype(np.float32) * 0.1
    _, state = layered.predict(obs, deterministic=True)
    assert [s.shape for s in state] == [(2, 4, 16), (2, 4, 16)] and np.abs(state[0][1]).max() > 0
    cell = layered.agent.lstm.cells[0]
    x = obs  # each layer by hand from zero state (no observation normalization here); layer 1 reads layer 0
    for layer in range(2):
        kernel, _, input_bias, recurrent_bias = (w.numpy() for w in cell.layer_weights(layer))
        i, _, g, o = np.split(x @ kernel + input_bias + recurrent_bias, 4, axis=-1)  # from zeros: h = c = 0
        c = 1 / (1 + np.exp(-i)) * np.tanh(g)
        x = 1 / (1 + np.exp(-o)) * np.tanh(c)
        np.testing.assert_allclose(state[0][layer], x, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(state[1][layer], c, rtol=1e-5, atol=1e-6)
    _, restarted = layered.predict(obs, state=state, episode_start=np.ones(4, bool), deterministic=True)
    np.testing.assert_allclose(restarted[0], state[0], atol=1e-6)
    names = {k for k in layered.policy.state_dict() if k.startswith("lstm_")}
    assert names == {
        f"lstm_{r}.{w}_l{n}"
        for r in ("actor", "critic")
        for w in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
        for n in (0, 1)
    }
    with pytest.raises(ValueError, match=r"state: expected \(h, c\), each of shape \[2, 4, 16\]"):
        layered.predict(obs, state=(np.zeros((1, 4, 16)),) * 2)
    layered.save(tmp_path / "agent")
    loaded = kppo.RecurrentPPO.load(tmp_path / "agent")
    assert loaded.config.n_lstm_layers == 2 and loaded.policy_kwargs["n_lstm_layers"] == 2
    np.testing.assert_array_equal(loaded.predict(obs, state=state)[1][1], layered.predict(obs, state=state)[1][1])


def test_save_load_and_evaluate_policy_carry_the_state(model, tmp_path):
    model.save(tmp_path / "agent")
    loaded = kppo.RecurrentPPO.load(tmp_path / "agent")
    assert loaded.config.recurrent == "lstm" and loaded.config.lstm_hidden_size == 16
    obs = np.full((4, 4), 0.03, np.float32)
    np.testing.assert_array_equal(
        loaded.predict(obs, deterministic=True)[1][0], model.predict(obs, deterministic=True)[1][0]
    )
    env = gym.make("CartPole-v1")
    env.reset(seed=5)
    returns, _ = kppo.evaluate_policy(model, env, n_eval_episodes=2, return_episode_rewards=True, warn=False)
    manual, env = [], gym.make("CartPole-v1")  # the same episodes by hand, carrying the state
    env.reset(seed=5)
    for _ in range(2):
        manual.append(_episode(model, env, env.reset()[0]))  # evaluate_policy starts episodes with a plain reset
    assert returns == manual


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(n_lstm_layers=0), r"^policy_kwargs.n_lstm_layers: expected an integer >= 1, got 0$"),
        (dict(n_lstm_layers=1.5), r"^policy_kwargs.n_lstm_layers: expected an integer >= 1, got 1.5$"),
        (
            dict(n_lstm_layers=2, lstm_kwargs={"dropout": 0.1}),
            r"^policy_kwargs.lstm_kwargs.dropout: expected 0 with n_lstm_layers=2 \(kppo's LSTM has no dropout",
        ),
        (dict(shared_lstm=True), r"policy_kwargs.shared_lstm: expected False with enable_critic_lstm=True"),
        (dict(lstm_kwargs={"bidirectional": True}), r"^policy_kwargs.lstm_kwargs.bidirectional: expected False \("),
        (dict(lstm_kwargs={"bias": False}), r"^policy_kwargs.lstm_kwargs.bias: expected True \(kppo's LSTM cells"),
        (dict(lstm_kwargs={"batch_first": True}), r"^policy_kwargs.lstm_kwargs.batch_first: expected False"),
        (dict(lstm_kwargs={"proj_size": 8}), r"^policy_kwargs.lstm_kwargs.proj_size: expected 0"),
        (dict(lstm_kwargs={"dropout": 2.0}), r"^policy_kwargs.lstm_kwargs.dropout: expected a number in \[0, 1\]"),
        (dict(lstm_kwargs={"device": "cpu"}), r"^policy_kwargs.lstm_kwargs: torch.nn.LSTM takes no 'device'"),
        (dict(lstm_kwargs=[1]), r"^policy_kwargs.lstm_kwargs: expected a dict of torch.nn.LSTM keywords, got \[1\]"),
        (dict(enable_critic_lstm="no"), r"^policy_kwargs.enable_critic_lstm: expected True or False, got 'no'"),
    ],
)
def test_unsupported_lstm_options_are_one_line_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        kppo.RecurrentPPO("MlpLstmPolicy", "CartPole-v1", policy_kwargs=kwargs)
    with pytest.raises(
        ValueError, match=r"policy: expected one of \('MlpLstmPolicy', 'CnnLstmPolicy', 'MultiInputLstmPolicy'\)"
    ):
        kppo.RecurrentPPO("MlpPolicy", "CartPole-v1")


def test_lstm_kwargs_torch_accepts_on_one_layer_build_what_torch_builds():
    """sb3-contrib passes lstm_kwargs to torch.nn.LSTM: bias=True and batch_first=False are its defaults, and dropout
    on one layer does nothing (torch warns); kppo builds the same network and warns the same."""
    settings = dict(n_steps=16, batch_size=16, seed=0, policy_kwargs=dict(lstm_hidden_size=8))
    plain = kppo.RecurrentPPO("MlpLstmPolicy", "CartPole-v1", **settings)
    kwargs = dict(lstm_hidden_size=8, lstm_kwargs=dict(bias=True, batch_first=False, bidirectional=False, proj_size=0))
    same = kppo.RecurrentPPO("MlpLstmPolicy", "CartPole-v1", **{**settings, "policy_kwargs": kwargs})
    for a, b in zip(plain.get_parameters()["policy"].values(), same.get_parameters()["policy"].values()):
        np.testing.assert_array_equal(a, b)
    with pytest.warns(UserWarning, match=r"lstm_kwargs.dropout: dropout applies between LSTM layers"):
        kppo.RecurrentPPO(
            "MlpLstmPolicy", "CartPole-v1", **{**settings, "policy_kwargs": {**kwargs, "lstm_kwargs": {"dropout": 0.2}}}
        )


def test_a_shared_lstm_feeds_the_critic_the_actors_memory_without_its_gradient():
    """sb3-contrib's shared_lstm: the critic reads the actor LSTM's output detached (`latent_pi.detach()`), so the
    value loss moves the critic only; the memory is the actor's (h, c) alone."""
    from kppo._tf import tf
    from kppo.agent.agent import act_step, initial_memory

    kwargs = dict(shared_lstm=True, enable_critic_lstm=False, lstm_hidden_size=16)
    model = kppo.RecurrentPPO("MlpLstmPolicy", "CartPole-v1", n_steps=32, batch_size=32, policy_kwargs=kwargs, seed=0)
    agent = model.agent
    assert model.config.shared_lstm and len(agent.lstm.cells) == 1
    assert agent.critic.hidden[0].kernel.shape[0] == 16  # the critic reads the LSTM's 16 units, not the 4 observations
    obs, memory = tf.random.normal([3, 4]), initial_memory(agent, 3)
    with tf.GradientTape() as tape:
        _, value, new_memory = act_step(agent, obs, memory)
        loss = tf.reduce_sum(value**2)
    grads = tape.gradient(loss, agent.lstm.trainable_variables + agent.critic.trainable_variables)
    assert all(g is None for g in grads[: len(agent.lstm.trainable_variables)])  # nothing reaches the LSTM
    assert all(g is not None for g in grads[len(agent.lstm.trainable_variables) :])
    assert len(new_memory) == 2
    model.learn(64)
    obs = model.get_env().reset()
    action, state = model.predict(obs)
    assert action.shape == (1,) and state[0].shape == (1, 1, 16)


# "model" is slow: "layered" (2 LSTM layers) makes every assertion on a larger state, and one-layer artifacts stepped
# against predict stay in the default suite (the CNN-LSTM test below, tests/cli/test_main.py's eval, test_report).
@pytest.mark.parametrize("name", [pytest.param("model", marks=pytest.mark.slow), "layered"])
def test_a_recurrent_artifact_carries_its_state_and_reproduces_predict_over_whole_episodes(name, request, tmp_path):
    """TFLite and SavedModel artifacts take (obs, state_h, state_c) and return the action and the new state; the
    deployment kit (no TensorFlow) plays the same closed-loop episodes as predict, state carried. Two stacked layers:
    the state inputs hold both layers side by side ([1, 2 * 16])."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    model = request.getfixturevalue(name)

    exported = kppo.export(model, tmp_path / "lstm.tflite")
    parity = exported.metadata["parity"]
    assert parity["max_error"] == 0.0 and parity["state_max_error"] < 1e-5
    assert exported.metadata["state"]["shape"] == [1, model.agent.lstm.num_layers * model.config.lstm_hidden_size]
    assert not {"WHILE", "CALL_ONCE", "VAR_HANDLE", "READ_VARIABLE"} & set(exported.metadata["tflite_ops"])
    saved = kppo.export(model, tmp_path / "lstm_sm", format="saved_model", batch_size=None)
    assert saved.metadata["parity"]["state_max_error"] < 1e-5
    int8 = kppo.export(model, tmp_path / "lstm_int8.tflite", quantize="int8", calibration_env="CartPole-v1")
    assert int8.metadata["calibration"]["source"] == "policy rollouts in CartPole-v1"  # episodes, state carried
    assert int8.metadata["parity"]["state_max_error"] < 0.2 and int8.metadata["parity"]["non_finite"] == 0.0
    assert int8.metadata["parity"]["max_error"] == 0.0  # every action of the 1,000 observations is predict's
    seeds = [21, 22, 23]
    want = [_episode(model, env, env.reset(seed=seed)[0]) for seed in seeds for env in [gym.make("CartPole-v1")]]
    code = (
        "import sys, json\nfor n in ('tensorflow', 'kppo'):\n    sys.modules[n] = None\n"
        "from kppo_runtime.evaluate import run_episodes\nfrom kppo_runtime.micro_check import check\n"
        "from kppo_runtime.runtime import Controller\n"
        f"c = Controller({str(exported.path)!r})\n"
        f"print(json.dumps({{'returns': [run_episodes(c, 'CartPole-v1', 1, s)[0] for s in {seeds}], "
        f"'micro': check({str(exported.path)!r}, 50), 'micro8': check({str(int8.path)!r}, 50)}}))\n"
    )
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["returns"] == want
    for micro in (got["micro"], got["micro8"]):  # TFLite Micro runs float32 and int8 recurrent artifacts as LiteRT
        assert micro["action_mismatch_vs_litert"] == 0.0 and micro["arena_bytes"] <= 16 * 1024


def test_minibatches_are_sb3_contribs_rotated_windows_of_batch_size_steps(model):
    """The minibatching is set when the model is built. `model` learned with windows that divide its rollout; 96 does
    not divide the 128 steps (one window, longer than an env's 64 steps) and learns here too."""
    assert (model.config.lstm_batching, model.config.lstm_sequence_length, model.config.num_minibatches) == (
        "rotated",
        0,
        4,
    )
    for batch_size, minibatches in ((16, 8), (128, 1), (96, 1)):
        built = kppo.RecurrentPPO(
            "MlpLstmPolicy",
            kppo.make_vec_env("CartPole-v1", n_envs=2, seed=0),
            n_steps=64,
            batch_size=batch_size,
            n_epochs=2,
            seed=0,
            policy_kwargs=dict(lstm_hidden_size=8, net_arch=[8]),
        )
        assert (built.config.lstm_batching, built.config.lstm_sequence_length) == ("rotated", 0)
        assert built.config.num_minibatches == minibatches
    built.learn(128)
    assert built.num_timesteps == 128


def test_cnn_lstm_policy_reads_images_through_one_cnn_before_both_lstms_and_exports_frames_in(tmp_path):
    """sb3-contrib's CnnLstmPolicy: a NatureCNN both LSTMs read (shared, as its default), heads on the LSTMs
    (`net_arch=[]`), torch's names; save/load and the float32 artifact (a uint8 frame and the state in) act as
    `predict` does over an episode, the state carried; a shared LSTM over separate extractors: sb3-contrib's assert."""
    from kppo.exporter.runner import TFLiteRunner
    from tests.helpers.sb3_cnn import BlockImageEnv

    kwargs = dict(lstm_hidden_size=8, features_extractor_kwargs=dict(features_dim=16))
    env = kppo.make_vec_env(BlockImageEnv, n_envs=2, seed=0)
    model = kppo.RecurrentPPO("CnnLstmPolicy", env, n_steps=16, batch_size=16, n_epochs=1, seed=0, policy_kwargs=kwargs)
    model.learn(64)
    assert model.config.actor_hidden_units == () and model.config.features_extractor == "cnn"
    state_dict = model.policy.state_dict()
    assert (
        state_dict["lstm_actor.weight_ih_l0"].shape == (32, 16) and "features_extractor.linear.0.weight" in state_dict
    )
    assert model.policy.features_extractor is model.agent.lstm.extractor
    frames = [BlockImageEnv().reset(seed=40 + i)[0] for i in range(12)]
    state, actions = None, []
    for t, frame in enumerate(frames):
        action, state = model.predict(frame[None], state=state, episode_start=np.array([t == 0]), deterministic=True)
        actions.append(int(np.ravel(action)[0]))
    model.save(tmp_path / "cnn_lstm")
    loaded = kppo.RecurrentPPO.load(tmp_path / "cnn_lstm")
    again = loaded.predict(frames[0][None], deterministic=True)
    np.testing.assert_array_equal(again[1][0], model.predict(frames[0][None], deterministic=True)[1][0])
    exported = kppo.export(model, tmp_path / "cnn_lstm.tflite", representative_obs=np.stack(frames))
    assert exported.metadata["parity"]["max_error"] == 0.0 and exported.metadata["parity"]["state_max_error"] < 1e-5
    runner, h, c, got = TFLiteRunner(exported.path), np.zeros((1, 8), np.float32), np.zeros((1, 8), np.float32), []
    for frame in frames:
        action, h, c = runner.step(frame[None], h, c)
        got.append(int(np.ravel(action)[0]))
    assert got == actions
    np.testing.assert_allclose(h, state[0][0], atol=1e-5)
    separate = dict(kwargs, share_features_extractor=False, shared_lstm=True, enable_critic_lstm=False)
    with pytest.raises(AssertionError, match=r"^If the features extractor is not shared, the LSTM cannot be shared"):
        kppo.RecurrentPPO("CnnLstmPolicy", env, n_steps=16, batch_size=16, policy_kwargs=separate)


class FakeImageEnv(gym.Env):
    """SB3's FakeImageEnv in miniature: random 40x40x3 uint8 frames, Discrete actions, episodes of 16 steps."""

    observation_space = gym.spaces.Box(0, 255, (40, 40, 3), np.uint8)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self.observation_space.sample(), {}

    def step(self, action):
        self.t += 1
        return self.observation_space.sample(), 0.0, False, self.t >= 16, {}


@pytest.mark.parametrize(
    "policy_kwargs",
    [
        {"share_features_extractor": False},
        dict(enable_critic_lstm=False, lstm_hidden_size=4, share_features_extractor=False),
    ],
)
def test_cnn_lstm_policy_with_separate_features_extractors(policy_kwargs):
    """sb3-contrib's tests/test_lstm.py::test_cnn cases with `share_features_extractor=False`: the actor's LSTM reads
    pi_features_extractor, the critic's LSTM (or its MLP, without one) vf_features_extractor."""
    model = kppo.RecurrentPPO(
        "CnnLstmPolicy",
        FakeImageEnv(),
        n_steps=16,
        seed=0,
        policy_kwargs=dict(**policy_kwargs, features_extractor_kwargs=dict(features_dim=32)),
        n_epochs=2,
    )
    lstm = model.agent.lstm
    actor_cnn, critic_cnn = lstm.extractor, lstm.critic_extractor
    assert actor_cnn is not critic_cnn
    before = [v.numpy() for v in critic_cnn.trainable_variables]
    model.learn(total_timesteps=32)
    assert any(not np.array_equal(a, v.numpy()) for a, v in zip(before, critic_cnn.trainable_variables))
    state_dict = model.policy.state_dict()
    np.testing.assert_array_equal(state_dict["vf_features_extractor.linear.0.bias"], critic_cnn.trainable_variables[-1])
    np.testing.assert_array_equal(
        state_dict["features_extractor.cnn.0.bias"], state_dict["pi_features_extractor.cnn.0.bias"]
    )
    other = kppo.RecurrentPPO(
        "CnnLstmPolicy", FakeImageEnv(), n_steps=16, seed=1,
        policy_kwargs=dict(**policy_kwargs, features_extractor_kwargs=dict(features_dim=32)),
    )  # fmt: skip
    other.set_parameters(model.get_parameters())
    frames = np.stack([FakeImageEnv.observation_space.sample() for _ in range(3)])
    np.testing.assert_array_equal(
        other.predict(frames, deterministic=True)[0], model.predict(frames, deterministic=True)[0]
    )
