"""torch's zip serialization (`torch.save` since torch 1.6; what SB3 writes as `policy.pth`) read without torch: a
state_dict of tensors as numpy arrays.

The file is a zip holding `<prefix>/data.pkl`, the pickled object, whose tensors are
`torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks)` over storages named by
persistent ids `('storage', torch.<Type>Storage, key, location, numel)`; each storage's bytes are the member
`<prefix>/data/<key>` (little-endian: `<prefix>/byteorder`), each stored uncompressed (a compressed member is
refused: no member inflates past the file). `read_state_dict` interprets `data.pkl` with
`kppo.sb3.saves.safe_pickle`, accepting only that: an (Ordered)dict from str to tensors rebuilt over typed storages. Any
other name (a torch.nn.Module, a Parameter, a function), a storage outside the file, a tensor outside its storage, a
dtype numpy has not, and any other object is refused in one line that names the file.
"""

from __future__ import annotations

import io
import zipfile
import zlib
from typing import Any

import numpy as np

from kppo.sb3.saves.safe_pickle import ORDERED_DICT, Builder, Global, PickleRefused, describe, read_pickle

#: torch's typed storages -> numpy dtypes (bfloat16 is widened to float32: numpy has no bfloat16).
STORAGE_DTYPES = {
    "FloatStorage": np.float32,
    "DoubleStorage": np.float64,
    "HalfStorage": np.float16,
    "BFloat16Storage": np.uint16,
    "LongStorage": np.int64,
    "IntStorage": np.int32,
    "ShortStorage": np.int16,
    "CharStorage": np.int8,
    "ByteStorage": np.uint8,
    "BoolStorage": np.bool_,
}


class _Storage:
    """One storage's elements (a flat numpy array) and its torch type name."""

    def __init__(self, elements: np.ndarray, kind: str):
        self.elements, self.kind = elements, kind


def _rebuild_tensor(source: str):
    def rebuild(args: tuple) -> np.ndarray:
        if len(args) not in (6, 7):
            raise ValueError(f"{len(args)} arguments (torch's _rebuild_tensor_v2 takes 6 or 7)")
        storage, offset, size, stride, _requires_grad, hooks = args[:6]
        if not isinstance(storage, _Storage):
            raise ValueError(f"a tensor over {describe(storage)}, not a storage")
        if hooks:
            raise ValueError("a tensor with backward hooks")
        size, stride = tuple(int(n) for n in size), tuple(int(n) for n in stride)
        if len(size) != len(stride) or min(stride, default=0) < 0 or min(size, default=0) < 0:
            raise ValueError(f"size {size} with stride {stride}")
        elements = storage.elements
        last = int(offset) + sum((n - 1) * s for n, s in zip(size, stride)) if all(size) else int(offset) - 1
        if int(offset) < 0 or last >= len(elements):
            raise ValueError(f"a tensor of size {size} outside its storage of {len(elements)} elements")
        itemsize = elements.dtype.itemsize
        view = np.lib.stride_tricks.as_strided(
            elements[int(offset) :], size, tuple(s * itemsize for s in stride), writeable=False
        )
        out = np.array(view)
        if storage.kind == "BFloat16Storage":
            out = (out.astype(np.uint32) << 16).view(np.float32)
        return out

    del source
    return rebuild


def _members(data: bytes, source: str) -> tuple[zipfile.ZipFile, str]:
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        names = archive.namelist()
    except (
        zipfile.BadZipFile,
        OSError,
        ValueError,
        EOFError,
        RuntimeError,
    ):  # RuntimeError: a zip version zipfile lacks
        raise ValueError(
            f"{source}: expected torch's zip serialization (torch.save), got a file that is not a zip (torch's "
            f"legacy format is not read)"
        ) from None
    pickles = [n for n in names if n.endswith("/data.pkl") and n.count("/") == 1]
    if len(pickles) != 1:
        raise ValueError(f"{source}: expected one <name>/data.pkl in torch's zip, got {len(pickles)}")
    return archive, pickles[0][: -len("data.pkl")]


def _read(archive: zipfile.ZipFile, name: str, source: str) -> bytes:
    """A member's bytes; torch writes them stored (uncompressed), so reading one never yields more bytes than the
    file holds: a compressed member (a decompression bomb, whatever its header says) is refused unread."""
    try:
        info = archive.getinfo(name)
    except KeyError:
        raise ValueError(f"{source}: holds no {name}, which its data.pkl names") from None
    if info.compress_type != zipfile.ZIP_STORED or info.flag_bits & 0x1:
        raise ValueError(f"{source}: holds {name} compressed or encrypted; torch.save writes its members stored")
    try:
        return archive.read(info)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError, RuntimeError, zlib.error) as err:  # a CRC error, ...
        raise ValueError(f"{source}: {name} cannot be read ({_first_line(err)})") from None


def _first_line(err: BaseException) -> str:
    lines = str(err).strip().splitlines()
    return lines[0] if lines else type(err).__name__


def read_state_dict(data: bytes, source: str) -> dict[str, np.ndarray]:
    """{name: array} of the state_dict that torch.save wrote into `data` (the bytes of a `.pth` file); `source`
    names the file in errors. Raises ValueError (`PickleRefused` for the pickle) in one line."""
    archive, prefix = _members(data, source)
    with archive:
        if prefix + "byteorder" in archive.namelist():
            order = _read(archive, prefix + "byteorder", source).decode("ascii", "replace").strip()
            if order != "little":
                raise ValueError(f"{source}: expected little-endian storages, got byteorder {order!r}")
        storages: dict[str, _Storage] = {}

        def persistent_load(pid: Any) -> _Storage:
            if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage" and isinstance(pid[1], Global)):
                raise PickleRefused(f"{source}: holds the persistent id {describe(pid)}, not a tensor storage")
            _, kind, key, _location, numel = pid
            if kind.module != "torch" or kind.name not in STORAGE_DTYPES or not isinstance(key, str):
                raise PickleRefused(f"{source}: holds a storage of {kind}, which kppo does not read")
            if key not in storages:
                raw = _read(archive, f"{prefix}data/{key}", source)
                dtype = np.dtype(STORAGE_DTYPES[kind.name])
                if len(raw) < int(numel) * dtype.itemsize:
                    raise ValueError(f"{source}: storage {key} holds {len(raw)} bytes, expected {numel} x {dtype}")
                storages[key] = _Storage(np.frombuffer(raw[: int(numel) * dtype.itemsize], dtype), kind.name)
            return storages[key]

        names: dict[tuple[str, str], Builder | None] = {
            **ORDERED_DICT,
            ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor(source),
            **{("torch", kind): None for kind in STORAGE_DTYPES},
        }
        state = read_pickle(_read(archive, prefix + "data.pkl", source), source, names, persistent_load)
    if not isinstance(state, dict) or not all(
        isinstance(k, str) and isinstance(v, np.ndarray) for k, v in state.items()
    ):
        raise ValueError(f"{source}: expected a state_dict (names -> tensors), got {describe(state)}")
    return state
