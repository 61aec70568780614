"""Saved agents as zip files, as Stable-Baselines3 users save models: the zip holds the agent directory's files
(`config.yaml`, `metadata.json`, `weights/`: YAML, JSON and a TensorFlow checkpoint; never a pickle).

`write_zip` packs a directory into a path or an open binary file; `agent_dir` gives the directory to read for a
directory, a zip file, an open binary file, or a name that SB3 would have saved as `name.zip`. Zips are extracted
once per file version into a temporary directory removed at exit; members that would land outside it (absolute
paths, `..`) or are links are refused."""

from __future__ import annotations

import io
import shutil
import stat
import tempfile
import zipfile
from pathlib import Path
from typing import IO

_EXTRACTED: dict[tuple[str, int, int], tempfile.TemporaryDirectory] = {}  # (zip path, mtime, size) -> its files


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


def _extract(source: str | Path | IO[bytes], into: Path, name: str) -> None:
    """Extracts the zip's regular files into `into`; a member outside it or a link is a one-line ValueError."""
    try:
        with zipfile.ZipFile(source) as archive:
            for info in archive.infolist():
                destination = (into / info.filename).resolve()
                if _is_link(info) or not destination.is_relative_to(into.resolve()):
                    raise ValueError(f"path: {name} holds {info.filename!r}, outside a kppo agent's files; not read")
                if info.is_dir():
                    continue
                destination.parent.mkdir(parents=True, exist_ok=True)
                with archive.open(info) as member, open(destination, "wb") as out:
                    shutil.copyfileobj(member, out)
    except zipfile.BadZipFile:
        raise ValueError(f"path: expected a kppo agent directory or zip file, got {name} (not a zip file)") from None


def file_bytes(file: IO[bytes]) -> bytes:
    """A file object's whole content, read from its start when it can seek (as SB3 reads a zip: `model.save(f)` then
    `PPO.load(f)` on one file object reads what was written, not what follows the position)."""
    if getattr(file, "seekable", lambda: False)():
        file.seek(0)
    return file.read()


def agent_dir(path: str | Path | IO[bytes]) -> Path:
    """The directory holding a saved agent's files (see the module docstring); a path that names nothing is
    returned as it is (the reader's one-line error names it)."""
    if not isinstance(path, (str, Path)):
        data = file_bytes(path)
        folder = tempfile.TemporaryDirectory(prefix="kppo-agent-")
        _extract(io.BytesIO(data), Path(folder.name), "the file object")
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
        folder = tempfile.TemporaryDirectory(prefix="kppo-agent-")
        _extract(path, Path(folder.name), repr(str(path)))
        _EXTRACTED[key] = folder
    return Path(_EXTRACTED[key].name)
