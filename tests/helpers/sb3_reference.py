"""What the SB3-parity tests share: the recorded fixtures (`tests/fixtures/sb3`, made by its `record_*.py` under SB3)
and putting SB3's weights, stored in Keras layout, into a kppo agent."""

from pathlib import Path

import numpy as np

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sb3"
ENV_IDS = {"pendulum": "Pendulum-v1", "cartpole": "CartPole-v1", "pendulum_clipped": "Pendulum-v1"}
#: The models SB3 2.9.2 / sb3-contrib 2.9.2 saved (`saved/`, made by `record_sb3_zips.py`): case -> kppo class name.
SAVED = FIXTURES / "saved"
SAVED_CASES = {
    "cartpole": "PPO",
    "pendulum_vecnorm": "PPO",
    "gsde": "PPO",
    "multidiscrete": "PPO",
    "multibinary": "PPO",
    "cnn": "PPO",
    "maskable": "MaskablePPO",
    "lstm": "RecurrentPPO",
    "lstm_layers": "RecurrentPPO",
    "cnn_lstm": "RecurrentPPO",
}


def load(name: str) -> dict[str, np.ndarray]:
    """The arrays of `tests/fixtures/sb3/<name>.npz`."""
    return dict(np.load(FIXTURES / f"{name}.npz"))


def update_model(task: str, data: dict[str, np.ndarray]):
    """The `kppo.PPO` of `record_sb3_update.py`'s setting (`update_<task>.npz`), with SB3's initial weights."""
    import kppo

    policy_kwargs = dict(net_arch=dict(pi=[64, 64], vf=[64, 64]))
    if task == "pendulum":
        policy_kwargs.update(ortho_init=False, log_std_init=-0.5)
    model = kppo.PPO(
        "MlpPolicy",
        kppo.make_vec_env(ENV_IDS[task], n_envs=int(data["n_envs"]), seed=0),
        n_steps=int(data["n_steps"]),
        batch_size=int(data["batch_size"]),
        n_epochs=int(data["n_epochs"]),
        learning_rate=float(data["learning_rate"]),
        gamma=float(data["gamma"]),
        gae_lambda=float(data["gae_lambda"]),
        clip_range=float(data["clip_range"]),
        ent_coef=float(data["ent_coef"]),
        vf_coef=float(data["vf_coef"]),
        max_grad_norm=float(data["max_grad_norm"]),
        policy_kwargs=policy_kwargs,
        seed=0,
    )
    set_weights(model.agent, data)
    return model


def set_weights(agent, data: dict[str, np.ndarray], prefix: str = "") -> None:
    """SB3's MlpPolicy weights (`<prefix>actor_*`, `<prefix>critic_*`, `<prefix>log_std`) into kppo's actor and
    critic (separate 2x64 towers, as SB3's)."""
    for name, net in (("actor", agent.actor), ("critic", agent.critic)):
        for i, layer in enumerate(net.hidden):
            layer.kernel.assign(data[f"{prefix}{name}_kernel_{i}"])
            layer.bias.assign(data[f"{prefix}{name}_bias_{i}"])
        net.head.kernel.assign(data[f"{prefix}{name}_head_kernel"])
        net.head.bias.assign(data[f"{prefix}{name}_head_bias"])
    if f"{prefix}log_std" in data:
        agent.actor.log_std.assign(data[f"{prefix}log_std"])
