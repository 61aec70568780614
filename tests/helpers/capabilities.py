"""The capability matrix: every kind of env x every kind of run x every kind of agent, each cell a short training run
and the checks of what must be true of it. tests/training/test_capabilities.py runs the single and population cells,
tests/replicated/test_capabilities.py the mirrored ones (on 2 logical CPU devices); the docs' capability table
(docs/hooks/reference.py, `capability_table`) is generated from `CELLS`, read from this file's source.

Imports of TensorFlow and kppo stay inside the functions: the docs hook reads `CELLS` without importing anything.
"""

from __future__ import annotations

import numpy as np

ENV_KINDS = ("native", "gymnasium")
RUN_KINDS = ("single", "population", "mirrored")
AGENT_KINDS = ("mlp", "lstm", "cnn", "masked")

#: (env kind, agent kind) -> the env each cell of that row trains on (with the run kinds, the 24 cells; every one
#: trains: no combination is refused).
CELLS = {
    ("native", "mlp"): "CartPole-v1 (kppo.envs)",
    ("native", "lstm"): "CartPole-v1 (kppo.envs), recurrent='lstm'",
    ("native", "cnn"): "Breakout-MinAtar (kppo.envs), SmallCNN",
    ("native", "masked"): "a masked-choice kppo.envs.Task, action_masks=True",
    ("gymnasium", "mlp"): "gymnasium CartPole-v1",
    ("gymnasium", "lstm"): "gymnasium CartPole-v1, recurrent='lstm'",
    ("gymnasium", "cnn"): "a uint8-image gymnasium env, SmallCNN",
    ("gymnasium", "masked"): "a gymnasium env with action_masks(), action_masks=True",
}

TINY = dict(
    num_envs=4,
    num_steps=16,
    total_timesteps=4 * 16 * 2,
    num_epochs=2,
    num_minibatches=2,
    num_hidden_units=8,
    eval_freq=2,
    num_eval_envs=2,
)
AGENT_CHANGES = {
    "mlp": {},
    "lstm": dict(recurrent="lstm", lstm_hidden_size=8),
    "cnn": dict(features_extractor="small_cnn"),
    "masked": dict(action_masks=True),
}
MIRRORED = dict(distribute="mirrored", devices=("/cpu:0", "/cpu:1"))


def cells(run: str) -> list[tuple[str, str, str]]:
    """Every (env, run, agent) cell of one run kind, in the table's order."""
    return [(env, run, agent) for env in ENV_KINDS for agent in AGENT_KINDS]


def cell_id(cell: tuple[str, str, str]) -> str:
    return "-".join(cell)


def cell_env(env: str, agent: str):
    """What `kppo.train` is given for the cell: a TF-native name or env, a gymnasium id or factory."""
    from kppo import envs
    from tests.helpers.image_envs import BrightHalfEnv
    from tests.helpers.masked_envs import MaskedChoiceEnv, MaskedChoiceTask

    if env == "native":
        return {"cnn": "Breakout-MinAtar", "masked": envs.wrap(MaskedChoiceTask())}.get(agent, "CartPole-v1")
    return {"cnn": BrightHalfEnv, "masked": MaskedChoiceEnv}.get(agent, "CartPole-v1")


def cell_config(env: str, run: str, agent: str):
    import kppo

    changes = dict(AGENT_CHANGES[agent])
    if env == "gymnasium":
        changes["env_backend"] = "gymnasium"
    elif agent == "cnn":
        changes["normalize_images"] = False  # MinAtar's images are float 0/1 channels
    if run == "mirrored":
        changes.update(MIRRORED)
    return kppo.Config(**TINY, **changes)


def train_cell(cell: tuple[str, str, str]):
    """The cell's short run: one result (single, mirrored) or a population of two seeds."""
    import kppo

    env, run, agent = cell
    seed = [0, 1] if run == "population" else 0
    return kppo.train(cell_env(env, agent), cell_config(env, run, agent), seed=seed)


def check_trained(result, config) -> None:
    """Every rollout ran, every update applied gradient steps, and the losses and evaluation returns are finite."""
    metrics = result.metrics
    assert int(metrics["train/total_steps"][-1]) == config.total_timesteps
    assert np.all(metrics["train/minibatch_steps"] > 0)
    assert np.all(np.isfinite(metrics["train/total_loss"]))
    assert np.all(np.isfinite(metrics["eval/mean_returns"]))


def check_agent(result, agent: str, env: str) -> None:
    """What is true of the agent kind: its policy acts inside the action space; an LSTM policy returns its memory; a
    CNN agent reads the image through convolution kernels; a masked policy never samples a masked action."""
    policy = result.policy
    obs = np.asarray(result.observation_space.sample())
    if agent == "lstm":
        action, state = policy.predict(obs, state=None, episode_start=np.ones(1, bool))
        assert [np.shape(s)[-1] for s in state] == [result.config.lstm_hidden_size] * len(state)
    elif agent == "masked":
        _check_masks(policy, result.action_space.n, np.random.default_rng(0), obs)
        return
    else:
        action, _ = policy.predict(obs)
    assert result.action_space.contains(np.asarray(action).astype(result.action_space.dtype).reshape(()))
    if agent == "cnn":
        assert any(len(v.shape) == 4 for v in result.agent.actor.trainable_variables), env


def _check_masks(policy, n: int, rng: np.random.Generator, obs: np.ndarray) -> None:
    masks = rng.random((64, n)) < 0.4
    masks[np.arange(64), rng.integers(0, n, 64)] = True  # at least one allowed action a row
    actions, _ = policy.predict(np.repeat(obs[None], 64, 0), action_masks=masks)
    assert masks[np.arange(64), np.asarray(actions)].all()


def check_cell(cell: tuple[str, str, str], result) -> None:
    """The checks of every cell; a population's for each member, whose weights differ (seeds 0 and 1)."""
    env, run, agent = cell
    members = result.members if run == "population" else [result]
    for member in members:
        check_trained(member, member.config)
        check_agent(member, agent, env)
    if run == "population":
        assert [m.config.seed for m in members] == [0, 1]
        first, second = (m.agent.actor.trainable_variables[0].numpy() for m in members)
        assert not np.array_equal(first, second)
