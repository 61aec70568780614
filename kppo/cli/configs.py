"""CONFIG and `--set NAME=VALUE` into a Config: the tuned configs of configs/ and RL-Zoo's entries in configs/zoo/,
a YAML file or an RL-Zoo hyperparameter file (`--env` picks its entry), YAML values read as config files are, env ids
checked before anything is built; the config fields' help for `kppo train --help`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from kppo.cli.runs import printable


def _config_dir() -> Path:
    """The tuned configs: `kppo/configs/` inside an installed wheel, the checkout's top-level `configs/` otherwise."""
    package = Path(__file__).resolve().parents[1]
    installed = package / "configs"
    return installed if installed.is_dir() else package.parent / "configs"


CONFIG_DIR = _config_dir()


def config_help() -> str:
    """Every config field with its docstring line and default (`kppo train --help`'s epilog)."""
    from kppo.config.options import Config

    docs = Config.field_docs()
    defaults = Config().to_dict()
    width = max(len(name) for name in docs)
    lines = ["config fields (set with --set name=value; rex and SB3 spellings also work):"]
    lines += [f"  {name:<{width}}  {docs[name]} Default: {defaults[name]!r}." for name in docs]
    return "\n".join(lines)


def parse_value(option: str, text: str) -> Any:
    """A command-line value (--set NAME=VALUE, --sweep NAME=V1,V2) read as YAML, bounded as config files are
    (`load_yaml`); a one-line error naming `option` when it is not YAML."""
    from kppo.config.options import load_yaml  # the loader Config.from_yaml reads files with

    try:
        return load_yaml(text)
    except yaml.YAMLError:
        raise ValueError(f"{option}: could not parse the value {text!r}") from None


def bundled_names() -> list[str]:
    """The names `kppo train NAME` finds in configs/: kppo's tuned configs, and RL-Zoo's entries as `zoo/<env id>`."""
    names = sorted(p.stem for p in CONFIG_DIR.glob("*.yaml"))
    return names + sorted(f"zoo/{p.stem}" for p in (CONFIG_DIR / "zoo").glob("*.yml"))


def config_path(spec: str) -> Path:
    """The file of CONFIG: a YAML file, or a name from configs/ (`cartpole`, `zoo/Pendulum-v1`)."""
    if spec.endswith((".yaml", ".yml")) or Path(spec).is_file():
        return Path(spec)
    for path in (CONFIG_DIR / f"{spec}.yaml", CONFIG_DIR / f"{spec}.yml"):
        if "." not in spec and path.is_file():
            return path
    raise ValueError(f"CONFIG: expected a YAML file or one of {bundled_names()}, got {printable(spec)!r}")


def zoo_entry_of(spec: Any, env: str | None, search: bool = False) -> Any:
    """The RL-Zoo entry (`kppo.config.zoo.ZooEntry`) when CONFIG is an RL-Zoo hyperparameter file (env id ->
    settings), else None; `--env` given for any other CONFIG is refused. The entry evaluates as rl-zoo3's train.py
    does, or as its search does with `search`."""
    from kppo.config.zoo import SEARCH_EVALUATION_STEPS, TRAIN_EVALUATION_STEPS, is_zoo_file, read_entry
    from kppo.tuning.zoo import is_atari

    path = config_path(spec) if isinstance(spec, str) else None
    if path is not None and path.is_file() and is_zoo_file(path):  # else reading it as a config says what is wrong
        return read_entry(path, env, is_atari, SEARCH_EVALUATION_STEPS if search else TRAIN_EVALUATION_STEPS)
    if env is not None:
        raise ValueError(f"--env: only an RL-Zoo file's entry is chosen so; use --set env={env!r} instead")
    return None


def write_zoo_record(path: Path, spec: str, entry: Any) -> None:
    """zoo.yaml of a run trained from an RL-Zoo entry: the file, the entry's key, the env id and the entry as
    written (the run's config.yaml holds what it became)."""
    record = {
        "file": str(config_path(spec).resolve()),
        "entry": entry.key,
        "env": entry.env,
        "settings": entry.settings,
    }
    path.write_text(yaml.safe_dump(record, sort_keys=False))


def load_config(spec: Any, overrides: list[str], seed: int | None, env: str | None = None, search: bool = False):
    """CONFIG (None: the default example; a YAML file; a name from configs/; an RL-Zoo file, its entry `env`; or a
    Config) with --set and --seed; a gymnasium env id is checked to be registered. An RL-Zoo entry evaluates as
    rl-zoo3's train.py does, or as its search does with `search`."""
    from kppo.config.options import Config
    from kppo.config.values import coerce
    from kppo.tuning.zoo import whole_rollouts, zoo_config

    zoo = zoo_entry_of(spec, env, search)
    if isinstance(spec, Config):
        config = spec
    elif spec is None:
        config = Config(verbose=0)
    elif zoo is not None:
        config = zoo_config(zoo)  # the file read once
    else:
        config = Config.from_yaml(config_path(spec))
    changes: dict[str, Any] = {}
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--set: expected name=value, got {item!r}")
        changes[key.strip()] = parse_value(f"--set {printable(key)}", value)
    if seed is not None:
        changes["seed"] = seed
    budget = [changes.pop(name) for name in ("n_timesteps", "total_timesteps") if zoo is not None and name in changes]
    config = config.replace(**changes) if changes else config
    if budget:  # `--set n_timesteps=N` on an RL-Zoo entry counts steps as the entry's own value does
        config = whole_rollouts(config, coerce("--set n_timesteps", "int", budget[-1]))
    if config.env_backend != "native":  # said now, not by the first trial or member that builds it
        gym_id(config.env, "env")
    return config


def gym_id(env_id: str, option: str) -> str:
    """The gymnasium id of a built-in task name or a registered id; a one-line error naming `option` otherwise."""
    import gymnasium as gym

    from kppo.envs import resolve_name

    try:
        return resolve_name(env_id)
    except ValueError:
        pass
    try:
        gym.spec(env_id)
    except (gym.error.Error, ImportError) as err:
        raise ValueError(
            f"{option}: expected a built-in task or a registered gymnasium id, got {env_id!r} ({printable(str(err))})"
        ) from None
    return env_id
