"""What the SB3-parity tests share: the recorded fixtures (`tests/fixtures/sb3`, made by its `record_*.py` under SB3)
and putting SB3's weights, stored in Keras layout, into a kppo agent."""

from pathlib import Path

import numpy as np

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sb3"
ENV_IDS = {"pendulum": "Pendulum-v1", "cartpole": "CartPole-v1"}


def load(name: str) -> dict[str, np.ndarray]:
    """The arrays of `tests/fixtures/sb3/<name>.npz`."""
    return dict(np.load(FIXTURES / f"{name}.npz"))


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
