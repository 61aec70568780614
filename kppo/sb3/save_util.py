"""kppo's own save of an SB3-style model (the place of stable_baselines3/common/save_util.py): a zip of a kppo agent
directory (config.yaml, metadata.json, weights/; `kppo.agent.checkpoint`) whose metadata.json holds, in `extra.sb3`,
the constructor arguments the model is rebuilt from. Nothing is pickled. `BaseAlgorithm.save` / `load` call these;
Stable-Baselines3's own zips are read by `kppo.sb3.saves.from_sb3`. `open_path` is SB3's helper of the same name."""

from __future__ import annotations

import io
import tempfile
import warnings
from pathlib import Path
from typing import Any


from kppo.agent import checkpoint
from kppo.agent.archive import agent_dir, write_zip, zip_target
from kppo.sb3.arguments import jsonable_policy_kwargs, saved_extractor
from kppo.training.agents import load_agent, read_metadata

#: The constructor arguments a save holds (in metadata.json's `extra.sb3`, with `num_timesteps`).
SAVED_ARGUMENTS = (
    "policy",
    "policy_kwargs",
    "n_steps",
    "batch_size",
    "n_epochs",
    "gamma",
    "gae_lambda",
    "normalize_advantage",
    "ent_coef",
    "vf_coef",
    "max_grad_norm",
    "target_kl",
    "learning_rate",
    "clip_range",
    "clip_range_vf",
    "seed",
    "use_sde",
    "sde_sample_freq",
    "stats_window_size",
)

#: Attributes a save holds besides: absent from saves of earlier versions, and the constructor's default then.
OPTIONAL_ARGUMENTS = ("verbose", "tensorboard_log")

#: What `exclude` cannot leave out: the networks are rebuilt from them.
KEPT = ("policy", "policy_kwargs", "num_timesteps")


def _kept(arguments: dict[str, Any], exclude: Any, include: Any) -> dict[str, Any]:
    """SB3's `save(exclude=..., include=...)`: the arguments without the names `exclude` lists, unless `include`
    lists them too; the names it left out are recorded (`excluded`), so that a load gives them the constructor's
    defaults, as SB3's does. Names a save does not hold change nothing."""
    excluded = (set(_names(exclude, "exclude")) - set(_names(include, "include")) - set(KEPT)) & set(arguments)
    return {**{k: v for k, v in arguments.items() if k not in excluded}, "excluded": sorted(excluded)}


def _names(value: Any, field: str) -> list[str]:
    if value is None:
        return []
    names = [value] if isinstance(value, str) else list(value) if isinstance(value, (list, tuple, set)) else None
    if names is None or not all(isinstance(n, str) for n in names):
        raise TypeError(f"{field}: expected a list of attribute names, got {value!r}")
    return names


def save_model(model: Any, path: str | Path | Any, exclude: Any = None, include: Any = None) -> None:
    """Writes `model` (a kppo.PPO or a subclass: `BaseAlgorithm.save`) as a zip of its agent directory, with its
    arguments (`model._saved_hyperparameters()` and the common ones, less those `exclude` names: `_kept`) in
    metadata.json's `extra.sb3`: to `path.zip` (`path` itself when it ends in .zip) or into an open binary file."""
    if model.agent is None:
        raise ValueError("save: the model has no networks yet; construct it with an env first")
    arguments = {
        **model._saved_hyperparameters(),
        "policy": model.policy_class,
        "policy_kwargs": jsonable_policy_kwargs(model.policy_kwargs),
        "seed": model.seed,
        "stats_window_size": model.stats_window_size,
        "use_sde": model.use_sde,
        "sde_sample_freq": model.sde_sample_freq,
        "verbose": model.verbose,
        "tensorboard_log": model.tensorboard_log,
        "num_timesteps": model.num_timesteps,
    }
    arguments = _kept(arguments, exclude, include)
    obs_stats, return_stats = model.statistics()
    spaces = (model.observation_space, model.action_space)
    with tempfile.TemporaryDirectory(prefix="kppo-save-") as staging:
        folder = Path(staging) / "model"
        checkpoint.save(
            folder, model.config.to_yaml(), model.agent, obs_stats, return_stats, *spaces, {"sb3": arguments}
        )
        write_zip(folder, zip_target(path) if isinstance(path, (str, Path)) else path)


def saved_arguments(metadata: dict, source: str) -> dict:
    """The SB3 arguments a kppo.PPO save holds in metadata.json's `extra.sb3`; a one-line ValueError naming `source`
    when they are missing or not what `save` writes."""
    extra = metadata.get("extra")
    saved = extra.get("sb3") if isinstance(extra, dict) else None
    if not isinstance(saved, dict):
        raise ValueError(f"path: {source!r} was not saved by kppo.PPO (no SB3 arguments in metadata.json)")
    problem = _problem(saved)
    if problem is not None:
        raise ValueError(f"path: {source!r}: metadata.json: extra.sb3: expected kppo.PPO's arguments, got {problem}")
    return saved


def _problem(saved: dict) -> str | None:
    """What is wrong with a save's arguments (`saved_arguments`), or None."""
    excluded = saved.get("excluded", [])
    if not isinstance(excluded, list) or not all(isinstance(name, str) and name not in KEPT for name in excluded):
        return f"excluded {excluded!r}"
    missing = [key for key in SAVED_ARGUMENTS if key not in saved and key not in excluded]
    if missing:
        return f"no {', '.join(missing)}"
    if not isinstance(saved["policy_kwargs"], dict):
        return f"policy_kwargs {saved['policy_kwargs']!r}"
    verbose, log = saved.get("verbose", 0), saved.get("tensorboard_log")
    if isinstance(verbose, bool) or not isinstance(verbose, int):
        return f"verbose {verbose!r}"
    if log is not None and not isinstance(log, str):
        return f"tensorboard_log {log!r}"
    return None


def named(err: ValueError, message: str) -> ValueError:
    """`err`'s type with `message` (a ValueError where the type takes other arguments)."""
    try:
        return type(err)(message)
    except TypeError:
        return ValueError(message)


def load_model(
    cls: type, path: str | Path | Any, env: Any, device: str, custom_objects: dict, kwargs: dict[str, Any]
) -> Any:
    """A `cls` (kppo.PPO or a subclass) of a save `save_model` wrote (a zip, an open binary file or an agent
    directory) with `custom_objects` (SB3's: in place of the saved values of the same names; other names are not
    set) and `kwargs` over its arguments; `env` as `PPO.load`'s. An argument the save excluded is the constructor's
    default. kppo's one-line refusals of the saved values name the save."""
    source = path if isinstance(path, (str, Path)) else "the file object"
    path = agent_dir(path)
    _, metadata, _, _ = read_metadata(path)
    saved = saved_arguments(metadata, str(source))
    saved["policy_kwargs"] = saved_extractor(saved["policy_kwargs"], custom_objects)
    names = [k for k in (*SAVED_ARGUMENTS, *OPTIONAL_ARGUMENTS) if k not in ("policy", "policy_kwargs")]
    args = {k: saved[k] for k in names if k in saved}
    args.update({k: v for k, v in custom_objects.items() if k in names}, **kwargs)
    try:
        model = cls(saved["policy"], None, policy_kwargs=saved["policy_kwargs"], device=device, **args)
    except ValueError as err:  # kppo's one-line refusals (ArgumentError, ...): name the save they came from
        raise named(err, f"{str(source)!r}: metadata.json: extra.sb3: {err}") from None
    loaded = load_agent(path, model._user_extractor_factory)
    spaces = (loaded.observation_space, loaded.action_space)
    stats = (loaded.obs_stats, loaded.return_stats)
    model._set_networks(loaded.config, loaded.agent, spaces, stats, int(saved.get("num_timesteps", 0)), env)
    return model


#: `open_path`'s modes and their one-letter forms (SB3's)
_MODES = {"w": "w", "write": "w", "r": "r", "read": "r"}


def open_path(
    path: str | Path | io.BufferedIOBase, mode: str, verbose: int = 0, suffix: str | None = None
) -> io.BufferedIOBase:
    """SB3's `save_util.open_path`: a binary file object for `path`, opened for `mode` ("w" or "write", "r" or
    "read"), for code written against SB3's helper.

    An open binary stream is checked (open, and writable or readable as `mode` asks) and returned as it is. A str or
    Path is opened in binary mode: to write, `suffix` is appended to a path without one, a missing parent folder is
    created and a folder in the way is written beside as `<path>_2` (each with a warning), and an existing file is
    overwritten (a warning when `verbose >= 2`); to read, a missing path is tried again with `.suffix` (a warning
    when `verbose >= 2`).

    Raises:
        TypeError: `path` is none of those types.
        ValueError: an unknown mode, or a stream that is closed or cannot be written or read as `mode` asks.
    """
    if isinstance(path, (str, Path)):
        return _open_file(Path(path), _mode(mode), verbose, suffix)
    if not isinstance(path, io.BufferedIOBase):
        raise TypeError(
            f"path: expected a str, a pathlib.Path or an open binary file (io.BufferedIOBase), "
            f"got {type(path).__name__}"
        )
    if path.closed:
        raise ValueError("path: expected an open file, got a closed one")
    mode = _mode(mode)
    if not (path.writable() if mode == "w" else path.readable()):
        raise ValueError(f"path: expected a {'writable' if mode == 'w' else 'readable'} file for mode {mode!r}")
    return path


def _mode(mode: Any) -> str:
    if not isinstance(mode, str) or mode.lower() not in _MODES:
        raise ValueError(f"mode: expected 'w', 'write', 'r' or 'read', got {mode!r}")
    return _MODES[mode.lower()]


def _open_file(path: Path, mode: str, verbose: int, suffix: str | None) -> io.BufferedIOBase:
    if mode == "r":
        if suffix and not path.exists():
            fallback = Path(f"{path}.{suffix}")
            if verbose >= 2:
                warnings.warn(f"{path}: not found, reading {fallback}", stacklevel=3)
            path = fallback
        return path.open("rb")
    if suffix and not path.suffix:
        path = Path(f"{path}.{suffix}")
    if path.is_dir():
        warnings.warn(f"{path}: is a folder, writing {path}_2 instead", stacklevel=3)
        path = Path(f"{path}_2")
    if not path.parent.exists():
        warnings.warn(f"{path.parent}: does not exist, creating it", stacklevel=3)
        path.parent.mkdir(parents=True)
    elif path.is_file() and verbose >= 2:
        warnings.warn(f"{path}: exists, overwriting it", stacklevel=3)
    return path.open("wb")
