"""`AgentSpec`: what building an agent reads of a run's settings (the networks, the action distribution, the features
extractor, the optimizer, and how its policy normalizes observations), with every default applied.

The agent layer never reads a Config: the training layer resolves one into an `AgentSpec`
(`kppo.training.runners.settings.agent_spec`), so the networks depend only on the values they use.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from kppo.core.optimizers import OptimizerSpec


@dataclass(frozen=True)
class AgentSpec:
    """An agent's settings, named as the Config options they come from (`kppo.Config` documents each)."""

    seed: int
    # the towers
    num_hidden_layers: int
    num_hidden_units: int
    actor_hidden_units: tuple[int, ...] | None
    critic_hidden_units: tuple[int, ...] | None
    activation: str
    kernel_init: str
    bias_init: str
    state_independent_std: bool
    log_std_init: float
    # the LSTM of a recurrent agent
    recurrent: str | None
    lstm_hidden_size: int
    n_lstm_layers: int
    enable_critic_lstm: bool
    shared_lstm: bool
    # the features extractor
    features_extractor: str
    features_dim: int | None
    normalize_images: bool
    share_features_extractor: bool
    # the action distribution
    squash: bool
    box_actions: str
    use_sde: bool
    full_std: bool
    use_expln: bool
    action_masks: bool
    # the optimizer
    adam_style: str
    learning_rate: float
    optimizer: OptimizerSpec
    # the policy's observation normalization
    normalize_obs: bool
    normalize_obs_keys: tuple[str, ...] | None
    clip_obs: float
    norm_epsilon: float

    @property
    def actor_widths(self) -> list[int]:
        """The actor tower's hidden widths: `actor_hidden_units`, else `num_hidden_layers` of `num_hidden_units`."""
        return self._widths(self.actor_hidden_units)

    @property
    def critic_widths(self) -> list[int]:
        """The critic tower's hidden widths, as `actor_widths`."""
        return self._widths(self.critic_hidden_units)

    def _widths(self, given: tuple[int, ...] | None) -> list[int]:
        return list(given) if given is not None else [self.num_hidden_units] * self.num_hidden_layers

    def least_weights(self, observation_dim: int = 0) -> int:
        """A lower bound on the numbers a checkpoint of this agent holds: the observation statistics' mean (of
        `observation_dim` values), the hidden layers' biases and the kernels between them in both towers, a recurrent
        agent's LSTM recurrent kernel (4 h x h a layer). Each is a float32 in the checkpoint's data files; the
        networks' part (`observation_dim=0`) is in every SB3 state_dict of them too (`kppo.sb3.saves.from_sb3`)."""
        total = observation_dim
        for widths in (self.actor_widths, self.critic_widths):
            total += sum(widths) + sum(a * b for a, b in itertools.pairwise(widths))
        if self.recurrent:
            total += 4 * self.n_lstm_layers * self.lstm_hidden_size**2
        return total
