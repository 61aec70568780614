"""Property-based tests (Hypothesis) of the deployment kit (export/, `kppo_runtime`) on damaged artifacts: the
mutations of tests/exporter/test_artifact_properties.py (the model truncated, bit-flipped, overwritten, random,
another artifact's; the metadata's keys dropped, values of other types, other shapes, the checksum dropped, not
JSON, not UTF-8, another artifact's, no file) given to `kppo_runtime.runtime.Controller` (and `act`) and to the
kit's command lines `kppo-evaluate`, `kppo-latency` and `kppo-micro-check` (their `main` functions, in process).

The contract (issue 39): the pair loads and acts as the pristine artifact does, or is refused in one line naming
the file (`kppo_runtime.errors.fail`: exit status 2, one line on stderr); a model whose bytes are not those of the
`sha256` its metadata records is always refused, the pristine pair never; nothing is written. (The kit has no
`Runtime` class: `Controller` is its one entry point; the fuzz runs it in this process, with TensorFlow loaded,
which the kit does not need: tests/test_deployment_kit.py runs it without.)"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
from pathlib import Path
from typing import NamedTuple

import pytest
from hypothesis import assume, example, given
from hypothesis import strategies as st

from tests.exporter.test_artifact_properties import (
    DROP,
    METADATA_FILES,
    METADATA_MUTATIONS,
    MODEL_DAMAGES,
    MODEL_MUTATIONS,
    NAME,
    PROBES,
    Artifacts,
    Pair,
    at_path,
    export_artifacts,
    outcome,
    write,
)
from tests.helpers.fuzz import fast, one_line, slow, within

SLOW_CASES = 2500
EVALUATE = ["--env", "CartPole-v1", "--episodes", "1", "--seed", "3"]


class Reference(NamedTuple):
    artifacts: Artifacts
    actions: list  # the pristine controller's at PROBES
    evaluate_stdout: str  # the pristine kppo-evaluate output
    folder: Path

    def __repr__(self) -> str:  # Hypothesis prints the fixtures of a failing example
        return f"Reference({self.folder})"


def _run(main, argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Reference:
    from kppo_runtime import evaluate
    from kppo_runtime.runtime import Controller

    folder = tmp_path_factory.mktemp("kit")
    artifacts = export_artifacts(folder)
    pair = Pair.write(folder, artifacts, ("keep",), ("tree", []))
    code, out, err = _run(evaluate.main, [str(pair.path), *EVALUATE])
    assert code == 0, err
    controller = Controller(pair.path)
    return Reference(artifacts, [controller.act(obs) for obs in PROBES], out, folder)


def _commands() -> dict:
    """The kit's command lines fuzzed in process: name -> (main, the arguments after the artifact)."""
    from kppo_runtime import evaluate, latency

    return {"kppo-evaluate": (evaluate.main, EVALUATE), "kppo-latency": (latency.main, ["--calls", "5"])}


def check_controller(reference: Reference, model_mutation: tuple, metadata_mutation: tuple) -> None:
    """`Controller(path)` and `act` on PROBES: the pristine actions, or one ValueError line naming the file (or the
    observation, for a damaged model without a checksum whose input is another)."""
    from kppo_runtime.runtime import Controller

    pair = Pair.write(reference.folder, reference.artifacts, model_mutation, metadata_mutation)
    try:
        with within(10):
            controller = Controller(pair.path)
            actions = [controller.act(obs) for obs in PROBES]
    except ValueError as err:
        pair.refused(str(err), (NAME, "obs") if pair.model_changed else (NAME,))
        outcome("refused", pair)
        return
    finally:
        pair.unchanged()
    pair.accepted()
    if not pair.model_changed:
        assert actions == reference.actions
    outcome("accepted", pair)


def check_command(reference: Reference, tool: str, model_mutation: tuple, metadata_mutation: tuple) -> None:
    """`kppo-evaluate` / `kppo-latency` on the pair: exit 0 (kppo-evaluate: the pristine output), or exit 2 and one
    line on stderr, `<tool>: ...`, naming the file (or --env)."""
    main, argv = _commands()[tool]
    pair = Pair.write(reference.folder, reference.artifacts, model_mutation, metadata_mutation)
    with within(30):
        code, out, err = _run(main, [str(pair.path), *argv])
    pair.unchanged()
    assert code in (0, 2), (code, err)
    if code == 2:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"{tool}: "), err
        pair.refused(lines[0], (NAME, "--env"))  # --env: a consistent pair of another artifact, for another env
        outcome(f"{tool} exit 2", pair)
        return
    assert not err.strip(), err
    pair.accepted()
    if tool == "kppo-evaluate" and not pair.model_changed:
        assert out == reference.evaluate_stdout
    outcome(f"{tool} exit 0", pair)


def check_micro(reference: Reference, model_mutation: tuple, metadata_mutation: tuple) -> None:
    """`kppo-micro-check` on a pair the kit must refuse (a model other than its checksum's, or a metadata file that
    is not this artifact's): exit 2 and one line, `kppo-micro-check: ...`, naming the file, before TFLite Micro runs."""
    from kppo_runtime import micro_check

    pair = Pair.write(reference.folder, reference.artifacts, model_mutation, metadata_mutation)
    assume(not pair.pristine)  # a flip undone by a second one: the artifact itself (seconds of TFLite Micro)
    with within(30):
        code, out, err = _run(micro_check.main, [str(pair.path), "--observations", "5"])
    pair.unchanged()
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("kppo-micro-check: "), (code, out, err)
    pair.refused(lines[0], (NAME,))
    outcome("micro_check exit 2", pair)


#: The pairs every kit tool refuses: a damaged model under its own metadata (its checksum), or the model itself
#: under a metadata file that is not its own (another artifact's, text, a prefix of its JSON, bytes, no file).
REFUSED = st.one_of(
    st.tuples(MODEL_DAMAGES, st.just(("tree", []))),
    st.tuples(
        st.just(("keep",)),
        st.one_of(METADATA_FILES, st.tuples(st.just("bytes"), st.binary(max_size=40))),
    ),
)
TOOLS = st.sampled_from(["kppo-evaluate", "kppo-latency"])
needs_micro = pytest.mark.skipif(importlib.util.find_spec("tflite_micro") is None, reason="needs tflite-micro")


@given(MODEL_MUTATIONS, METADATA_MUTATIONS)
@example(("keep",), ("tree", []))  # the pristine artifact
@example(("flip", [(1000, 0)]), ("tree", []))  # a weight's bit: LiteRT runs it; its checksum refuses it
@example(("keep",), ("other", False))  # Pendulum's metadata without its checksum: its spaces refuse it
@fast()
def test_controller_loads_a_damaged_artifact_or_refuses_it_in_one_line(reference, model_mutation, metadata_mutation):
    check_controller(reference, model_mutation, metadata_mutation)


@pytest.mark.slow
@given(MODEL_MUTATIONS, METADATA_MUTATIONS)
@slow(SLOW_CASES)
def test_controller_on_damaged_artifacts_at_scale(reference, model_mutation, metadata_mutation):
    check_controller(reference, model_mutation, metadata_mutation)


@given(TOOLS, MODEL_MUTATIONS, METADATA_MUTATIONS)
@example("kppo-evaluate", ("keep",), ("tree", []))
@example("kppo-latency", ("keep",), ("tree", []))
@example("kppo-evaluate", ("overwrite", 734, b"\x00"), ("other", False))  # found by Hypothesis: "kppo-evaluate: 10"
@fast()
def test_kit_commands_run_a_damaged_artifact_or_exit_2_in_one_line(reference, tool, model_mutation, metadata_mutation):
    check_command(reference, tool, model_mutation, metadata_mutation)


@pytest.mark.slow
@given(TOOLS, MODEL_MUTATIONS, METADATA_MUTATIONS)
@slow(SLOW_CASES)
def test_kit_commands_on_damaged_artifacts_at_scale(reference, tool, model_mutation, metadata_mutation):
    check_command(reference, tool, model_mutation, metadata_mutation)


@needs_micro
@given(REFUSED)
@fast()
def test_micro_check_refuses_a_damaged_artifact_in_one_line(reference, pair):
    check_micro(reference, *pair)


@needs_micro
@pytest.mark.slow
@given(REFUSED)
@slow(SLOW_CASES)
def test_micro_check_on_damaged_artifacts_at_scale(reference, pair):
    check_micro(reference, *pair)


def test_the_metadata_records_the_models_sha256(reference):
    """The exporter writes `sha256`: what lets the kit refuse a damaged model LiteRT would run (a flipped weight
    bit loads and acts differently)."""
    import hashlib

    metadata = reference.artifacts.main.metadata
    assert metadata["sha256"] == hashlib.sha256(reference.artifacts.main.model).hexdigest()
    assert json.loads(json.dumps(metadata)) == metadata


# ---------------------------------------------------------------------------------------------------------------
# What Hypothesis found (before the fixes), kept as explicit cases
# ---------------------------------------------------------------------------------------------------------------


def _metadata_cases(metadata: dict) -> list:
    """(metadata file content, what the kit did with it before issue 39's fixes)."""
    return [
        (7, "AttributeError: 'int' object has no attribute 'get'"),
        (True, "TypeError: 'bool' object is not subscriptable"),
        ({}, "KeyError: 'action_space' (printed as kppo-latency: 'action_space')"),
        (at_path(metadata, ("observation_space", "shape"), None), "kppo-latency: TypeError: int * NoneType"),
        (at_path(metadata, ("observation_space", "type"), DROP), "KeyError: 'type'"),
        (None, "FileNotFoundError (an OSError, not the kit's ValueError)"),
        (b"{}}", "json's 'Extra data: line 1 column 3 (char 2)', naming no file"),
        (b"\xff", "'utf-8' codec can't decode byte 0xff in position 0, naming no file"),
    ]


CASES = list(range(8))


@pytest.mark.parametrize("case", CASES)
def test_the_kit_refuses_metadata_it_cannot_read_in_one_line(reference, case):
    """Found by Hypothesis: `Controller` and the kit's commands read the metadata without checking it: Python's
    AttributeError, TypeError and KeyError (tracebacks from `Controller`; from kppo-latency a TypeError traceback,
    or a line "kppo-latency: 'type'"), json's and the UTF-8 codec's messages naming no file."""
    from kppo_runtime.runtime import Controller

    metadata, before = _metadata_cases(reference.artifacts.main.metadata)[case]
    path = write(reference, reference.artifacts.main.model, metadata)
    with pytest.raises(ValueError, match=rf"^{NAME}") as refused:
        Controller(path)
    one_line(str(refused.value), [NAME])
    for tool, (main, argv) in _commands().items():
        code, _, err = _run(main, [str(path), *argv])
        assert code == 2 and err.startswith(f"{tool}: {NAME}") and len(err.strip().splitlines()) == 1, (before, err)


@pytest.mark.parametrize("model", [b"", b"\x00" * 64], ids=["empty", "zeros"])
def test_the_kit_names_a_model_litert_cannot_read(reference, model):
    """Found by Hypothesis: LiteRT's "mmap of size 0 requested. The model allocation is null/empty" and "The model
    is not a valid Flatbuffer buffer" reached the user naming no file; the kit checks TFLite's file identifier
    first."""
    from kppo_runtime.runtime import Controller

    metadata = {k: v for k, v in reference.artifacts.main.metadata.items() if k != "sha256"}
    with pytest.raises(ValueError, match=rf"^{NAME}: expected a TFLite flatbuffer \(file identifier TFL3"):
        Controller(write(reference, model, metadata))


def test_kppo_evaluate_names_an_env_of_other_spaces(reference):
    """Found by Hypothesis: a consistent pair of another artifact (Pendulum's) evaluated on CartPole-v1 printed
    "kppo-evaluate: obs: expected 3 values once flattened, got 4", naming neither the artifact nor the env."""
    from kppo_runtime import evaluate

    other = reference.artifacts.other
    code, _, err = _run(evaluate.main, [str(write(reference, other.model, other.metadata)), *EVALUATE])
    assert code == 2 and err.strip() == (
        "kppo-evaluate: --env: expected an env with the spaces of policy.tflite (observation Box(3,), action Box(1,)),"
        " got CartPole-v1 (observation Box(4,), action Discrete(2))"
    )
