"""The Lightning-style surface of lit_sb3's PPO on `kppo.PPO`: hparams, the counters, ranks, the optimizer,
`training_step` against SB3's recorded minibatch losses, and `learn(env=, log_every_n_steps=, default_root_dir=)`."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

import kppo
from kppo.sb3.lightning import RolloutBufferSamples
from tests.helpers.sb3_reference import load, update_model


def test_hparams_are_the_constructors_arguments_and_hparams_initial_does_not_change():
    model = kppo.PPO("MlpPolicy", "CartPole-v1", n_steps=64, batch_size=32, learning_rate=lambda p: 1e-3 * p, seed=3)
    assert model.hparams.n_steps == 64 and model.hparams["batch_size"] == 32 and model.hparams.seed == 3
    assert model.hparams.policy == "MlpPolicy" and "env" not in model.hparams
    model.hparams.n_steps = 1
    assert model.hparams.n_steps == 1 and model.hparams_initial.n_steps == 64
    model.hparams_initial.gamma = 0.5
    assert model.hparams_initial.gamma == 0.99
    with pytest.raises(AttributeError, match="no hyperparameter 'nsteps'"):
        _ = model.hparams.nsteps


def test_current_epoch_counts_iterations_and_global_step_gradient_steps():
    model = kppo.PPO("MlpPolicy", "CartPole-v1", n_steps=32, batch_size=16, n_epochs=3, seed=0)
    assert (model.current_epoch, model.global_step) == (0, 0)
    model.learn(32 * 2)
    assert (model.current_epoch, model.global_step) == (2, 2 * 3 * 2)
    model.learn(32, reset_num_timesteps=False)
    assert (model.current_epoch, model.global_step) == (3, 3 * 3 * 2)
    assert (model.global_rank, model.local_rank, model.on_gpu) == (0, 0, False)
    assert model.configure_optimizers() is model.agent.optimizer
    assert model.env is model.get_env()


@pytest.mark.parametrize("task", ["cartpole", "pendulum"])
def test_training_step_is_sb3s_minibatch_loss(task):
    """From SB3's initial weights, the loss of SB3's first minibatch (recorded by `record_sb3_update.py`) equals
    SB3's `loss` to float32 rounding; `batch_idx` does not change it."""
    data = load(f"update_{task}")
    model = update_model(task, data)
    rows = data["permutations"][0][: int(data["batch_size"])]
    batch = RolloutBufferSamples(
        *(data[name][rows] for name in ("obs", "actions", "old_values", "old_log_prob", "advantages", "returns"))
    )
    loss = model.training_step(batch, 0)
    np.testing.assert_allclose(float(loss), data["loss"][0], rtol=2e-5, atol=2e-6)
    assert float(model.training_step(batch, 7)) == float(loss)


def test_training_step_takes_the_rollout_buffers_minibatches():
    """`model.rollout_buffer.get(batch_size)` yields SB3's samples of the last rollout (env-major, a permutation),
    and their losses are finite scalars."""
    model = kppo.PPO("MlpPolicy", "CartPole-v1", n_steps=32, batch_size=16, seed=0)
    model.learn(32)
    batches = list(model.rollout_buffer.get(16))
    assert len(batches) == 2 and all(b.observations.shape == (16, 4) for b in batches)
    seen = np.concatenate([b.returns for b in batches])
    np.testing.assert_array_equal(np.sort(seen), np.sort(model.rollout_buffer.returns.reshape(-1)))
    losses = [float(model.training_step(b, i)) for i, b in enumerate(batches)]
    assert all(np.isfinite(losses))


def test_learn_takes_lit_sb3s_arguments(tmp_path):
    model = kppo.PPO("MlpPolicy", None, n_steps=32, batch_size=32, n_epochs=1, seed=0)
    model.learn(32 * 2, env="CartPole-v1", log_every_n_steps=1, default_root_dir=tmp_path, tb_log_name="run")
    run = tmp_path / "run_1"
    assert yaml.safe_load((run / "hparams.yaml").read_text())["n_steps"] == 32
    assert list(run.glob("events.out.tfevents.*"))  # SB3's logger, to TensorBoard
    checkpoint = run / "checkpoints" / "epoch=1-step=2.zip"
    assert checkpoint.is_file()
    loaded = kppo.PPO.load(checkpoint)
    obs = np.zeros((1, 4), np.float32)
    np.testing.assert_array_equal(loaded.predict(obs, deterministic=True)[0], model.predict(obs, deterministic=True)[0])
    model.learn(32, default_root_dir=tmp_path, tb_log_name="run")
    assert (tmp_path / "run_2" / "hparams.yaml").is_file()
    with pytest.raises(ValueError, match="log_every_n_steps: expected it alone or equal to log_interval=2, got 3"):
        model.learn(32, log_interval=2, log_every_n_steps=3)


def test_training_step_refuses_what_it_cannot_compute():
    model = kppo.RecurrentPPO("MlpLstmPolicy", "CartPole-v1", n_steps=16, batch_size=16, seed=0)
    with pytest.raises(ValueError, match="training_step: expected an MLP or CNN policy"):
        model.training_step(None, 0)
    model = kppo.PPO("MlpPolicy", "CartPole-v1", n_steps=16, batch_size=16, seed=0)
    with pytest.raises(ValueError, match=r"batch: expected SB3's RolloutBufferSamples fields .* got dict"):
        model.training_step({"observations": np.zeros((2, 4))}, 0)
