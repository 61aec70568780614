"""XLA's persistent compile cache (`kppo._tf`): the switch and its one-line warnings, the size bound, torn entries,
the per-process folders; and two fresh processes training the same Config, the second loading the first one's
executable and ending with bit-identical weights."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kppo import _tf

ROOT = Path(__file__).resolve().parents[1]
_PARENT = _tf._PROCESS_DIR_VARIABLE


def entry_bytes(*fields: bytes) -> bytes:
    """A serialized cache entry's wire format: fields 1, 2, 3 (key, HLO, executable), each length-delimited (tag
    `field << 3 | 2`, a one-byte length for these short payloads)."""
    return b"".join(bytes([number << 3 | 2, len(payload)]) + payload for number, payload in enumerate(fields, 1))


def write_entry(folder: Path, name: str, size: int = 30, age_s: float = 0.0) -> Path:
    path = folder / f"xla_compile_cache__{name}__XLA_CPU_JIT.pb"
    path.write_bytes(entry_bytes(b"k", b"h", b"x" * size))
    stamp = time.time() - age_s
    os.utime(path, (stamp, stamp))
    return path


def test_complete_and_torn_entries(tmp_path):
    whole = write_entry(tmp_path, "whole")
    assert _tf.is_complete_entry(whole)
    torn = tmp_path / "torn.pb"
    torn.write_bytes(whole.read_bytes()[:-5])  # a writer interrupted mid-file: TF's load would fail the call
    assert not _tf.is_complete_entry(torn)
    foreign = tmp_path / "foreign.pb"
    foreign.write_bytes(b"garbage\n")
    assert not _tf.is_complete_entry(foreign)


def test_prune_drops_torn_then_oldest_entries(tmp_path):
    old, middle, new = (write_entry(tmp_path, name, age_s=age) for name, age in (("a", 30), ("b", 20), ("c", 10)))
    torn = tmp_path / "torn.pb"
    torn.write_bytes(new.read_bytes()[:-1])
    size = new.stat().st_size
    _tf.prune(tmp_path, bound_bytes=2 * size)  # room for two: the oldest goes
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([middle.name, new.name])
    assert not old.exists()


def test_process_folder_links_entries_and_publish_moves_new_ones(tmp_path):
    shared = write_entry(tmp_path, "shared")
    dead = tmp_path / f"{_tf._PROCESS_PREFIX}{_tf.socket.gethostname()}-999999999"  # a crashed process's folder
    dead.mkdir()
    write_entry(dead, "orphan")
    cache = _tf.open_cache(tmp_path, bound_bytes=1 << 20)
    assert not dead.exists()
    assert (cache.process_dir / shared.name).resolve() == shared.resolve()
    written = write_entry(cache.process_dir, "written")  # what TensorFlow writes while this process compiles
    (cache.process_dir / "torn.pb").write_bytes(written.read_bytes()[:-1])
    _tf.publish(cache)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([shared.name, written.name])


def test_switch_and_user_flags(tmp_path):
    environ = {"KPPO_COMPILE_CACHE": "off", "TF_XLA_FLAGS": "--tf_xla_auto_jit=0"}
    assert _tf._configure_compile_cache(environ) is None
    assert environ["TF_XLA_FLAGS"] == "--tf_xla_auto_jit=0"
    own = {"KPPO_COMPILE_CACHE": str(tmp_path), "TF_XLA_FLAGS": "--tf_xla_persistent_cache_directory=/mine"}
    assert _tf._configure_compile_cache(own) is None  # the user's own cache wins
    assert own["TF_XLA_FLAGS"] == "--tf_xla_persistent_cache_directory=/mine"
    environ = {"KPPO_COMPILE_CACHE": str(tmp_path), "TF_XLA_FLAGS": "--tf_xla_auto_jit=0"}
    cache = _tf._configure_compile_cache(environ)
    assert cache is not None and cache.store.parent == tmp_path / "xla"
    assert environ["TF_XLA_FLAGS"] == f"--tf_xla_auto_jit=0 --tf_xla_persistent_cache_directory={cache.process_dir}"
    assert cache.bound_bytes == _tf.DEFAULT_CACHE_MB << 20
    child = {"XDG_CACHE_HOME": str(tmp_path / "xdg"), **{k: environ[k] for k in ("TF_XLA_FLAGS", _PARENT)}}
    cache_of_child = _tf._configure_compile_cache(child)  # a child process (inherited variables): its own folder
    assert cache_of_child is not None and cache_of_child.store.parent == tmp_path / "xdg" / "kppo" / "xla"
    assert (
        child["TF_XLA_FLAGS"] == f"--tf_xla_auto_jit=0 --tf_xla_persistent_cache_directory={cache_of_child.process_dir}"
    )
    _tf.publish(cache_of_child)
    _tf.publish(cache)


@pytest.mark.parametrize(
    "environ, message",
    [
        ({"KPPO_COMPILE_CACHE_MB": "lots"}, "KPPO_COMPILE_CACHE_MB: expected a positive number of MiB, got 'lots'"),
        ({"KPPO_COMPILE_CACHE_MB": "-1"}, "KPPO_COMPILE_CACHE_MB: expected a positive number of MiB, got '-1'"),
        ({"KPPO_COMPILE_CACHE": "{tmp}/a file"}, "KPPO_COMPILE_CACHE: expected a directory without white space"),
        ({"KPPO_COMPILE_CACHE": "{tmp}/file"}, "KPPO_COMPILE_CACHE: expected 'off' or a writable directory, got"),
    ],
)
def test_unusable_cache_warns_in_one_line_and_is_not_used(tmp_path, environ, message):
    (tmp_path / "file").write_text("not a directory")
    environ = {k: v.format(tmp=tmp_path) for k, v in environ.items()}
    environ.setdefault("KPPO_COMPILE_CACHE", str(tmp_path / "cache"))
    with pytest.warns(UserWarning) as warned:
        assert _tf._configure_compile_cache(environ) is None
    text = str(warned[0].message)
    assert message in text and text.endswith("compiling without the compile cache") and "\n" not in text
    assert "TF_XLA_FLAGS" not in environ


TRAIN = """
import hashlib, json
import numpy as np
import kppo
config = kppo.Config(num_envs=4, num_steps=16, total_timesteps=384, eval_freq=2, num_eval_envs=3, num_hidden_units=16)
result = kppo.train("CartPole-v1", config)
digest = hashlib.sha256(b"".join(np.asarray(v).tobytes() for v in result.agent.variables)).hexdigest()
print("RESULT", json.dumps({"digest": digest, "eval": result.metrics["eval/mean_returns"].tolist()}))
"""


def train_in_process(cache: Path, verbose: bool) -> tuple[dict, str]:
    env = dict(os.environ, KPPO_COMPILE_CACHE=str(cache), TF_CPP_MIN_LOG_LEVEL="0")
    env["TF_CPP_VMODULE"] = "device_executable_persistor=1"  # logs "Loading cached entry" on a hit
    env.pop("KPPO_TF_VERBOSE", None)
    if verbose:
        env["KPPO_TF_VERBOSE"] = "1"
    done = subprocess.run([sys.executable, "-c", TRAIN], env=env, cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.split("RESULT ", 1)[1]), done.stderr


@pytest.mark.slow  # two fresh processes, each importing TensorFlow and compiling: ~15-35 s on 2 cores
def test_second_process_loads_the_executable_and_trains_the_same_weights(tmp_path):
    cold, cold_log = train_in_process(tmp_path, verbose=True)
    assert "Loading cached entry" not in cold_log
    entries = list((tmp_path / "xla").glob("*/*.pb"))
    assert len(entries) == 1  # the XLA-compiled rollout, moved into the store at exit
    warm, warm_log = train_in_process(tmp_path, verbose=False)
    assert warm_log.count("Loading cached entry") == 1
    assert warm == cold  # bit-identical weights and evaluation returns
    for notice in _tf._CACHE_NOISE:  # what TF logs on every hit, dropped outside KPPO_TF_VERBOSE
        assert notice not in warm_log
    assert list((tmp_path / "xla").glob("*/*.pb")) == entries
    assert not list((tmp_path / "xla").glob(f"*/{_tf._PROCESS_PREFIX}*"))
