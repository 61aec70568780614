"""One update of `kppo.RecurrentPPO` (gSDE, a critic LSTM) against a recorded sb3-contrib `train()`
(`tests/fixtures/sb3/update_recurrent.npz`, made by `record_sb3_recurrent_update.py` with sb3-contrib 2.9.2 /
torch 2.13):
from sb3-contrib's initial weights, the same rollout and the same minibatches in the same order (each 16 steps of one
env from the LSTM states stored at its first step, with episode starts inside), kppo's per-minibatch losses, gradient
norms and final weights equal sb3-contrib's to float32 rounding. That includes torch's two LSTM biases: the update
steps each, and both count in the gradient norm. The same with `n_lstm_layers=2` (`update_recurrent_layers.npz`):
stacked layers, their states stored side by side."""

import gymnasium as gym
import numpy as np
import pytest

from kppo.training.runners.settings import agent_spec
import kppo
from kppo._tf import tf
from kppo.agent.agent import make_agent
from kppo.training.runners.settings import update_settings
from kppo.core.types import Batch
from kppo.update.ppo import minibatch_step
from tests.helpers.sb3_reference import load


def _env():
    env = gym.make("Pendulum-v1", max_episode_steps=10)
    space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    return gym.wrappers.TransformObservation(env, lambda obs: np.asarray(obs[:2], np.float32), space)


def _model(data) -> kppo.RecurrentPPO:
    names = ("learning_rate", "gamma", "gae_lambda", "clip_range", "ent_coef", "vf_coef", "max_grad_norm")
    return kppo.RecurrentPPO(
        "MlpLstmPolicy",
        kppo.make_vec_env(_env, n_envs=int(data["n_envs"]), seed=0),
        n_steps=int(data["n_steps"]),
        batch_size=int(data["batch_size"]),
        n_epochs=int(data["n_epochs"]),
        use_sde=True,
        sde_sample_freq=int(data["sde_sample_freq"]),
        seed=0,
        **{k: float(data[k]) for k in names},
        policy_kwargs=dict(
            ortho_init=False,
            activation_fn="relu",
            lstm_hidden_size=int(data["units"]),
            n_lstm_layers=int(data.get("layers", 1)),
            enable_critic_lstm=True,
            net_arch=dict(pi=[16], vf=[16]),
        ),
    )


def _set_weights(agent, data, prefix=""):
    for role, cell in zip(("actor", "critic"), agent.lstm.cells):
        for layer in range(cell.num_layers):
            for name in cell.weight_names(layer):
                getattr(cell, name).assign(data[f"{prefix}{role}_lstm_{name}"])
    for role, net in (("actor", agent.actor), ("critic", agent.critic)):
        (layer,) = net.hidden
        layer.kernel.assign(data[f"{prefix}{role}_kernel_0"])
        layer.bias.assign(data[f"{prefix}{role}_bias_0"])
        net.head.kernel.assign(data[f"{prefix}{role}_head_kernel"])
        net.head.bias.assign(data[f"{prefix}{role}_head_bias"])
    agent.actor.sde_log_std.assign(data[f"{prefix}log_std"])


def _rows(data) -> Batch:
    """The recorded rollout as kppo's env-major rows (`kppo.update.ppo.rows`): the memory stored before every row, a
    restart at each env's first step."""
    n_steps, size = int(data["n_steps"]), len(data["obs"])
    return Batch(
        data["obs"],
        data["actions"],
        data["old_log_prob"],
        data["old_values"],
        data["advantages"],
        data["returns"],
        np.zeros((size, 0), bool),
        data["episode_starts"] > 0.5,
        tuple(data[k] for k in ("pi_h", "pi_c", "vf_h", "vf_c")),
        np.arange(size) % n_steps == 0,
    )


@pytest.mark.parametrize("fixture", ["update_recurrent", "update_recurrent_layers"])
def test_one_update_of_kppo_recurrent_ppo_equals_sb3_contribs(fixture):
    data = load(fixture)
    model = _model(data)
    assert model.agent.lstm.num_layers == int(data.get("layers", 1))
    assert (model.config.adam_style, model.config.advantage_std_ddof) == ("torch", 1)
    _set_weights(model.agent, data)
    settings = update_settings(model.config)
    assert settings.rotated_steps == 32  # sb3-contrib's minibatches: windows of consecutive env-major rows
    step = tf.function(lambda mb: minibatch_step(model.agent, settings, mb), autograph=False)
    rows, size = _rows(data), int(data["batch_size"])
    results = [step(tf.nest.map_structure(lambda x, w=w: tf.constant(x[w : w + size]), rows)) for w in data["windows"]]
    close = dict(rtol=2e-5, atol=2e-6)
    for field, sb3 in (
        ("policy_loss", "pg_loss"),
        ("value_loss", "value_loss"),
        ("approx_kl", "approx_kl"),
        ("clip_fraction", "clip_fraction"),
        ("total_loss", "loss"),
    ):
        np.testing.assert_allclose([float(getattr(i, field)) for i, _, _ in results], data[sb3], err_msg=field, **close)
    np.testing.assert_allclose([-float(i.entropy) for i, _, _ in results], data["entropy_loss"], **close)
    np.testing.assert_allclose([float(g) for _, g, _ in results], data["grad_norm"], rtol=5e-6)
    want = make_agent(agent_spec(model.config), 2, model.action_space)
    _set_weights(want, data, prefix="after_")
    for got, expected in zip(model.agent.variables, want.variables):
        np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=0, atol=1e-6, err_msg=got.path)
