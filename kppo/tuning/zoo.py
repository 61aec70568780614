"""RL-Zoo's hyperparameter files (`hyperparams/ppo.yml`: env id -> its settings) as a Config, for `kppo train FILE
--env ID` and `kppo tune FILE --env ID` alike: the entry read by `kppo.config.zoo` (rl-zoo3's rules, SB3's PPO
defaults from `kppo.config.sb3_defaults`), its `policy_kwargs` translated as `kppo.PPO` translates SB3's
(`kppo.sb3.arguments.policy_config`). Here, above `sb3/`, because that translation lives there.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kppo.config.options import Config
from kppo.config.sb3_defaults import SB3_PPO_DEFAULTS
from kppo.config.values import coerce, printable
from kppo.config.zoo import SEARCH_EVALUATION_STEPS, ZooEntry, is_zoo_file, read_entry, zoo_key_message
from kppo.sb3.arguments import policy_config

__all__ = ["SB3_PPO_DEFAULTS", "is_zoo_file", "read_zoo", "zoo_config"]

#: The policy_kwargs values `policy_config` reads as numbers or flags: checked here, so that a string or a list is
#: refused in one line rather than converted (`bool("no")` is True).
_POLICY_VALUES = {
    "log_std_init": "float",
    "ortho_init": "bool",
    "squash_output": "bool",
    "full_std": "bool",
    "use_expln": "bool",
    "normalize_images": "bool",
    "share_features_extractor": "bool",
}
#: SB3 policy_kwargs that name classes (imported by rl-zoo3's eval): kppo imports no class by name.
_CLASS_KWARGS = ("features_extractor_class", "features_extractor_kwargs", "optimizer_class")


def _policy_fields(policy: str, kwargs: dict[str, Any], key: str) -> dict[str, Any]:
    """An entry's policy_kwargs (already read from its string) as Config fields, for SB3's `policy`; `key` is the
    entry's, as messages name it."""
    where = f"{key}.policy_kwargs"
    for name, kind in _POLICY_VALUES.items():
        if name in kwargs:
            coerce(f"{where}.{name}", kind, kwargs[name])
    named = [name for name in _CLASS_KWARGS if name in kwargs]
    if named:
        raise ValueError(
            f"{where}.{named[0]}: expected none (kppo imports no class by name; kppo.PPO takes Keras classes)"
        )
    try:
        fields = policy_config(kwargs)
    except ValueError as err:
        raise ValueError(f"{key}.{err}") from None  # `policy_kwargs.<key>: ...`
    for name in ("normalize_images", "share_features_extractor"):
        if name in kwargs:
            fields[name] = bool(kwargs[name])
    if policy == "CnnPolicy" and kwargs.get("net_arch") is None:  # SB3: the heads on the CNN's features
        fields["actor_hidden_units"] = fields["critic_hidden_units"] = ()
    return fields


def zoo_config(entry: ZooEntry) -> Config:
    """The Config of a read RL-Zoo entry: SB3's defaults, its policy, then its values; `n_timesteps` rounded up to
    whole rollouts, as SB3's `learn` counts them."""
    key = printable(entry.key)
    try:
        base = Config.from_dict({**entry.base, **_policy_fields(entry.policy, entry.policy_kwargs, key)})
        return whole_rollouts(base.replace(**entry.changes))
    except ValueError as err:
        raise ValueError(f"{entry.source}: {zoo_key_message(str(err), key, entry.settings)}") from None


def whole_rollouts(config: Config, steps: int | None = None) -> Config:
    """`config` with a budget of `steps` (its own by default) rounded up to whole rollouts: SB3's `learn` collects
    rollouts until `n_timesteps` is reached (`n_timesteps=1` trains one rollout), where a Config rounds down."""
    steps = config.total_timesteps if steps is None else steps
    rollouts = max(1, -(-steps // config.rollout_size))
    return config.replace(total_timesteps=rollouts * config.rollout_size)


def read_zoo(
    path_or_text: str | Path, env: str | None = None, evaluation_steps: int = SEARCH_EVALUATION_STEPS
) -> tuple[str, Config]:
    """(env id, Config) of an RL-Zoo hyperparameter file's entry (`env`, or its only one); an evaluation round
    every `evaluation_steps` steps (RL-Zoo's search: 100,000; its train.py: 25,000)."""
    entry = read_entry(path_or_text, env, is_atari, evaluation_steps)
    return entry.env, zoo_config(entry)


def is_atari(env_id: str) -> bool:
    """True for a registered gymnasium id of the Arcade Learning Environment (rl-zoo3's `is_atari`: its entry point
    names `AtariEnv`), which reads a file's `atari` entry."""
    import gymnasium as gym

    try:
        return "AtariEnv" in str(gym.spec(env_id).entry_point)
    except (gym.error.Error, ImportError, ValueError):
        return False
