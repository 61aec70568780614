"""What the kit checks before LiteRT sees a file, and before an artifact sees an observation: the metadata file (JSON,
the fields the kit reads, their types), the model file (a TFLite flatbuffer, the SHA-256 the metadata records) and
observations (numbers, finite, integers where the space holds integers). Every refusal is one `ValueError` line
naming the file, field or observation, what was expected and what was received (`kppo_runtime.errors.fail` prints
it for the command lines).

A damaged model is refused here rather than by LiteRT: LiteRT verifies the flatbuffer's structure, but a flipped bit
in a weight or a tensor's constant loads and runs and acts differently, and its own messages (several lines, "Node
number 3 (FULLY_CONNECTED) failed to prepare") name neither the file nor the cause. Artifacts exported before the
metadata recorded `sha256` are checked by their structure only.
"""

from __future__ import annotations

import hashlib
import json
import math
import reprlib
from pathlib import Path
from typing import Any

import numpy as np

TFLITE_IDENTIFIER = b"TFL3"  # a TFLite flatbuffer's file identifier, bytes 4-8
#: The keys each space description holds (kppo's `space_to_dict`).
SPACE_KEYS = {
    "Box": ("shape", "dtype", "low", "high"),
    "Discrete": ("n", "start"),
    "MultiDiscrete": ("nvec", "start"),
    "MultiBinary": ("n",),
    "Dict": ("spaces",),
}
INTEGER_SPACES = ("Discrete", "MultiDiscrete", "MultiBinary")
LAYOUTS = ("HWC", "CHW")


def brief(value: Any) -> str:
    """A received value for a one-line message: its type and a short repr, whitespace collapsed."""
    return f"{type(value).__name__} {' '.join(reprlib.repr(value).split())}"


def line(error: BaseException) -> str:
    """An exception's message on one line."""
    return " ".join(str(error).split()) or type(error).__name__


# ---------------------------------------------------------------------------------------------------------------
# The metadata file
# ---------------------------------------------------------------------------------------------------------------


def read_json(path: Path) -> Any:
    """The JSON value in `path`; one-line errors naming the file (missing, not UTF-8, not JSON, nested too deeply)."""
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise ValueError(f"{path.name}: expected the artifact's metadata file at {path}, found none") from None
    except UnicodeDecodeError as error:
        raise ValueError(
            f"{path.name}: expected UTF-8 JSON, got the byte 0x{error.object[error.start]:02x} at position "
            f"{error.start}"
        ) from None
    try:
        return json.loads(text)
    except ValueError as error:  # json.JSONDecodeError, and an integer of more digits than Python converts
        raise ValueError(f"{path.name}: expected JSON, got {line(error)}") from None
    except RecursionError:
        raise ValueError(f"{path.name}: expected an artifact's metadata, got JSON nested too deeply") from None


def _integers(value: Any, where: str, minimum: int | None, nested: bool = True) -> list[int]:
    """An integer or a (nested) list of integers -> the integers, flat; one-line errors."""
    items = list(value) if isinstance(value, list) else [value]
    flat: list[Any] = []
    while items:
        item = items.pop(0)
        if nested and isinstance(item, list):
            items = [*item, *items]
        else:
            flat.append(item)
    ok = all(isinstance(v, int) and not isinstance(v, bool) and (minimum is None or v >= minimum) for v in flat)
    if not ok:
        bound = "" if minimum is None else f" >= {minimum}"
        raise ValueError(f"{where}: expected integers{bound}, got {brief(value)}")
    return flat


def _numbers(value: Any, where: str, size: int) -> None:
    """A number or a (nested) list of `size` numbers (JSON's Infinity and NaN included); one-line errors."""
    try:
        array = np.asarray(value, dtype=np.float64)
    except (ValueError, TypeError, OverflowError):
        raise ValueError(f"{where}: expected numbers, got {brief(value)}") from None
    if array.size not in (1, size):
        raise ValueError(f"{where}: expected 1 or {size} numbers, got {array.size}")


def _dtype(value: Any, where: str) -> np.dtype:
    """A numeric numpy dtype name (bool, integer or float); one-line errors."""
    try:
        dtype = np.dtype(value) if isinstance(value, str) else None
    except TypeError:
        dtype = None
    if dtype is None or dtype.kind not in "biuf":
        raise ValueError(f"{where}: expected a numeric dtype name (e.g. 'float32', 'uint8'), got {brief(value)}")
    return dtype


def space_width(space: Any, where: str) -> int:
    """The number of values one observation of `space` (a space description of the metadata) flattens to; one-line
    errors naming `where` for anything the kit could not read."""
    kind = space.get("type") if isinstance(space, dict) else None
    if not isinstance(kind, str) or kind not in SPACE_KEYS:
        raise ValueError(
            f"{where}: expected a space: a JSON object with 'type' one of {list(SPACE_KEYS)}, got {brief(space)}"
        )
    missing = [key for key in SPACE_KEYS[kind] if key not in space]
    if missing:
        raise ValueError(f"{where}: expected the keys {list(SPACE_KEYS[kind])} of a {kind} space, missing {missing}")
    if kind == "Dict":
        spaces = space["spaces"]
        if not isinstance(spaces, dict) or not spaces:
            raise ValueError(f"{where}.spaces: expected a non-empty JSON object of spaces, got {brief(spaces)}")
        return sum(space_width(sub, f"{where}.spaces[{key!r}]") for key, sub in spaces.items())
    if kind == "Box":
        if not isinstance(space["shape"], list):
            raise ValueError(f"{where}.shape: expected a list of integers >= 0, got {brief(space['shape'])}")
        size = math.prod(_integers(space["shape"], f"{where}.shape", 0, nested=False))
        _dtype(space["dtype"], f"{where}.dtype")
        for bound in ("low", "high"):
            _numbers(space[bound], f"{where}.{bound}", size)
        return size
    if kind == "Discrete":
        _integers(space["n"], f"{where}.n", 1, nested=False)
        _integers(space["start"], f"{where}.start", None, nested=False)
        return 1
    if kind == "MultiDiscrete":
        width = len(_integers(space["nvec"], f"{where}.nvec", 1))
        starts = _integers(space["start"], f"{where}.start", None)
        if len(starts) not in (1, width):
            raise ValueError(f"{where}.start: expected 1 or {width} integers (one per nvec entry), got {len(starts)}")
        return width
    return math.prod(_integers(space["n"], f"{where}.n", 1))


def _check_inputs(entries: Any, name: str) -> None:
    """The metadata's `inputs`: a list of {name, key, shape, dtype[, layout]}; one-line errors."""
    if not isinstance(entries, list):
        raise ValueError(f"{name}: inputs: expected a list of input descriptions, got {brief(entries)}")
    for i, entry in enumerate(entries):
        where = f"{name}: inputs[{i}]"
        if not isinstance(entry, dict) or not all(k in entry for k in ("name", "key", "shape", "dtype")):
            raise ValueError(f"{where}: expected a JSON object with name, key, shape and dtype, got {brief(entry)}")
        if not isinstance(entry["name"], str) or not (entry["key"] is None or isinstance(entry["key"], str)):
            raise ValueError(f"{where}: expected a string name and a string or null key, got {brief(entry)}")
        shape = entry["shape"]
        if not isinstance(shape, list) or not shape:
            raise ValueError(f"{where}.shape: expected a list [batch, ...] of integers, got {brief(shape)}")
        _integers([1 if shape[0] is None else shape[0], *shape[1:]], f"{where}.shape", 0, nested=False)
        _dtype(entry["dtype"], f"{where}.dtype")
        if "layout" in entry and entry["layout"] not in LAYOUTS:
            raise ValueError(f"{where}.layout: expected one of {list(LAYOUTS)}, got {brief(entry['layout'])}")


def check_metadata(metadata: Any, name: str) -> None:
    """Raises a one-line ValueError naming the file `name` unless `metadata` holds, with the types the kit reads,
    the observation and action spaces, and (when present) `inputs`, `input` and `sha256`."""
    if not isinstance(metadata, dict):
        raise ValueError(f"{name}: expected a JSON object (an artifact's metadata), got {brief(metadata)}")
    for key in ("observation_space", "action_space"):
        if key not in metadata:
            raise ValueError(f"{name}: expected the key {key!r} of an artifact's metadata, got keys {sorted(metadata)}")
    space_width(metadata["observation_space"], f"{name}: observation_space")
    action = metadata["action_space"]
    space_width(action, f"{name}: action_space")
    if action["type"] == "Dict":
        raise ValueError(f"{name}: action_space: expected a Box, Discrete, MultiDiscrete or MultiBinary, got a Dict")
    if "inputs" in metadata:
        _check_inputs(metadata["inputs"], name)
    single = metadata.get("input", {})
    if not isinstance(single, dict) or single.get("layout", "HWC") not in LAYOUTS:
        raise ValueError(f"{name}: input: expected a JSON object (layout one of {list(LAYOUTS)}), got {brief(single)}")
    digest = metadata.get("sha256")
    hexadecimal = isinstance(digest, str) and len(digest) == 64 and set(digest) <= set("0123456789abcdef")
    if digest is not None and not hexadecimal:
        raise ValueError(f"{name}: sha256: expected 64 lowercase hexadecimal digits, got {brief(digest)}")


def load_metadata(artifact: str | Path, metadata: str | Path | None = None) -> dict:
    """The artifact's metadata: `metadata`, or `<artifact>.metadata.json` beside it, checked (`check_metadata`)."""
    artifact = Path(artifact)
    path = Path(metadata or artifact.with_name(artifact.name + ".metadata.json"))
    value = read_json(path)
    check_metadata(value, path.name)
    return value


# ---------------------------------------------------------------------------------------------------------------
# The model file
# ---------------------------------------------------------------------------------------------------------------


def read_model(artifact: str | Path) -> bytes:
    """The bytes of a .tflite file, a TFLite flatbuffer (its file identifier); one-line errors naming the file."""
    artifact = Path(artifact)
    try:
        model = artifact.read_bytes()
    except FileNotFoundError:
        raise ValueError(f"{artifact.name}: expected a .tflite file at {artifact}, found none") from None
    if len(model) < 8 or model[4:8] != TFLITE_IDENTIFIER:
        raise ValueError(
            f"{artifact.name}: expected a TFLite flatbuffer (file identifier {TFLITE_IDENTIFIER.decode()} at bytes "
            f"4-8), got {len(model)} bytes starting {model[:8]!r}"
        )
    return model


def check_digest(model: bytes, name: str, metadata: dict) -> None:
    """Raises a one-line ValueError unless the SHA-256 of `model` is the metadata's `sha256` (when it records one)."""
    digest, got = metadata.get("sha256"), hashlib.sha256(model).hexdigest()
    if digest is not None and got != digest:
        raise ValueError(
            f"{name}: expected the file its metadata describes (sha256 {digest[:12]}...), got sha256 {got[:12]}... "
            "(a damaged file, or the metadata of another artifact)"
        )


# ---------------------------------------------------------------------------------------------------------------
# Observations
# ---------------------------------------------------------------------------------------------------------------


def numbers(value: Any, where: str = "obs") -> np.ndarray:
    """`value` as a numpy array of bool, integer or float numbers; a one-line ValueError naming `where` for anything
    else (strings, None, objects, complex numbers, lists numpy cannot stack)."""
    try:
        array = np.asarray(value)
    except (ValueError, TypeError) as error:  # ragged lists, objects whose __array__ fails
        raise ValueError(f"{where}: expected an array of numbers, got {brief(value)} ({line(error)})") from None
    if array.dtype.kind not in "biuf":
        raise ValueError(f"{where}: expected numbers (bool, integer or float), got dtype {array.dtype}")
    return array


def finite(values: np.ndarray, where: str = "obs") -> np.ndarray:
    """`values` unchanged; a one-line ValueError when one is NaN or infinite (a device's broken sensor: the artifact
    would act on it without a sign)."""
    if values.dtype.kind == "f" and not np.isfinite(values).all():
        position = int(np.flatnonzero(~np.isfinite(values.reshape(-1)))[0])
        raise ValueError(f"{where}: expected finite values, got {values.reshape(-1)[position]} at position {position}")
    return values


def as_input(values: np.ndarray, dtype: np.dtype, where: str = "obs") -> np.ndarray:
    """An input row's values as the artifact's input dtype: float32 finite (a value beyond float32's range would
    reach the artifact as infinite), or integers that dtype holds; one-line errors naming `where`."""
    if dtype.kind == "f":
        with np.errstate(over="ignore", invalid="ignore"):
            return finite(values.astype(dtype), where)
    wide = finite(values.astype(np.float64), where)
    info = np.iinfo(dtype)
    if wide.size and (wide.min() < info.min or wide.max() > info.max or not np.array_equal(wide, np.round(wide))):
        raise ValueError(f"{where}: expected integers of {dtype} (the artifact's input), got {brief(values)}")
    return values.astype(dtype)


def integers_of(space: dict, values: np.ndarray, where: str = "obs") -> np.ndarray:
    """The values of an observation of a Discrete / MultiDiscrete / MultiBinary space as int64 [width]; one-line
    errors for values that are not integers of the space (the artifact one-hot encodes them: an integer out of
    range would encode as all zeros and act without a sign)."""
    flat = finite(values.reshape(-1), where)
    if not np.array_equal(flat, np.round(flat)):
        raise ValueError(f"{where}: expected integers for a {space['type']} space, got {brief(values)}")
    kind = space["type"]
    if kind == "MultiBinary":
        low, high = np.zeros(flat.shape), np.ones(flat.shape)
    elif kind == "Discrete":
        low = np.full(flat.shape, space["start"])
        high = low + space["n"] - 1
    else:
        nvec = np.asarray(space["nvec"]).reshape(-1)
        if flat.shape != nvec.shape:
            return flat.astype(np.int64)  # the caller reports the count
        low = np.broadcast_to(np.asarray(space["start"]).reshape(-1), nvec.shape)
        high = low + nvec - 1
    if flat.shape == low.shape and ((flat < low) | (flat > high)).any():
        raise ValueError(
            f"{where}: expected integers in [{low.min()}, {high.max()}] for a {kind} space, got {brief(values)}"
        )
    return flat.astype(np.int64)
