"""Import TensorFlow once, without the CUDA/oneDNN start-up noise on CPU-only hosts.

TensorFlow's C++ runtime writes "Could not find cuda drivers", "oneDNN custom operations are on" and
absl pre-init warnings straight to file descriptor 2 while it loads, before `TF_CPP_MIN_LOG_LEVEL` is read
by absl. We capture fd 2 during the import and replay every line that is not one of those known notices,
so real import errors stay visible. Set `KPPO_TF_VERBOSE=1` to see everything.

A population's trace logs, per op that `tf.vectorized_map` cannot vectorize (TensorFlow's stateless random ops in a
task of your own, for example), that it runs the op as a loop over the members: expected, not a problem, so
TensorFlow's Python logger drops those lines too.

XLA's persistent compile cache is turned on here, before TensorFlow reads `TF_XLA_FLAGS`, so that a second process
running the same programs loads their executables instead of compiling them (`CompileCache`). Entries live in
`$XDG_CACHE_HOME/kppo/xla` (`~/.cache/kppo/xla` when unset), one folder per TensorFlow version and CPU; set
`KPPO_COMPILE_CACHE=off` to compile without it, or to a directory to keep it there, and `KPPO_COMPILE_CACHE_MB` to bound
its size (the oldest entries go first). A `TF_XLA_FLAGS` that names its own `--tf_xla_persistent_cache_directory` is
left as it is. A cache that cannot be used warns once and training compiles as without it.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import logging
import os
import platform
import shutil
import socket
import sys
import tempfile
import threading
import time
import warnings
from importlib import metadata
from pathlib import Path
from typing import Any, NamedTuple
from collections.abc import Iterator

_NOISE = (
    "All log messages before absl::InitializeLog()",
    "oneDNN custom operations are on",
    "Could not find cuda drivers",
    "failed call to cuInit",
    "Unable to register cuDNN factory",
    "Unable to register cuFFT factory",
    "Unable to register cuBLAS factory",
    "computation placer already registered",
    "TF-TRT Warning",
    "This TensorFlow binary is optimized to use available CPU instructions",
    "To enable the following instructions",
)


_PFOR_LOOP = "Using a while_loop for converting Stateless"

# What TensorFlow logs at ERROR level on every cache hit, though the entry loads: its reader tries the entry as a text
# proto before the binary one, and XLA:CPU compares the tuning features it compiled with (`+prefer-no-scatter`, ...)
# against the host's instruction sets.
_CACHE_NOISE = (
    "Error parsing text-format tensorflow.XlaSerializedCacheEntry",
    "Loading XLA:CPU AOT result. Target machine feature",
)


class _DropPforLoopNotices(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(_PFOR_LOOP)


def _is_noise(line: str) -> bool:
    return any(marker in line for marker in _NOISE + _CACHE_NOISE)


# --- the persistent compile cache -------------------------------------------------------------------------------

CACHE_VARIABLE = "KPPO_COMPILE_CACHE"
CACHE_SIZE_VARIABLE = "KPPO_COMPILE_CACHE_MB"
#: The cache's size bound when `KPPO_COMPILE_CACHE_MB` is unset, in MiB (an entry holds one program's HLO and
#: executable).
DEFAULT_CACHE_MB = 1024
_OFF = ("off", "0", "false", "no", "none")
_ENTRY_SUFFIX = ".pb"
_DIRECTORY_FLAG = "--tf_xla_persistent_cache_directory"
# The process folder kppo put in TF_XLA_FLAGS, so that a child process (which inherits both) makes its own.
_PROCESS_DIR_VARIABLE = "KPPO_COMPILE_CACHE_PROCESS_DIR"
_PROCESS_PREFIX = ".process-"
_STALE_S = 86400.0  # another host's process folder older than this is left over from a crash


class CompileCache(NamedTuple):
    """Where this process's XLA executables are cached.

    TensorFlow writes an entry straight to its final name, so a process reading it while another writes it would load
    a torn file and fail the compiled call. Each process therefore points TensorFlow at a folder of its own
    (`process_dir`) holding links to the shared entries (`store`), and moves the entries it wrote into the store when
    it exits, with one atomic rename each."""

    store: Path
    process_dir: Path
    bound_bytes: int


def _cache_store(environ) -> Path | None:
    """The folder of this TensorFlow version's and this CPU's entries, or None when the cache is off."""
    value = environ.get(CACHE_VARIABLE, "").strip()
    if value.lower() in _OFF and value:
        return None
    if value:
        root = Path(value).expanduser()
    else:
        root = Path(environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kppo"
    return root / "xla" / f"tf-{_tensorflow_version()}-{_cpu_fingerprint()}"


def _cache_bound(environ) -> int:
    value = environ.get(CACHE_SIZE_VARIABLE, "").strip()
    if not value:
        return DEFAULT_CACHE_MB << 20
    try:
        megabytes = float(value)
    except ValueError:
        megabytes = -1.0
    if not megabytes > 0:
        raise ValueError(f"{CACHE_SIZE_VARIABLE}: expected a positive number of MiB, got {value!r}")
    return int(megabytes * (1 << 20))


def _tensorflow_version() -> str:
    for distribution in ("tensorflow", "tensorflow-cpu", "tensorflow-macos", "tf-nightly"):
        try:
            return metadata.version(distribution)
        except metadata.PackageNotFoundError:
            continue
    return "unknown"


def _cpu_fingerprint() -> str:
    """A hash of the CPU model and instruction sets: an executable compiled for one CPU is not loaded on another."""
    text = platform.machine() + platform.processor()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as cpuinfo:
            lines = cpuinfo.read().split("\n\n", 1)[0].splitlines()
        text += "".join(line for line in lines if line.startswith(("model name", "flags", "Features", "CPU part")))
    except OSError:
        pass
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while at < len(data):
        byte = data[at]
        value, at, shift = value | (byte & 0x7F) << shift, at + 1, shift + 7
        if not byte & 0x80:
            return value, at
    raise ValueError("truncated varint")


def is_complete_entry(path: Path) -> bool:
    """Whether `path` is a whole serialized cache entry: its fields (key, HLO, executable; each length-delimited)
    end exactly at the end of the file. A torn or foreign file would fail the compiled call that loads it."""
    try:
        size, at, fields = path.stat().st_size, 0, set()
        with open(path, "rb") as entry:
            while at < size:
                entry.seek(at)
                head = entry.read(20)
                tag, at = _varint(head, 0)
                length, header = _varint(head, at)
                if tag & 7 != 2:
                    return False
                fields.add(tag >> 3)
                at = entry.tell() - len(head) + header + length
        return at == size and {1, 2, 3} <= fields
    except (OSError, ValueError):
        return False


def _entries(folder: Path) -> list[Path]:
    return [path for path in folder.glob("*" + _ENTRY_SUFFIX) if path.is_file() and not path.is_symlink()]


def prune(store: Path, bound_bytes: int) -> None:
    """Deletes the store's torn entries, then its oldest ones (by modification time) until the rest fit
    `bound_bytes`."""
    dated = []
    for path in _entries(store):
        try:
            if not is_complete_entry(path):
                path.unlink()
                continue
            stat = path.stat()
        except OSError:  # another process pruned it first
            continue
        dated.append((stat.st_mtime, stat.st_size, path))
    total = sum(size for _, size, _ in dated)
    for _, size, path in sorted(dated, key=lambda item: item[0]):
        if total <= bound_bytes:
            break
        try:
            path.unlink()
        except OSError:
            pass
        total -= size


def _remove_stale_process_dirs(store: Path) -> None:
    """Process folders of processes that ended without moving their entries (killed, crashed)."""
    host = socket.gethostname()
    for folder in store.glob(_PROCESS_PREFIX + "*"):
        owner, _, pid = folder.name[len(_PROCESS_PREFIX) :].rpartition("-")
        try:
            if owner == host and pid.isdigit():
                alive = _pid_alive(int(pid))
            else:
                alive = time.time() - folder.stat().st_mtime < _STALE_S
        except OSError:
            continue
        if not alive:
            shutil.rmtree(folder, ignore_errors=True)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # alive, owned by someone else
        return True
    return True


def open_cache(store: Path, bound_bytes: int) -> CompileCache:
    """Prunes `store` and makes this process's folder of links to its entries."""
    store.mkdir(parents=True, exist_ok=True)
    _remove_stale_process_dirs(store)
    prune(store, bound_bytes)
    process_dir = store / f"{_PROCESS_PREFIX}{socket.gethostname()}-{os.getpid()}"
    shutil.rmtree(process_dir, ignore_errors=True)
    process_dir.mkdir()
    for path in _entries(store):
        try:
            (process_dir / path.name).symlink_to(path)
        except FileExistsError:
            pass
    return CompileCache(store, process_dir, bound_bytes)


def publish(cache: CompileCache) -> None:
    """Moves the complete entries this process wrote into the store (an atomic rename each), then removes the
    process folder. Runs at exit; errors are dropped: a lost entry is compiled again next time."""
    try:
        for path in _entries(cache.process_dir):
            if is_complete_entry(path):
                os.replace(path, cache.store / path.name)
    except OSError:
        pass
    shutil.rmtree(cache.process_dir, ignore_errors=True)


def _configure_compile_cache(environ=os.environ) -> CompileCache | None:
    """Turns XLA's persistent cache on in `TF_XLA_FLAGS` (kept, with the flag appended) unless it is off or the flags
    name their own cache directory. It takes effect if set before TensorFlow's first XLA compilation, even after
    `import tensorflow`. Never raises: a cache that cannot be used warns and is not used."""
    flags = environ.get("TF_XLA_FLAGS", "")
    inherited = environ.pop(_PROCESS_DIR_VARIABLE, None)  # a kppo parent's folder: this process makes its own
    if inherited:
        flags = " ".join(flag for flag in flags.split() if flag != f"{_DIRECTORY_FLAG}={inherited}")
        environ["TF_XLA_FLAGS"] = flags
    if _DIRECTORY_FLAG in flags:
        return None
    try:
        store = _cache_store(environ)
        if store is None:
            return None
        bound = _cache_bound(environ)
    except ValueError as error:
        return _without_cache(str(error))
    if any(character.isspace() for character in str(store)):  # TF_XLA_FLAGS splits on white space
        return _without_cache(f"{CACHE_VARIABLE}: expected a directory without white space, got '{store}'")
    try:
        cache = open_cache(store, bound)
    except Exception as error:  # a cache never stops training
        expected = f"{CACHE_VARIABLE}: expected 'off' or a writable directory"
        return _without_cache(f"{expected}, got '{store}' ({type(error).__name__}: {error})")
    environ["TF_XLA_FLAGS"] = f"{flags} {_DIRECTORY_FLAG}={cache.process_dir}".strip()
    environ[_PROCESS_DIR_VARIABLE] = str(cache.process_dir)
    atexit.register(publish, cache)
    return cache


def _without_cache(message: str) -> CompileCache | None:
    warnings.warn(f"{message}; compiling without the compile cache", stacklevel=3)
    return None


class _Capture:
    """fd 2 sent to a file while any block of `quiet_native_logs` runs, in any thread; when the last one ends, every
    line but the known notices is written to stderr."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.depth = 0
        self.saved_fd = -1
        self.file: Any = None

    def enter(self) -> None:
        with self.lock:
            self.depth += 1
            if self.depth == 1:
                sys.stderr.flush()
                self.file = tempfile.TemporaryFile(mode="w+b")
                self.saved_fd = os.dup(2)
                os.dup2(self.file.fileno(), 2)

    def exit(self) -> None:
        with self.lock:
            self.depth -= 1
            if self.depth:
                return
            sys.stderr.flush()
            os.dup2(self.saved_fd, 2)
            os.close(self.saved_fd)
            self.file.seek(0)
            text = self.file.read().decode("utf-8", "replace")
            self.file.close()
        for line in text.splitlines():
            if line.strip() and not _is_noise(line):
                print(line, file=sys.stderr)


_CAPTURE = _Capture()


@contextlib.contextmanager
def quiet_native_logs() -> Iterator[None]:
    """Drops TensorFlow's known start-up and compile-cache notices from what its C++ runtime writes to stderr while
    the block runs (the other lines are written after it). Off with `KPPO_TF_VERBOSE=1`."""
    if os.environ.get("KPPO_TF_VERBOSE"):
        yield
        return
    _CAPTURE.enter()
    try:
        yield
    finally:
        _CAPTURE.exit()


def _import_quietly():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if "tensorflow" in sys.modules:
        import tensorflow as tf_module

        return tf_module
    with quiet_native_logs():
        import tensorflow as tf_module

        # The first device query triggers the CUDA probe; do it while fd 2 is captured.
        tf_module.config.list_physical_devices()
    return tf_module


#: This process's compile cache, or None (off, unusable, or the user's own `TF_XLA_FLAGS` cache).
COMPILE_CACHE = _configure_compile_cache()
tf = _import_quietly()
if not os.environ.get("KPPO_TF_VERBOSE"):
    tf.get_logger().addFilter(_DropPforLoopNotices())
