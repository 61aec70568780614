"""tf.distribute: the tests that need 2 logical CPU devices live in tests/replicated and run here in a fresh pytest
process each (logical devices must be configured before TensorFlow initializes, and this process has initialized
it); tests/conftest.py keeps the main run from collecting them."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import kppo

ROOT = Path(__file__).resolve().parents[2]
REPLICATED = Path(__file__).resolve().parents[1] / "replicated"


def _run(target: str, *args: str, timeout: int = 900, then: str = "") -> subprocess.CompletedProcess:
    """Runs pytest on tests/replicated/<target> with KPPO_REPLICATED=1 in a fresh process; `then` is code the same
    process runs after the tests (a check of its own, which nothing in the process runs after)."""
    path = REPLICATED.relative_to(ROOT) / target
    env = {**os.environ, "KPPO_REPLICATED": "1"}
    env.pop("TF_CONFIG", None)
    code = f"import sys, pytest\nrc = pytest.main(sys.argv[1:])\n{then}\nsys.exit(int(rc))"
    argv = [sys.executable, "-c", code, str(path), "-q", "--tb=short", "-n", "0", *args]  # -n 0: no xdist workers
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def _passed(out: subprocess.CompletedProcess) -> None:
    command = " ".join(["pytest", *out.args[3:]])
    assert out.returncode == 0, f"{command} exited {out.returncode}:\n" + (out.stdout + out.stderr)[-6000:]


def _pytest(target: str, *args: str, timeout: int = 900) -> None:
    """Runs pytest on tests/replicated/<target> with KPPO_REPLICATED=1 and asserts that it passed."""
    _passed(_run(target, *args, timeout=timeout))


#: distribute="tpu" without a TPU and "multi_worker" without a cluster: each error as a JSON string on a line. It
#: runs after the replicated tests in their process (a TPU's initialization clears the process's eager caches, so
#: nothing follows it there).
NO_HARDWARE = """
import json
import kppo
for name, env in (("tpu", None), ("multi_worker", "")):
    import os
    os.environ["TF_CONFIG"] = "" if env is None else env
    try:
        kppo.train("CartPole-v1", kppo.Config(distribute=name))
    except ValueError as err:
        print("no hardware:", json.dumps(str(err)))
"""


@pytest.fixture(scope="module")
def mirrored_run() -> subprocess.CompletedProcess:
    """tests/replicated/test_mirrored.py's default tests, then NO_HARDWARE, in one fresh process."""
    return _run("test_mirrored.py", then=NO_HARDWARE)


@pytest.mark.distributed
def test_mirrored_strategy_on_two_logical_cpus(mirrored_run):
    """tests/replicated/test_mirrored.py: the 2-replica update equals the one-device update (a recurrent one too),
    states sit where the step leaves them, normalization moments merge, gymnasium envs feed 2 replicas, and num_envs
    that do not split are named (its slow tests: below)."""
    _passed(mirrored_run)


@pytest.mark.distributed
@pytest.mark.slow  # 8 mirrored trainings: the default suite's longest test, so slow since the fuzz targets came
def test_every_capability_cell_trains_on_two_replicas():
    """tests/replicated/test_capabilities.py: every env kind trains every agent kind on 2 replicas, which stay
    identical."""
    _pytest("test_capabilities.py")


@pytest.mark.distributed
@pytest.mark.slow
def test_mirrored_target_kl_and_a_second_strategy_in_one_process():
    """tests/replicated/test_mirrored.py's slow checks: target_kl stops every replica; a second run with other network
    shapes shares the process (~35 s)."""
    _pytest("test_mirrored.py", "-m", "slow", "-k", "target_kl or share_one_process")


@pytest.mark.slow  # ~45 s of worker processes: outside the default suite's budget
@pytest.mark.distributed
def test_replicated_checkpoints_restore_in_fresh_processes():
    """tests/replicated/test_checkpoint.py: a 2-replica run resumes bit-identical in a fresh process; two
    MultiWorkerMirroredStrategy worker processes train in sync and the chief's checkpoint restores."""
    _pytest("test_checkpoint.py")


@pytest.mark.distributed
@pytest.mark.slow
def test_two_replicas_learn_cartpole():
    """tests/replicated/test_mirrored.py::test_two_replicas_learn_cartpole (slow: 2 CartPole trainings)."""
    _pytest("test_mirrored.py::test_two_replicas_learn_cartpole", "-m", "slow", timeout=1800)


def test_tpu_and_multi_worker_without_their_hardware_or_cluster_get_one_line_errors(mirrored_run):
    prefix = "no hardware: "
    printed = mirrored_run.stdout.splitlines()
    lines = [json.loads(line.removeprefix(prefix)) for line in printed if line.startswith(prefix)]
    assert len(lines) == 2 and not any("\n" in line for line in lines), mirrored_run.stderr[-2000:]
    assert lines[0].startswith("distribute: 'tpu' needs a TPU, found none")
    assert lines[1].startswith("distribute: 'multi_worker' reads the cluster from TF_CONFIG, expected")


@pytest.mark.parametrize(
    "changes, message",
    [
        (dict(distribute="gpus"), "distribute: expected one of"),
    ],
)
def test_unsupported_combinations_are_named(changes, message):
    with pytest.raises(ValueError, match=message):
        kppo.Config(**changes)
