"""How `soak.py` judges a part against its targets (RSS flat, no retracing, steady steps/s, checkpoint folder
bounded), prints the verdicts and plots the series. Results: docs/benchmarks/soak.md."""

from __future__ import annotations

from pathlib import Path

WARMUP_FRACTION = 0.10  # of the run's steps
RSS_TOLERANCE = 0.05
STEADY_TOLERANCE = 0.10
STEADY_WINDOWS = 20
NATIVE_BETWEEN_SAVES_TOLERANCE = 0.10  # TF-native run: growth of the between-saves size after keep saves
CHECKPOINT_SIZE_TOLERANCE = 0.05  # gymnasium run: spread of the saved zips' sizes


# ---------------------------------------------------------------------------------------------------------------
# Targets
# ---------------------------------------------------------------------------------------------------------------


def _interp_time(hooked: list[list[float]], steps: float, column: int = 0) -> float:
    """`column` (time by default; 5: CPU seconds) when the run reached `steps` (linear between the hook's rows)."""
    prev = [0.0] * len(hooked[0])
    for row in hooked:
        if row[2] >= steps:
            v0, s0, v1, s1 = prev[column], prev[2], row[column], row[2]
            return v1 if s1 == s0 else v0 + (v1 - v0) * (steps - s0) / (s1 - s0)
        prev = row
    return hooked[-1][column]


def evaluate(part: str, data: dict) -> dict:
    """The drift figures and whether each target holds."""
    hooked = data["hooked"]
    total = hooked[-1][2]
    warm_t = _interp_time(hooked, WARMUP_FRACTION * total)
    end_t = hooked[-1][0]
    rows = sorted(data["timed"] + hooked)  # both series, by time
    checkpoint = _native_folder if part == "native" else _gym_folder
    return {
        "rss": _rss(rows, hooked, warm_t, end_t, 1),
        "rss_anon": _rss(rows, hooked, warm_t, end_t, 7),
        "retracing": _retracing(data),
        "steps_per_s": _steadiness(hooked),
        "checkpoint_folder": checkpoint(data, [r[4] for r in rows]),
        "wall_s": end_t,
        "steps": total,
    }


def _rss(rows: list, hooked: list, warm_t: float, end_t: float, column: int) -> dict:
    """Drift of one memory column (1: VmRSS, 7: RssAnon) after warm-up."""
    import numpy as np

    total = hooked[-1][2]
    after = [r for r in rows if warm_t <= r[0] <= end_t]
    start, end = after[0][column], after[-1][column]
    rss, t = np.array([r[column] for r in after]), np.array([r[0] for r in after])
    half = np.array([[r[2], r[column]] for r in hooked if r[2] >= total / 2])
    jumps = np.diff(rss)
    at = int(np.argmax(np.abs(jumps))) if len(jumps) else 0
    return {
        "warmup": f"first {WARMUP_FRACTION:.0%} of the steps ({WARMUP_FRACTION * total:,.0f}), to t = {warm_t:.1f} s",
        "warmup_end_t_s": warm_t,
        "start_mb": start,
        "end_mb": end,
        "min_mb": float(rss.min()),
        "max_mb": float(rss.max()),
        "first_sample_mb": rows[0][column],
        "drift_end_pct": 100 * (end / start - 1),
        "drift_max_pct": 100 * (rss.max() / start - 1),
        "drift_min_pct": 100 * (rss.min() / start - 1),
        "slope_mb_per_min": 60 * float(np.polyfit(t, rss, 1)[0]) if len(after) > 2 else 0.0,
        "second_half_slope_mb_per_m_steps": 1e6 * float(np.polyfit(half[:, 0], half[:, 1], 1)[0])
        if len(half) > 2
        else 0.0,
        "largest_step_mb": float(jumps[at]) if len(jumps) else 0.0,
        "largest_step_t_s": float(t[at + 1]) if len(jumps) else 0.0,
        "target": f"every sample after warm-up within {RSS_TOLERANCE:.0%} of the start",
        "met": bool(np.all(np.abs(rss / start - 1) <= RSS_TOLERANCE)),
    }


def _retracing(data: dict) -> dict:
    first_t = data["hooked"][0][0]
    early = [name for t, name in data["trace_names"] if t <= first_t]
    late = [name for t, name in data["trace_names"] if t > first_t]
    early_names = {_base(name) for name in early}
    return {
        "before_first_iteration": len(early),
        "after_first_iteration": len(late),
        "retraces_of_traced_functions": sum(1 for name in late if _base(name) in early_names),
        "late_names": sorted({_base(name) for name in late}),
        "function_tracing_counts": data["function_tracing_counts"],
        "target": "no trace after the first iteration hook",
        "met": not late,
    }


def _quarter_rate(hooked: list, total: float, q: int, column: int = 0) -> float:
    """Steps per second (column 0: wall; 5: CPU) over the q-th quarter of the run's steps (q = 0..3)."""
    span = _interp_time(hooked, total * (q + 1) / 4, column) - _interp_time(hooked, total * q / 4, column)
    return (total / 4) / span


def _steadiness(hooked: list) -> dict:
    """Steps per second of wall time (the target) and per CPU-second of the process (what is left once other
    processes' share of the cores is taken out: on a shared machine the wall rate follows their load)."""
    import numpy as np

    total = hooked[-1][2]
    edges = np.linspace(WARMUP_FRACTION * total, total, STEADY_WINDOWS + 1)
    rates = np.diff(edges) / np.diff([_interp_time(hooked, s) for s in edges])
    cpu_rates = np.diff(edges) / np.diff([_interp_time(hooked, s, 5) for s in edges])
    second, last = _quarter_rate(hooked, total, 1), _quarter_rate(hooked, total, 3)
    cpu_second, cpu_last = _quarter_rate(hooked, total, 1, 5), _quarter_rate(hooked, total, 3, 5)
    loads = np.array([r[6] for r in hooked])
    return {
        "overall_steps_per_s": (total - hooked[0][2]) / (hooked[-1][0] - hooked[0][0]),
        "second_quarter_steps_per_s": second,
        "last_quarter_steps_per_s": last,
        "last_over_second": last / second,
        "window_cv_pct": 100 * float(rates.std() / rates.mean()),
        "window_min_steps_per_s": float(rates.min()),
        "window_max_steps_per_s": float(rates.max()),
        "windows": STEADY_WINDOWS,
        "second_quarter_steps_per_cpu_s": cpu_second,
        "last_quarter_steps_per_cpu_s": cpu_last,
        "cpu_last_over_second": cpu_last / cpu_second,
        "cpu_window_cv_pct": 100 * float(cpu_rates.std() / cpu_rates.mean()),
        "load_1min_min": float(loads.min()),
        "load_1min_mean": float(loads.mean()),
        "load_1min_max": float(loads.max()),
        "target": f"last quarter within {STEADY_TOLERANCE:.0%} of the second quarter (wall steps/s)",
        "met": bool(abs(last / second - 1) <= STEADY_TOLERANCE),
        "cpu_met": bool(abs(cpu_last / cpu_second - 1) <= STEADY_TOLERANCE),
    }


def _native_folder(data: dict, sizes: list[int]) -> dict:
    """Between saves (the hook's rows: a call's checkpoint is written after its hook returns, so none falls inside a
    save) and at any time (the thread's rows too, which may fall inside a save)."""
    keep = data["setting"]["keep"]
    after_keep_t = _time_of_save(data, keep)  # the first hook row after `keep` saves
    hooked = data["hooked"]
    size_keep = next((r[4] for r in hooked if after_keep_t is not None and r[0] >= after_keep_t), sizes[-1])
    between = max(r[4] for r in hooked if after_keep_t is not None and r[0] >= after_keep_t)
    in_save_bound = size_keep * (keep + 2) / keep
    return {
        "saves": len(data["saves"]),
        "keep": keep,
        "files_at_end": sum(1 for f in data["final_files"] if f.endswith(".index")),
        "size_after_keep_saves_bytes": size_keep,
        "max_between_saves_bytes": between,
        "between_over_after_keep": between / size_keep,
        "max_bytes": max(sizes),
        "end_bytes": sizes[-1],
        "bound_bytes": size_keep * (1 + NATIVE_BETWEEN_SAVES_TOLERANCE),
        "in_save_bound_bytes": in_save_bound,
        "target": f"between saves, never above the size after keep saves x {1 + NATIVE_BETWEEN_SAVES_TOLERANCE:.2f} "
        "(the metric rows each checkpoint holds grow by one row a round); during a save, never above it x "
        "(keep + 2) / keep (the new checkpoint beside the kept ones, and its temporary shard until TF merges it)",
        "met": bool(between <= size_keep * (1 + NATIVE_BETWEEN_SAVES_TOLERANCE) and max(sizes) <= in_save_bound),
    }


def _gym_folder(data: dict, sizes: list[int]) -> dict:
    zips = list(data["zip_bytes"].values()) or [0]
    bound = len(data["zip_bytes"]) * max(zips)
    return {
        "saves": len(data["zip_bytes"]),
        "keep": None,
        "zip_min_bytes": min(zips),
        "zip_max_bytes": max(zips),
        "max_bytes": max(sizes),
        "end_bytes": sizes[-1],
        "bound_bytes": bound,
        "target": f"CheckpointCallback keeps every save (no keep-count, as SB3): never above saves x the largest zip, "
        f"the zips' sizes within {CHECKPOINT_SIZE_TOLERANCE:.0%}",
        "met": bool(max(zips) <= min(zips) * (1 + CHECKPOINT_SIZE_TOLERANCE) and max(sizes) <= bound),
    }


def _time_of_save(data: dict, k: int) -> float | None:
    """The time of the first iteration-hook row after the `k`-th checkpoint was written (checkpoint numbers count
    iterations; a call's checkpoint is written after its hook row, so the row must be a later call's)."""
    rollout = data["setting"]["num_envs"] * data["setting"]["num_steps"]
    numbers = sorted(int(s.split("-")[-1]) for s in data["saves"])
    if len(numbers) < k:
        return None
    steps_k = numbers[k - 1] * rollout
    return next((r[0] for r in data["hooked"] if r[2] > steps_k), None)


def _base(name: str) -> str:
    """`__inference_run_iterations_123` -> `run_iterations`."""
    name = name.removeprefix("__inference_")
    head, _, tail = name.rpartition("_")
    return head if tail.isdigit() else name


# ---------------------------------------------------------------------------------------------------------------
# Report, plots, driver
# ---------------------------------------------------------------------------------------------------------------


def _verdict(ok: bool) -> str:
    return "MET" if ok else "NOT MET"


def print_summary(part: str, s: dict) -> None:
    tr, sp, ck = s["retracing"], s["steps_per_s"], s["checkpoint_folder"]
    print(f"== {part}: {s['steps']:,} steps in {s['wall_s']:.0f} s")
    for name, rss in (("VmRSS", s["rss"]), ("RssAnon", s["rss_anon"])):
        print(
            f"  {name} after warm-up ({rss['warmup']}): {rss['start_mb']:.0f} -> {rss['end_mb']:.0f} MiB, drift "
            f"{rss['drift_end_pct']:+.1f}% (range {rss['drift_min_pct']:+.1f}..{rss['drift_max_pct']:+.1f}%; second "
            f"half {rss['second_half_slope_mb_per_m_steps']:+.2f} MiB per 1M steps; largest step "
            f"{rss['largest_step_mb']:+.1f} MiB at {rss['largest_step_t_s']:.0f} s)  [{_verdict(rss['met'])}]"
        )
    print(
        f"  traces: {tr['before_first_iteration']} up to the first iteration, {tr['after_first_iteration']} after "
        f"({tr['retraces_of_traced_functions']} of functions traced before; {tr['late_names']})  "
        f"[{_verdict(tr['met'])}]"
    )
    print(
        f"  steps/s: 2nd quarter {sp['second_quarter_steps_per_s']:,.0f}, last quarter "
        f"{sp['last_quarter_steps_per_s']:,.0f} (x{sp['last_over_second']:.3f}), window CV "
        f"{sp['window_cv_pct']:.1f}%  [{_verdict(sp['met'])}]; per CPU-second x{sp['cpu_last_over_second']:.3f}, "
        f"window CV {sp['cpu_window_cv_pct']:.1f}% [{_verdict(sp['cpu_met'])}]; load {sp['load_1min_min']:.1f}-"
        f"{sp['load_1min_max']:.1f}"
    )
    if ck["keep"] is None:
        sizes = (
            f"max {ck['max_bytes'] / 1e6:.3f} MB, bound {ck['bound_bytes'] / 1e6:.3f} MB (saves x the largest zip); "
            f"zips {ck['zip_min_bytes'] / 1e3:.1f}-{ck['zip_max_bytes'] / 1e3:.1f} kB"
        )
    else:
        sizes = (
            f"after {ck['keep']} saves {ck['size_after_keep_saves_bytes'] / 1e6:.3f} MB; between saves at most "
            f"{ck['max_between_saves_bytes'] / 1e6:.3f} MB (x{ck['between_over_after_keep']:.3f}, bound "
            f"{ck['bound_bytes'] / 1e6:.3f}); any sample at most {ck['max_bytes'] / 1e6:.3f} MB (in-save bound "
            f"{ck['in_save_bound_bytes'] / 1e6:.3f})"
        )
    print(f"  checkpoint folder, {ck['saves']} saves: {sizes}  [{_verdict(ck['met'])}]")


def plot(part: str, data: dict, summary: dict, folder: str) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    timed, hooked = np.array(data["timed"], float), np.array(data["hooked"], float)
    fig, axes = plt.subplots(4, 1, figsize=(8, 9), sharex=True)
    axes[0].plot(timed[:, 0], timed[:, 1], lw=0.8, label=f"VmRSS, every {data.get('sample_s', 1)} s")
    axes[0].plot(hooked[:, 0], hooked[:, 1], ".", ms=1.5, label="VmRSS, per iteration hook")
    axes[0].plot(timed[:, 0], timed[:, 7], lw=0.8, label="RssAnon (heap)")
    anon = summary["rss_anon"]["start_mb"]
    axes[0].axhspan(anon * (1 - RSS_TOLERANCE), anon * (1 + RSS_TOLERANCE), color="orange", alpha=0.08)
    warm_t = summary["rss"]["warmup_end_t_s"]
    start = summary["rss"]["start_mb"]
    for ax in axes:
        ax.axvline(warm_t, color="grey", ls=":", lw=0.8)
    axes[0].axhspan(start * (1 - RSS_TOLERANCE), start * (1 + RSS_TOLERANCE), color="green", alpha=0.08)
    axes[0].set_ylabel("RSS (MiB)")
    axes[0].set_ylim(bottom=0)
    axes[0].legend(fontsize=7, loc="lower right")
    n = max(len(hooked) // 200, 1)  # steps/s over groups of n hook intervals
    idx = np.arange(0, len(hooked), n)
    t, s = hooked[idx, 0], hooked[idx, 2]
    mid, cpu = 0.5 * (t[1:] + t[:-1]), hooked[idx, 5]
    axes[1].plot(mid, np.diff(s) / np.maximum(np.diff(t), 1e-9), lw=0.8, label="per wall second")
    axes[1].plot(mid, np.diff(s) / np.maximum(np.diff(cpu), 1e-9), lw=0.8, ls="--", label="per CPU-second")
    axes[1].set_ylabel("steps/s")
    axes[1].set_ylim(bottom=0)
    load = axes[1].twinx()
    load.plot(timed[:, 0], timed[:, 6], color="grey", lw=0.6, alpha=0.6)
    load.set_ylabel("load avg (1 min)", fontsize=8, color="grey")
    load.set_ylim(bottom=0)
    axes[1].legend(fontsize=7, loc="lower right")
    axes[2].step(timed[:, 0], timed[:, 3] - data["traces_before_run"], where="post", lw=0.8)
    axes[2].set_ylabel("traces (cumulative)")
    axes[3].plot(timed[:, 0], timed[:, 4] / 1e6, lw=0.8)
    axes[3].set_ylabel("checkpoint folder (MB)")
    axes[3].set_xlabel("time (s)")
    title = data["setting"]["env"]
    fig.suptitle(f"soak, {part}: {title}, {summary['steps']:,} steps", fontsize=10)
    fig.tight_layout()
    Path(folder).mkdir(parents=True, exist_ok=True)
    path = str(Path(folder) / f"soak_{part}.png")
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
