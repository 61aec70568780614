"""`Config`: every PPO option, validated on construction, with YAML round trip and rex/SB3 spellings (`spellings`).

Vocabulary (kppo name <- rex name <- Stable-Baselines3 name):

    learning_rate, lr_schedule     <- LR, ANNEAL_LR              <- learning_rate
    num_envs, num_steps            <- NUM_ENVS, NUM_STEPS        <- n_envs, n_steps
    total_timesteps                <- TOTAL_TIMESTEPS            <- learn(total_timesteps)
    num_epochs, num_minibatches    <- UPDATE_EPOCHS, NUM_MINIBATCHES <- n_epochs, batch_size (= minibatch_size)
    gamma, gae_lambda              <- GAMMA, GAE_LAMBDA          <- gamma, gae_lambda
    clip_range, clip_range_vf      <- CLIP_EPS (clips values too) <- clip_range, clip_range_vf
    clip_schedule                  <- -                          <- clip_range (a schedule, RL-Zoo's lin_X)
    ent_coef, vf_coef, max_grad_norm <- ENT_COEF, VF_COEF, MAX_GRAD_NORM <- same
    ent_schedule                   <- -                          <- ent_coef (a schedule, as learning_rate)
    num_hidden_layers, num_hidden_units, activation, kernel_init
                                   <- NUM_HIDDEN_LAYERS, NUM_HIDDEN_UNITS, HIDDEN_ACTIVATION, KERNEL_INIT_TYPE
    state_independent_std, log_std_init, squash <- STATE_INDEPENDENT_STD, -, SQUASH <- -, log_std_init, squash_output
    normalize_obs, normalize_reward <- NORMALIZE_ENV (both)      <- norm_obs, norm_reward, normalize (both)
    fixed_init, offset_step        <- FIXED_INIT, OFFSET_STEP
    num_eval_envs, eval_freq       <- NUM_EVAL_ENVS, EVAL_FREQ (number of evaluation rounds per run)
    verbose, debug, seed           <- VERBOSE, DEBUG, rng        <- verbose, seed

"rollout" = num_envs x num_steps transitions; `rollout_size` and `minibatch_size` are derived. There is no bare
`batch_size` inside kppo: SB3's `batch_size` is our `minibatch_size` and is translated to `num_minibatches`.
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from collections.abc import Mapping

import yaml

from kppo.config.choices import (
    ACTIVATIONS,
    DISTRIBUTE,
    FEATURES_EXTRACTORS,
    KERNEL_INITS,
    OLD_ENV_BACKENDS,
)
from kppo.config.fields import ConfigFields
from kppo.config.population import SWEEPABLE
from kppo.config.schedules import SCHEDULES
from kppo.config.spellings import suggest, translate
from kppo.config.validation import check, validate
from kppo.config.values import coerce, load_yaml, read_text, yaml_problem

#: Names other modules read from here.
__all__ = [
    "ACTIVATIONS",
    "DISTRIBUTE",
    "FEATURES_EXTRACTORS",
    "KERNEL_INITS",
    "SCHEDULES",
    "SWEEPABLE",
    "Config",
    "ConfigFields",
    "Sweep",
    "load_yaml",
]


@dataclass(frozen=True)
class Config(ConfigFields):
    """PPO hyperparameters and run settings (`ConfigFields`: every option with its one-line documentation),
    validated on construction, read from any spelling and YAML, written back losslessly."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Config:
        """Refuses an unknown field name in one line, with the nearest known one (the dataclass's own TypeError
        quotes the name raw, a newline in it included)."""
        del args
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = [name for name in kwargs if name not in names]
        if unknown:
            raise TypeError(f"Config: unknown field {unknown[0]!r} ({suggest(str(unknown[0]), names)})")
        return super().__new__(cls)

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            object.__setattr__(self, f.name, coerce(f.name, f.type, getattr(self, f.name)))
        object.__setattr__(self, "env_backend", OLD_ENV_BACKENDS.get(self.env_backend, self.env_backend))
        validate(self)

    # --- construction from other spellings ---
    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> Config:
        """Builds a Config from kppo, rex (UPPER_CASE) or SB3 names; an unknown key is a ValueError naming it."""
        return cls(**translate(values, Config.__dataclass_fields__))

    @classmethod
    def from_yaml(cls, path_or_text: str | Path) -> Config:
        """Reads a YAML mapping (a path, or YAML text containing a newline or colon); errors name the file and line."""
        text, source = read_text(path_or_text)
        try:
            values = load_yaml(text)
        except yaml.YAMLError as err:
            raise ValueError(f"config YAML {source}: could not parse {yaml_problem(err)}") from None
        if values is None:
            values = {}
        if not isinstance(values, Mapping):
            raise ValueError(f"config YAML {source}: expected a mapping of option: value, got {type(values).__name__}")
        if source == "text":  # YAML text: its errors are the options' own
            return cls.from_dict(values)
        try:
            return cls.from_dict(values)
        except ValueError as err:  # a file: its errors name it
            raise ValueError(f"config YAML {source}: {str(err).removeprefix('config: ')}") from None

    def to_yaml(self, path: str | Path | None = None) -> str:
        """Dumps all fields under kppo names; writes to `path` if given. Returns the YAML text."""
        text = yaml.safe_dump(self.to_dict(), sort_keys=False)
        if path is not None:
            Path(path).write_text(text)
        return text

    def replace(self, **changes: Any) -> Config:
        """A copy with `changes` applied (any spelling), validated again."""
        merged = self.to_dict()
        merged.update(translate(changes, Config.__dataclass_fields__, base=merged))
        return Config(**merged)

    def sweep(self, **values: list) -> Sweep:
        """A grid over per-member hyperparameters (`SWEEPABLE`, any spelling), e.g.
        `config.sweep(learning_rate=[1e-4, 3e-4], ent_coef=[0.0, 0.01])`: 4 settings, each trained for every seed of
        `kppo.train(env, sweep, seed=[...])` in one compiled program."""
        grid = {}
        for name, options in translate(values, Config.__dataclass_fields__).items():
            check(name in SWEEPABLE, "sweep", f"fields among {', '.join(SWEEPABLE)}", name)
            options = list(options) if isinstance(options, (list, tuple)) else [options]
            check(len(options) > 0, f"sweep.{name}", "a non-empty list of values", options)
            grid[name] = [self.replace(**{name: v}).to_dict()[name] for v in options]  # validated, coerced
        return Sweep(self, grid)

    @classmethod
    def field_docs(cls) -> dict[str, str]:
        """Field name -> one-line documentation (CLI help, docs)."""
        return {f.name: f.metadata["doc"] for f in dataclasses.fields(cls)}


@dataclass(frozen=True)
class Sweep:
    """`Config.sweep`'s grid: the base config and, per swept field, its values (the grid is their product)."""

    config: Config
    grid: dict[str, list]

    def settings(self) -> list[dict[str, Any]]:
        """One dict of swept values per grid point (the last field varies fastest)."""
        return [dict(zip(self.grid, point)) for point in itertools.product(*self.grid.values())]

    def members(self, seeds: list[int]) -> list[Config]:
        """Every grid point with every seed (seeds vary fastest)."""
        return [self.config.replace(**point, seed=seed) for point in self.settings() for seed in seeds]
