"""An artifact's quality report, `<artifact>.report.json` beside it (`write_report`): the closed-loop return of the
float policy and of the artifact run by its own interpreter (LiteRT for .tflite, onnxruntime for .onnx, TensorFlow
for a SavedModel) over the same seeded episodes (`kppo.exporter.closed_loop`), each with its 95% interval, the
actions' agreement on the states the artifact visits, the artifact's size, TFLite Micro's arena (a .tflite file:
`kppo.exporter.micro`; n/a for ONNX and SavedModel, whose runtimes allocate as they go) and the median
microseconds of one invoke, and the verdict: the artifact is degraded when its mean return is below the float
policy's by more than max(2% of |float mean|, the float mean's 95% half-width) (`degraded`). A .tflite file that
TFLite Micro runs also plays the same episodes in TFLite Micro (`micro_closed_loop`, `kppo.exporter.micro_loop`),
whose return is held to the same rule.

Without an env (an SB3 zip without `--calibrate-env`, a run whose env is no gymnasium id with the policy's
spaces) the report says that no closed-loop check ran, and holds the rest.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, NamedTuple
from collections.abc import Callable

import numpy as np

from kppo._tf import tf
from kppo.agent.policy import Policy
from kppo.core.files import atomic_file
from kppo.exporter.artifact import saved_model_runner
from kppo.exporter.closed_loop import artifact_act, env_name, interval, make_envs, play, policy_act
from kppo.exporter.inputs import artifact_inputs, split_rows
from kppo.exporter.micro import micro_figures
from kppo.exporter.micro_loop import MicroRunner
from kppo.exporter.onnx import OnnxRunner
from kppo.exporter.runner import MASK_INPUT, STATE_INPUTS, TFLiteRunner

REPORT_EPISODES = 20  # closed-loop episodes per policy
REPORT_SEED = 1000  # episode i is reset with seed REPORT_SEED + i (the export benchmarks' seeds)
RELATIVE_MARGIN = 0.02  # degraded: below the float mean by more than 2% of |float mean| (or its 95% half-width)
LATENCY_CALLS = 200
RUNTIMES = {"tflite": "LiteRT", "onnx": "onnxruntime", "saved_model": "TensorFlow"}


class Loaded(NamedTuple):
    """A written artifact, loaded by its own interpreter."""

    run: Callable[..., Any]  # run(rows[, masks]), a recurrent artifact's run(rows, h, c, masks)
    one_call: Callable[[], Any]  # one invoke on one observation, for the latency
    tflite: TFLiteRunner | None
    format: str


def report_path(artifact: Path) -> Path:
    """`<artifact>.report.json` beside the artifact."""
    return artifact.with_name(artifact.name + ".report.json")


def load_artifact(path: Path, policy: Policy, metadata: dict) -> Loaded:
    """The artifact at `path` (what was written, not the object that wrote it) in its own interpreter."""
    inputs = artifact_inputs(policy)
    recurrent, masked = policy.lstm is not None, policy.action_masks
    one = _one_row(policy, masked, recurrent)
    if metadata["format"] == "tflite":
        runner = TFLiteRunner(path, inputs)
        feed = _signature_feed(runner, policy, one)
        return Loaded(runner.step if recurrent else runner, lambda: runner.runner(**feed), runner, "tflite")
    if metadata["format"] == "onnx":
        onnx_runner = OnnxRunner(path.read_bytes(), inputs)
        rows, rest = one[0], one[1:]
        if recurrent:
            return Loaded(onnx_runner.step, lambda: onnx_runner.step(rows, *rest[-2:], *rest[:-2]), None, "onnx")
        return Loaded(onnx_runner, lambda: onnx_runner(rows, *rest), None, "onnx")
    batch = metadata["inputs"][0]["shape"][0]
    run = saved_model_runner(tf.saved_model.load(str(path)), batch, masked, recurrent, inputs)
    return Loaded(run, lambda: run(*one) if not recurrent else run(one[0], *one[-2:], *one[1:-2]), None, "saved_model")


def _one_row(policy: Policy, masked: bool, recurrent: bool) -> list[np.ndarray]:
    """One input row of zeros (and an all-allowed mask, a zero state): what one timed invoke reads."""
    rows = np.zeros((1, *policy.input_shape), policy.input_dtype)
    mask = [np.ones((1, policy.dist.mask_size), np.float32)] if masked else []
    state = [np.zeros((1, policy.lstm.state_size), np.float32)] * 2 if recurrent else []
    return [rows, *mask, *state]


def _signature_feed(runner: TFLiteRunner, policy: Policy, one: list[np.ndarray]) -> dict[str, np.ndarray]:
    """The `action` signature's inputs by name for one row (`_one_row`)."""
    names = runner.input_names + ([MASK_INPUT] if policy.action_masks else [])
    names += list(STATE_INPUTS) if policy.lstm is not None else []
    return dict(zip(names, [*_split(runner, one[0]), *one[1:]]))


def _split(runner: TFLiteRunner, rows: np.ndarray) -> list[np.ndarray]:
    if runner.inputs is None:
        return [np.asarray(rows).astype(runner.input_dtype)]
    return split_rows(runner.inputs, rows)


def latency_us(one_call: Callable[[], Any], calls: int = LATENCY_CALLS) -> float:
    """Median microseconds of `one_call` (after a warm-up call)."""
    one_call()
    times = []
    for _ in range(calls):
        start = time.perf_counter_ns()
        one_call()
        times.append(time.perf_counter_ns() - start)
    return float(np.median(times)) / 1e3


def degraded(float_stats: dict, artifact_stats: dict) -> tuple[bool, float]:
    """(degraded, threshold): the artifact's mean return is below threshold = float mean - max(2% of |float mean|,
    the float mean's 95% half-width)."""
    margin = max(RELATIVE_MARGIN * abs(float_stats["mean"]), float_stats["half_width"])
    threshold = float_stats["mean"] - margin
    return bool(artifact_stats["mean"] < threshold), threshold


def micro_inputs(runner: TFLiteRunner, policy: Policy, recorded: dict[str, np.ndarray]) -> tuple[list, int]:
    """The recorded closed-loop inputs as TFLite Micro takes them (one array per model input, in the model's
    input order: it sets inputs by position) and the action output's position."""
    by_name = dict(zip(runner.input_names, _split(runner, recorded["rows"])))
    if "masks" in recorded:
        by_name[MASK_INPUT] = recorded["masks"]
    if "h" in recorded:
        by_name[STATE_INPUTS[0]], by_name[STATE_INPUTS[1]] = recorded["h"], recorded["c"]
    signature = runner.runner.get_input_details()
    order = {d["index"]: i for i, d in enumerate(runner.interpreter.get_input_details())}
    arrays: list[Any] = [None] * len(order)
    for name, values in by_name.items():
        arrays[order[signature[name]["index"]]] = np.asarray(values).astype(signature[name]["dtype"])
    outputs = runner.runner.get_output_details()
    action = outputs["action"] if "action" in outputs else next(iter(outputs.values()))
    out_order = {d["index"]: i for i, d in enumerate(runner.interpreter.get_output_details())}
    return arrays, out_order[action["index"]]


def _micro(runner: TFLiteRunner, policy: Policy, recorded: dict[str, np.ndarray]) -> dict[str, Any]:
    """TFLite Micro's arena and invoke time on the recorded closed-loop inputs, and its actions against
    LiteRT's on them."""
    arrays, position = micro_inputs(runner, policy, recorded)
    figures = micro_figures(runner.content, arrays, position)
    if "error" in figures:
        return {"arena_used_bytes": None, "error": figures["error"]}
    rows = recorded["rows"]
    masks = recorded.get("masks")
    if policy.lstm is None:
        litert = runner(rows, masks)
    else:
        litert = runner.step(rows, recorded["h"], recorded["c"], masks)[0]
    got, want = np.asarray(figures["actions"]).reshape(len(rows), -1), np.asarray(litert).reshape(len(rows), -1)
    return {
        "arena_used_bytes": figures["arena_used_bytes"],
        "invoke_us": figures["invoke_us"],
        "rows": len(rows),
        "max_abs_error_vs_litert": float(np.abs(got.astype(np.float64) - want).max()),
        "equal_vs_litert": float(np.mean((got == want).all(axis=1))),
    }


def closed_loop(policy: Policy, loaded: Loaded, env: Any, episodes: int, seed: int) -> dict[str, Any] | None:
    """The float policy's and the artifact's closed-loop figures, with the verdict; None when `env` cannot be made
    with the policy's spaces."""
    envs = make_envs(policy, env, min(episodes, 20))
    if envs is None:
        return None
    units = None if policy.lstm is None else policy.lstm.state_size
    try:
        reference = policy_act(policy)
        ours = play(policy, envs, episodes, seed, reference)
        theirs = play(policy, envs, episodes, seed, artifact_act(loaded.run, units is not None, units), reference)
    finally:
        for made in envs:
            if made is not env:
                made.close()
    float_stats, artifact_stats = interval(ours.returns), interval(theirs.returns)
    bad, threshold = degraded(float_stats, artifact_stats)
    return {
        "env": env_name(env),
        "episodes": episodes,
        "seeds": [seed, seed + episodes - 1],
        "deterministic": True,
        "float": float_stats,
        "artifact": artifact_stats,
        "agreement": theirs.agreement,
        "threshold": threshold,
        "degraded": bad,
        "degraded_in": [RUNTIMES[loaded.format]] if bad else [],
        "_recorded": theirs.recorded,
    }


def micro_closed_loop(
    runner: TFLiteRunner, policy: Policy, env: Any, episodes: int, seed: int, float_stats: dict
) -> dict[str, Any]:
    """The .tflite artifact in TFLite Micro over the same seeded episodes (`MicroRunner`): its returns, their 95%
    interval, its agreement with the float policy and whether it is degraded; or {"error": one line}."""
    envs = make_envs(policy, env, min(episodes, 20))
    if envs is None:
        return {"error": "no env"}
    micro = MicroRunner(runner)
    recurrent = policy.lstm is not None
    try:
        act = artifact_act(micro.step if recurrent else micro, recurrent, runner.units)
        played = play(policy, envs, episodes, seed, act, policy_act(policy))
    except ValueError as error:
        return {"error": " ".join(str(error).split())}
    finally:
        micro.close()
        for made in envs:
            if made is not env:
                made.close()
    stats = interval(played.returns)
    return {"artifact": stats, "agreement": played.agreement, "degraded": degraded(float_stats, stats)[0]}


def make_report(
    path: Path,
    policy: Policy,
    metadata: dict,
    env: Any = None,
    episodes: int = REPORT_EPISODES,
    seed: int = REPORT_SEED,
    micro_loop: bool = True,
) -> dict[str, Any]:
    """The report of the artifact written at `path` (its metadata `metadata`): see the module docstring. `env`: a
    gymnasium id, `Env` or factory for the closed loop (None: no closed-loop check). `micro_loop`: a .tflite file
    that TFLite Micro runs also plays the episodes in TFLite Micro (`micro_closed_loop`); without it TFLite Micro
    only replays the LiteRT episodes' first inputs (what `kppo train`'s export does, to stay quick)."""
    if episodes < 2:
        raise ValueError(f"episodes: expected an integer >= 2 (a 95% interval needs two), got {episodes}")
    loaded = load_artifact(path, policy, metadata)
    loop = None if env is None else closed_loop(policy, loaded, env, episodes, seed)
    recorded = loop.pop("_recorded") if loop is not None else None
    fmt = metadata["format"]
    report: dict[str, Any] = {
        "artifact": path.name,
        "format": fmt,
        "quantization": metadata["quantization"],
        "size_bytes": metadata["size_bytes"],
        "closed_loop": loop,
        "closed_loop_note": _note(env, loop),
        "latency": {"runtime": RUNTIMES[fmt], "median_invoke_us": latency_us(loaded.one_call), "rows": 1},
    }
    if loaded.tflite is not None:
        if recorded is None:
            recorded = {"rows": _one_row(policy, False, False)[0]} | _start(policy)
        report["tflite_micro"] = micro = _micro(loaded.tflite, policy, recorded)
        if micro_loop and loop is not None and micro["arena_used_bytes"] is not None:  # its own episodes
            micro["closed_loop"] = micro_closed_loop(loaded.tflite, policy, env, episodes, seed, loop["float"])
            if micro["closed_loop"].get("degraded"):
                loop["degraded"] = True
                loop["degraded_in"] = [*(["LiteRT"] if loop["degraded_in"] else []), "TFLite Micro"]
    report["arena_bytes"] = (report.get("tflite_micro") or {}).get("arena_used_bytes")
    report["arena_meaning"] = (
        "TFLite Micro's arena_used_bytes (its recording allocator's total, head + tail) on the closed-loop inputs"
        if loaded.tflite is not None
        else f"n/a: {RUNTIMES[fmt]} allocates as it runs; no fixed arena to report"
    )
    return report


def _start(policy: Policy) -> dict[str, np.ndarray]:
    """An all-allowed mask and a zero state for one row (a report without a closed loop)."""
    out = {}
    if policy.action_masks:
        out["masks"] = np.ones((1, policy.dist.mask_size), np.float32)
    if policy.lstm is not None:
        out["h"] = out["c"] = np.zeros((1, policy.lstm.state_size), np.float32)
    return out


def _note(env: Any, loop: dict | None) -> str:
    if env is None:
        return "no closed-loop check ran: no env (the run's own, or --calibrate-env ID)"
    if loop is None:
        return (
            f"no closed-loop check ran: {env_name(env)!r} is no gymnasium env with the policy's spaces (kppo export "
            f"--calibrate-env ID names one)"
        )
    return "float policy and artifact over the same seeded episodes, deterministic actions"


def write_report(report: dict[str, Any], path: Path) -> Path:
    """Writes `report` as `<path>.report.json` (aside, then renamed into place); returns that path."""
    out = report_path(path)
    with atomic_file(out) as partial:
        partial.write_text(json.dumps(report, indent=2))
    return out


def summary(report: dict[str, Any]) -> str:
    """The report on one line, for the CLI."""
    loop = report["closed_loop"]
    parts = []
    if loop is None:
        parts.append(report["closed_loop_note"])
    else:
        f, a = loop["float"], loop["artifact"]
        parts.append(
            f"return {a['mean']:.1f} +- {a['half_width']:.1f} ({RUNTIMES[report['format']]}) vs float "
            f"{f['mean']:.1f} +- {f['half_width']:.1f} over {loop['episodes']} episodes of {loop['env']}"
        )
        agreement = loop["agreement"]
        parts.append(
            f"actions {agreement['equal']:.1%} equal"
            if "equal" in agreement
            else f"action error max {agreement['max_error']:.2%} of the range"
        )
    parts.append(f"{report['size_bytes']:,} B")
    micro = report.get("tflite_micro")
    if micro is not None:
        micro_loop = micro.get("closed_loop") or {}
        parts.append(
            (
                f"TFLite Micro arena {micro['arena_used_bytes']:,} B"
                if micro["arena_used_bytes"] is not None
                else "TFLite Micro: rejected"
            )
            + (f", return {micro_loop['artifact']['mean']:.1f}" if "artifact" in micro_loop else "")
        )
    parts.append(f"{report['latency']['median_invoke_us']:.1f} us per invoke")
    return "; ".join(parts)
