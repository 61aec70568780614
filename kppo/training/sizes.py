"""The sizes a Config asks memory for: its networks' layer widths (`network_widths`), checked against a run's
checkpoints before anything is built (`check_widths`), and an allocation that does not fit said in one line naming
those sizes (`fits_in_memory`)."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from pathlib import Path

from kppo._tf import tf
from kppo.config.options import Config
from kppo.core.errors import OutOfMemoryError, reason


def network_widths(config: Config) -> list[tuple[str, int]]:
    """(field, value) of each layer width `config` gives its networks: hidden layers, the LSTM, a CNN's features."""
    widths = [(f, w) for f in ("actor_hidden_units", "critic_hidden_units") for w in getattr(config, f) or ()]
    if config.num_hidden_layers and not (config.actor_hidden_units and config.critic_hidden_units):
        widths.append(("num_hidden_units", config.num_hidden_units))
    if config.recurrent:
        widths.append(("lstm_hidden_size", config.lstm_hidden_size))
    if config.features_extractor != "flatten" and config.features_dim is not None:
        widths.append(("features_dim", config.features_dim))
    return widths


def check_widths(config: Config, checkpoint_dir: Path, config_path: Path) -> None:
    """A one-line ValueError when a layer width of `config` is no dimension of any variable in the readable
    checkpoints of `checkpoint_dir` (read from their index files, nothing built): a config.yaml that does not
    describe these checkpoints is refused before its networks are allocated (2**20 units would take terabytes)."""
    dims: set[int] = set()
    for index in sorted(checkpoint_dir.glob("ckpt-*.index")):
        try:
            dims.update(d for _, shape in tf.train.list_variables(str(index.with_suffix(""))) for d in shape)
        except (tf.errors.OpError, ValueError):
            continue  # an unreadable checkpoint is `resume.restore_newest`'s to report
    missing = [(field, width) for field, width in network_widths(config) if width not in dims]
    if dims and missing:
        field, width = missing[0]
        raise ValueError(
            f"{config_path}: expected the networks of the checkpoints in {str(checkpoint_dir)!r}, got {field}="
            f"{width}, a width none of their variables has"
        )


@contextlib.contextmanager
def fits_in_memory(configs: list[Config]) -> Iterator[None]:
    """TensorFlow's ResourceExhaustedError (a network or a rollout buffer larger than the device's memory) as a
    one-line `OutOfMemoryError` naming the sizes the config asked for."""
    try:
        yield
    except tf.errors.ResourceExhaustedError as err:
        config = configs[0]
        sizes = [("num_envs", config.num_envs), ("num_steps", config.num_steps), *network_widths(config)]
        members = f" x {len(configs)} members" if len(configs) > 1 else ""
        raise OutOfMemoryError(
            f"config: expected sizes that fit in memory, got {', '.join(f'{k}={v}' for k, v in sizes)}{members} "
            f"(TensorFlow: {_allocation(err)})"
        ) from None


def _allocation(err: BaseException) -> str:
    """TensorFlow's words for the allocation that failed ("OOM when allocating tensor with shape[...] and type
    float"), without its node and device names."""
    found = re.search(r"OOM when allocating tensor with shape\[[^\]]*\](?: and type \w+)?", str(err))
    return found.group(0) if found else reason(err)
