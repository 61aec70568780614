"""CONFIG and `--set NAME=VALUE` into a Config: the tuned configs of configs/, YAML values read as config files are,
env ids checked before anything is built; the config fields' help for `kppo train --help`."""

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


def load_config(spec: Any, overrides: list[str], seed: int | None):
    """CONFIG (None: the default example; a YAML file; a name from configs/; or a Config) with --set and --seed; a
    gymnasium env id is checked to be registered."""
    from kppo.config.options import Config

    if isinstance(spec, Config):
        config = spec
    elif spec is None:
        config = Config(verbose=0)
    elif spec.endswith((".yaml", ".yml")) or Path(spec).is_file():
        config = Config.from_yaml(Path(spec))
    else:
        path = CONFIG_DIR / f"{spec}.yaml"
        if not path.is_file():
            names = sorted(p.stem for p in CONFIG_DIR.glob("*.yaml"))
            raise ValueError(f"CONFIG: expected a YAML file or one of {names}, got {spec!r}")
        config = Config.from_yaml(path)
    changes: dict[str, Any] = {}
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--set: expected name=value, got {item!r}")
        changes[key.strip()] = parse_value(f"--set {printable(key)}", value)
    if seed is not None:
        changes["seed"] = seed
    config = config.replace(**changes) if changes else config
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
