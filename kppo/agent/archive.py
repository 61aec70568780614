"""Saved agents as zip files, as Stable-Baselines3 users save models: the zip holds the agent directory's files
(`config.yaml`, `metadata.json`, `weights/`: YAML, JSON and a TensorFlow checkpoint; never a pickle).

`write_zip` packs a directory into a path or an open binary file; `agent_dir` gives the directory to read for a
directory, a zip file, an open binary file, or a name that SB3 would have saved as `name.zip`. Zips are extracted
once per file version into a temporary directory removed at exit; members that would land outside it (absolute
paths, `..`) or are links are refused, and so is a zip that unpacks to more than `MAX_UNPACKED_BYTES` (a
decompression bomb): each member's declared size is checked before it is written and its bytes are counted while
they are (a header can lie). `read_member` reads one member into memory under the same bound (SB3's zips)."""

from __future__ import annotations

import io
import stat
import struct
import tempfile
import zipfile
import zlib
from pathlib import Path
from typing import IO

_EXTRACTED: dict[tuple[str, int, int], tempfile.TemporaryDirectory] = {}  # (zip path, mtime, size) -> its files
_SOURCES: dict[str, str] = {}  # extracted directory -> the zip it came from, as errors name it

#: The most bytes a zip kppo reads may unpack to, all members together: far above any agent (a NatureCNN agent with
#: Adam's moments is ~40 MB), far below what a decompression bomb inflates to.
MAX_UNPACKED_BYTES = 2 << 30
#: The most members a zip kppo reads may list (a kppo agent has 4, an SB3 save 5).
MAX_MEMBERS = 10_000
#: The compression methods zipfile decompresses in bounded steps (kppo and SB3 write deflated members, torch stored
#: ones; zipfile inflates a bzip2 or LZMA chunk whole, however large).
READABLE_METHODS = {zipfile.ZIP_STORED: "stored", zipfile.ZIP_DEFLATED: "deflated"}
#: What zipfile raises for a damaged zip or member: a bad header, CRC or name, a truncated member, a deflate stream
#: zlib cannot inflate, an encrypted member, a method or zip version it does not implement, a seek outside the file.
ZIP_ERRORS = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    zlib.error,
    EOFError,
    OSError,
    ValueError,
    RuntimeError,  # NotImplementedError too
    struct.error,
)
_CHUNK = 1 << 16


def zip_target(path: str | Path) -> Path:
    """SB3's naming: `path` itself when it ends in `.zip`, else `path.zip`."""
    path = Path(path)
    return path if path.suffix == ".zip" else path.with_name(path.name + ".zip")


def write_zip(directory: Path, target: str | Path | IO[bytes]) -> None:
    """Packs every file under `directory` into `target` (a path, written atomically, or an open binary file)."""
    if not isinstance(target, (str, Path)):
        _pack(directory, target)
        return
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.partial")
    try:
        with open(partial, "wb") as file:
            _pack(directory, file)
        partial.replace(target)
    finally:
        partial.unlink(missing_ok=True)


def _pack(directory: Path, file: IO[bytes]) -> None:
    with zipfile.ZipFile(file, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for member in sorted(p for p in directory.rglob("*") if p.is_file()):
            archive.write(member, member.relative_to(directory).as_posix())


def _is_link(info: zipfile.ZipInfo) -> bool:
    return stat.S_ISLNK(info.external_attr >> 16)


def _reason(err: BaseException) -> str:
    lines = str(err).strip().splitlines()
    return lines[0] if lines else type(err).__name__


def _check(info: zipfile.ZipInfo, name: str) -> None:
    """A one-line ValueError naming the zip (`name`) for a member kppo does not unpack: encrypted, compressed with a
    method zipfile cannot inflate in bounded steps, or declaring more than `MAX_UNPACKED_BYTES`."""
    if info.flag_bits & 0x1:
        raise ValueError(f"path: {name} holds {info.filename!r} encrypted; kppo reads unencrypted zips")
    if info.compress_type not in READABLE_METHODS:
        raise ValueError(
            f"path: {name} holds {info.filename!r} compressed with method {info.compress_type} (kppo reads "
            f"{' and '.join(READABLE_METHODS.values())} members)"
        )
    if info.file_size > MAX_UNPACKED_BYTES:
        raise ValueError(
            f"path: {name} holds {info.filename!r}, which unpacks to {info.file_size:,} bytes, more than the "
            f"{MAX_UNPACKED_BYTES:,} kppo reads (a decompression bomb?)"
        )


def checked_members(archive: zipfile.ZipFile, name: str) -> list[zipfile.ZipInfo]:
    """The zip's members once their count, methods and declared sizes (together at most `MAX_UNPACKED_BYTES`) are
    within kppo's bounds; else a one-line ValueError naming the zip (`name`) and the member."""
    infos = archive.infolist()
    if len(infos) > MAX_MEMBERS:
        raise ValueError(f"path: {name} lists {len(infos):,} members, more than the {MAX_MEMBERS:,} kppo reads")
    for info in infos:
        _check(info, name)
    total = sum(info.file_size for info in infos)
    if total > MAX_UNPACKED_BYTES:
        raise ValueError(
            f"path: {name} unpacks to {total:,} bytes, more than the {MAX_UNPACKED_BYTES:,} kppo reads (a "
            f"decompression bomb?)"
        )
    return infos


def _copy(archive: zipfile.ZipFile, info: zipfile.ZipInfo, out: IO[bytes]) -> None:
    """Copies a member in chunks, never more than its declared size (zipfile stops there and checks the CRC; a
    member that inflates further is a bad CRC, found after at most one chunk past the declared size)."""
    written = 0
    with archive.open(info) as member:
        while chunk := member.read(_CHUNK):
            written += len(chunk)
            if written > info.file_size:  # zipfile stops at the declared size; the bound does not rest on it
                raise zipfile.BadZipFile(f"{info.filename!r} inflates past its declared {info.file_size:,} bytes")
            out.write(chunk)


def read_member(archive: zipfile.ZipFile, member: str, name: str) -> bytes:
    """The bytes of `member` (KeyError when the zip lists none), read within `MAX_UNPACKED_BYTES` (see the module
    docstring); a member kppo does not unpack or a damaged one is a one-line ValueError naming the zip (`name`)."""
    info = archive.getinfo(member)
    _check(info, name)
    out = io.BytesIO()
    try:
        _copy(archive, info, out)
    except ZIP_ERRORS as err:
        raise ValueError(f"{name}: {member!r} cannot be read ({_reason(err)}); the zip is damaged") from None
    return out.getvalue()


def _extract(source: str | Path | IO[bytes], into: Path, name: str) -> None:
    """Extracts the zip's regular files into `into`; a member outside it, a link, a zip over kppo's bounds or a
    damaged one is a one-line ValueError naming the zip (`name`)."""
    try:
        archive = zipfile.ZipFile(source)
    except ZIP_ERRORS as err:
        raise ValueError(
            f"path: expected a kppo agent directory or zip file, got {name} (the file wasn't a zip-file: "
            f"{_reason(err)})"
        ) from None
    with archive:
        for info in checked_members(archive, name):
            if not info.filename:  # zipfile's `is_dir` fails on it
                raise ValueError(f"path: {name} holds a member without a name; not read")
            destination = (into / info.filename).resolve()
            if _is_link(info) or not destination.is_relative_to(into.resolve()):
                raise ValueError(f"path: {name} holds {info.filename!r}, outside a kppo agent's files; not read")
            if not info.is_dir():
                _unpack(archive, info, destination, name)


def _unpack(archive: zipfile.ZipFile, info: zipfile.ZipInfo, destination: Path, name: str) -> None:
    try:
        destination.parent.mkdir(parents=True, exist_ok=True)
        with open(destination, "wb") as out:
            _copy(archive, info, out)
    except ZIP_ERRORS as err:  # OSError included: a member named like a folder of another one
        raise ValueError(
            f"path: expected a kppo agent directory or zip file, got {name} ({info.filename!r} cannot be unpacked: "
            f"{_reason(err)})"
        ) from None


def file_bytes(file: IO[bytes]) -> bytes:
    """A file object's whole content, read from its start when it can seek (as SB3 reads a zip: `model.save(f)` then
    `PPO.load(f)` on one file object reads what was written, not what follows the position)."""
    if getattr(file, "seekable", lambda: False)():
        file.seek(0)
    return file.read()


def source_name(directory: str | Path) -> str:
    """How errors name a saved agent: the zip a directory was extracted from, or the directory itself (quoted)."""
    return _SOURCES.get(str(directory), repr(str(directory)))


def _unpacked(source: str | Path | IO[bytes], name: str) -> tempfile.TemporaryDirectory:
    folder = tempfile.TemporaryDirectory(prefix="kppo-agent-")
    try:
        _extract(source, Path(folder.name), name)
    except BaseException:
        folder.cleanup()  # a refused zip leaves nothing behind
        raise
    _SOURCES[folder.name] = name
    return folder


def agent_dir(path: str | Path | IO[bytes]) -> Path:
    """The directory holding a saved agent's files (see the module docstring); a path that names nothing is
    returned as it is (the reader's one-line error names it)."""
    if not isinstance(path, (str, Path)):
        data = file_bytes(path)
        folder = _unpacked(io.BytesIO(data), "the file object")
        _EXTRACTED[(f"<file {id(folder)}>", 0, len(data))] = folder
        return Path(folder.name)
    path = Path(path)
    if path.is_dir():
        return path
    if not path.exists() and zip_target(path).is_file():
        path = zip_target(path)
    if not path.is_file():
        return path
    status = path.stat()
    key = (str(path.resolve()), status.st_mtime_ns, status.st_size)
    if key not in _EXTRACTED:
        _EXTRACTED[key] = _unpacked(path, repr(str(path)))
    return Path(_EXTRACTED[key].name)
