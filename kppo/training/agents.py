"""A saved agent directory read back with its Config (`read_metadata`, `load_agent`, `SavedAgent`); the agent is built
from the Config's `AgentSpec` (`kppo.training.runners.settings.agent_spec`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import gymnasium as gym

from kppo.agent import checkpoint
from kppo.agent.agent import Agent, build_agent, make_policy, read_any_cells
from kppo.agent.policy import Policy
from kppo.config.options import Config
from kppo.core.types import Moments
from kppo.gym_envs.spaces import flat_dim
from kppo.training.runners.settings import agent_spec


class SavedAgent(NamedTuple):
    """An agent directory read back (`load_agent`)."""

    config: Config
    agent: Agent
    obs_stats: Moments
    return_stats: Moments
    observation_space: gym.spaces.Space
    action_space: gym.spaces.Space
    metadata: dict[str, Any]

    @property
    def policy(self) -> Policy:
        return make_policy(
            self.agent, self.obs_stats, agent_spec(self.config), self.observation_space, self.action_space
        )


def read_metadata(path: str | Path) -> tuple[Config, dict[str, Any], gym.spaces.Space, gym.spaces.Space]:
    """(config, metadata, observation_space, action_space) of a saved agent (`kppo.agent.checkpoint.read_files`);
    one-line errors naming it for foreign input, and for a config whose networks cannot fit in its weights
    (`kppo.agent.checkpoint.check_fits`)."""
    files = checkpoint.read_files(path)
    try:
        config = Config.from_yaml(files.path / "config.yaml")
    except ValueError as err:
        source = files.source
        raise ValueError(f"{source}: config.yaml: {err}" if source != repr(str(files.path)) else str(err)) from None
    checkpoint.check_fits(agent_spec(config), files)
    return config, files.metadata, files.observation_space, files.action_space


def load_agent(path: str | Path, user_extractor: Callable | None = None) -> SavedAgent:
    """Rebuilds the agent saved by `kppo.agent.checkpoint.save` at `path` (YAML, JSON and TF checkpoint files only;
    nothing in them is executed). One-line ValueErrors for a directory that is not an agent or does not fit its
    config. `user_extractor(config, observation_space)`: the factory of a user's features extractor (None: the one
    the config names), which a config cannot name."""
    config, metadata, observation_space, action_space = read_metadata(path)
    spec = agent_spec(config)
    factory = None if user_extractor is None else user_extractor(config, observation_space)
    agent = build_agent(spec, observation_space, action_space, features_extractor=factory)
    obs_stats, return_stats = read_any_cells(
        lambda into: checkpoint.restore(path, into, [flat_dim(observation_space)]), agent, spec, action_space
    )
    return SavedAgent(config, agent, obs_stats, return_stats, observation_space, action_space, metadata)
