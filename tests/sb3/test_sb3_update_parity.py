"""One update of `kppo.PPO` against a recorded Stable-Baselines3 `train()` (`tests/fixtures/sb3/update_*.npz`, made by
`record_sb3_update.py` with SB3 2.9.2 / torch 2.13): from SB3's initial weights, the same rollout and the same
minibatch order, kppo's per-minibatch losses, gradient norms and final weights equal SB3's to float32 rounding.
kppo.PPO computes SB3's update: torch's Adam (`adam_style="torch"`) and the sample std of the advantages
(`advantage_std_ddof=1`); with Keras' Adam or the population std the weights measurably differ (tested)."""

import numpy as np
import pytest

from kppo.training.runners.settings import agent_spec
from kppo._tf import tf
from kppo.agent.agent import make_agent
from kppo.training.runners.settings import update_settings
from kppo.core.types import Batch
from kppo.update.ppo import minibatch_step
from tests.helpers.sb3_reference import load, set_weights, update_model


def _update(agent, config, data) -> list:
    """SB3's minibatches in SB3's order through kppo's minibatch step; returns the loss infos and gradient norms."""
    settings = update_settings(config)
    step = tf.function(lambda mb: minibatch_step(agent, settings, mb), autograph=False)
    actions = data["actions"].reshape((len(data["obs"]), *agent.dist.action_shape))
    batch = Batch(
        data["obs"],
        actions.astype(agent.dist.action_dtype.as_numpy_dtype),
        data["old_log_prob"],
        data["old_values"],
        data["advantages"],
        data["returns"],
        np.zeros((len(data["obs"]), 0), bool),
    )
    size, out = int(data["batch_size"]), []
    for permutation in data["permutations"]:
        for start in range(0, len(permutation), size):
            rows = permutation[start : start + size]
            info, grad_norm, _ = step(tf.nest.map_structure(lambda x, rows=rows: tf.constant(x[rows]), batch))
            out.append((info, grad_norm))
    return out


@pytest.mark.parametrize("task", ["pendulum", "cartpole"])
def test_one_update_of_kppo_ppo_equals_sb3s(task):
    data = load(f"update_{task}")
    model = update_model(task, data)  # SB3's initial weights in
    assert (model.config.adam_style, model.config.advantage_std_ddof) == ("torch", 1)
    results = _update(model.agent, model.config, data)
    close = dict(rtol=2e-5, atol=2e-6)
    for field, sb3 in (
        ("policy_loss", "pg_loss"),
        ("value_loss", "value_loss"),
        ("approx_kl", "approx_kl"),
        ("clip_fraction", "clip_fraction"),
        ("total_loss", "loss"),
    ):
        np.testing.assert_allclose([float(getattr(i, field)) for i, _ in results], data[sb3], err_msg=field, **close)
    np.testing.assert_allclose([-float(i.entropy) for i, _ in results], data["entropy_loss"], **close)
    np.testing.assert_allclose([float(g) for _, g in results], data["grad_norm"], rtol=5e-6)
    want = make_agent(agent_spec(model.config), data["obs"].shape[1], model.action_space)
    set_weights(want, data, prefix="after_")
    for got, expected in zip(model.agent.variables, want.variables):
        np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=0, atol=5e-7, err_msg=got.path)  # seen: 1.2e-7


@pytest.mark.parametrize("changes", [{"adam_style": "keras"}, {"advantage_std_ddof": 0}])
def test_keras_adam_or_the_population_std_do_not_give_sb3s_weights(changes):
    data = load("update_pendulum")
    model = update_model("pendulum", data)
    config = model.config.replace(**changes)
    agent = make_agent(agent_spec(config), data["obs"].shape[1], model.action_space)
    set_weights(agent, data)
    _update(agent, config, data)
    want = make_agent(agent_spec(config), data["obs"].shape[1], model.action_space)
    set_weights(want, data, prefix="after_")
    error = max(np.abs(g.numpy() - w.numpy()).max() for g, w in zip(agent.variables, want.variables))
    assert error > 1e-5  # measured: 1.3e-3 (Keras' Adam), 1.7e-5 (population std), against 1.2e-7 above
