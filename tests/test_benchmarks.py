"""The benchmark scripts still run against the current API (tiny budgets; what they measure is not checked here).

The scripts that take longest to smoke-run are `slow` (`pytest -m slow`), to keep the default suite within CI's
budget; the statistics of `results.py` and one host-path benchmark stay in it."""

import ast
import importlib.util
import itertools
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]


def _bench(script: str, *args: str, timeout: int = 300) -> str:
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def _rows(table: str, first_cell: str) -> list[list[str]]:
    rows = [
        [cell.strip() for cell in line.strip("|").split("|")] for line in table.splitlines() if line.startswith("|")
    ]
    return [row for row in rows if row[0] == first_cell]


@pytest.mark.slow
def test_cartpole_benchmark_runs_kppo():
    (row,) = _rows(_bench("cartpole.py", "--frameworks", "kppo", "--timesteps", "4096"), "kppo")
    assert row[2] == "4,096"  # env_steps


@pytest.mark.slow
def test_population_benchmark_runs_sequential_population_and_curve(tmp_path):
    out = tmp_path / "population.json"
    _bench(
        "population.py",
        "--members",
        "2",
        "--iterations",
        "2",
        "--curve",
        "1,2",
        "--curve-iterations",
        "2",
        "--json",
        str(out),
    )
    report = json.loads(out.read_text())
    assert len(report["sequential"]) == 2 and len(report["population"]["final_returns"]) == 2
    assert [point["members"] for point in report["curve"]] == [1, 2] and report["ratio"] > 0


@pytest.mark.slow  # suite budget: a benchmark script's smoke run, as the other scripts' above
def test_gym_benchmark_runs_kppo():
    (row,) = _rows(
        _bench("gym_ppo.py", "--frameworks", "kppo", "--tasks", "cartpole", "--timesteps-scale", "0.01"), "kppo"
    )
    assert int(row[2].replace(",", "")) > 0


@pytest.mark.slow  # suite budget
def test_predict_benchmark_times_kppo_predict_and_evaluate_policy():
    table = _bench("predict.py", "--frameworks", "kppo", "--calls", "50", "--repeats", "1", "--episodes", "2")
    (row,) = _rows(table, "predict, 1 obs, deterministic (µs/call)")
    assert float(row[1]) > 0 and row[2] == ""  # kppo only: no SB3 column
    assert _rows(table, "evaluate_policy, stochastic (s)") and "CPUs" in table.splitlines()[0]


@pytest.mark.slow
def test_jit_flags_benchmark_measures_all_four_combinations():
    table = _bench("jit_flags.py", "--iterations", "1", "--repeats", "1")
    assert len(_rows(table, "True")) == 2 and len(_rows(table, "False")) == 2


@pytest.mark.slow
def test_second_run_benchmark_times_kept_and_traced_runs():
    table = _bench("second_run.py", "--repeats", "1")
    assert _rows(table, "kppo.train, TF-native, kept programs") and _rows(table, "kppo.PPO, traced anew")


@pytest.mark.slow
def test_env_scaling_benchmark_runs():
    (row,) = _rows(_bench("env_scaling.py", "--envs", "64", "--steps", "4", "--iterations", "1"), "64")
    assert row[1] == "CPU"


@pytest.mark.slow
@pytest.mark.distributed
def test_replicas_benchmark_runs_one_and_two_replicas():
    table = _bench("replicas.py", "--timesteps", "4096")
    assert _rows(table, "1") and _rows(table, "2")


@pytest.mark.slow
def test_learning_benchmark_reports_every_seed(tmp_path):
    config = tmp_path / "tiny.yaml"
    config.write_text(
        "env: CartPole-v1\nnum_envs: 4\nnum_steps: 16\ntotal_timesteps: 256\neval_freq: 1\n"
        "num_eval_envs: 2\nnum_hidden_units: 8\n"
    )
    table = _bench("learning.py", str(config), "--seeds", "0", "1", "--threshold", "10")
    assert _rows(table, "0") and _rows(table, "1")


@pytest.mark.slow
def test_host_breakdown_benchmark_times_every_part():
    table = _bench("host_breakdown.py", "--tasks", "cartpole", "--iterations", "1")
    assert len(_rows(table, "cartpole")) == 2  # graph and XLA update


@pytest.mark.slow
def test_vectorization_benchmark_compares_sync_and_async():
    (row,) = _rows(_bench("vectorization.py", "--tasks", "pendulum", "--steps", "20", "--repeats", "1"), "Pendulum-v1")
    assert row[5] in ("sync", "async")


def test_digests_runs_and_names_unknown_runs():
    line = _bench("digests.py", "ppo").strip().splitlines()[-1]
    assert '"run": "ppo"' in line and '"digest": "' in line
    bad = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "digests.py"), "nope"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "digests: expected runs among" in bad.stderr


# --- benchmarks/results.py and benchmarks/stats.py: the statistics of the results table -----------------------------


def _load(name: str):
    """A benchmarks/ script as a module (registered first: results.py holds a dataclass)."""
    if str(ROOT / "benchmarks") not in sys.path:  # where a script finds its neighbours (`machine`) when run
        sys.path.insert(0, str(ROOT / "benchmarks"))
    spec = importlib.util.spec_from_file_location(f"_test_bench_{name}", ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


stats = _load("stats")


def _percentile(sorted_values: list[float], q: float) -> float:
    """numpy's default (linear) percentile, by hand."""
    pos = q / 100 * (len(sorted_values) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (pos - lo) * (sorted_values[hi] - sorted_values[lo])


def test_bootstrap_ci_two_values_by_hand():
    # Resampled means of [0, 1] are 0, 0.5, 1 with probabilities 1/4, 1/2, 1/4: about 2,500 of the 10,000 are 0
    # and 2,500 are 1, far more than the 250 in each 2.5% tail, so the interval is [0, 1].
    assert stats.bootstrap_mean_ci([0.0, 1.0]) == (0.0, 1.0)
    assert stats.bootstrap_mean_ci([3.0, 3.0, 3.0]) == (3.0, 3.0)
    assert stats.bootstrap_mean_ci([7.0]) == (7.0, 7.0)


def test_bootstrap_ci_equals_naive_loop():
    values = np.random.default_rng(1).normal(size=5)
    idx = np.random.default_rng(0).integers(0, 5, size=(10_000, 5))  # the draws bootstrap_mean_ci makes with seed 0
    means = sorted(sum(values[i] for i in row) / 5 for row in idx)
    low, high = stats.bootstrap_mean_ci(values)
    assert low == pytest.approx(_percentile(means, 2.5), abs=1e-12)
    assert high == pytest.approx(_percentile(means, 97.5), abs=1e-12)


def test_bootstrap_ci_contains_the_mean_narrows_with_n_and_works_per_column():
    rng = np.random.default_rng(2)
    small, large = rng.normal(10, 3, size=5), rng.normal(10, 3, size=80)
    (a, b), (c, d) = stats.bootstrap_mean_ci(small), stats.bootstrap_mean_ci(large)
    assert a < small.mean() < b and c < large.mean() < d
    assert d - c < (b - a) / 2  # width ~ 1/sqrt(n): 16x the seeds, about a quarter of the width
    assert stats.bootstrap_mean_ci(small, level=0.5)[1] - stats.bootstrap_mean_ci(small, level=0.5)[0] < b - a
    curves = rng.normal(size=(4, 3))  # [seeds, steps]: each column is bootstrapped with the same resampled seeds
    low, high = stats.bootstrap_mean_ci(curves)
    for j in range(3):
        assert (low[j], high[j]) == pytest.approx(stats.bootstrap_mean_ci(curves[:, j]))
    with pytest.raises(ValueError, match="at least one value"):
        stats.bootstrap_mean_ci([])


def test_permutation_test_exact_by_hand():
    # [1, 2] vs [3, 4]: the 6 ways to pick a's two values give mean differences -2, -1, 0, 0, 1, 2; |-2| >= 2 twice.
    assert stats.permutation_test([1, 2], [3, 4]) == (pytest.approx(2 / 6), pytest.approx(2 / 6), True, 6)
    # [1, 2] vs [4]: splits {1,2}|{4}: 2.5, {1,4}|{2}: 0.5, {2,4}|{1}: 2.0; only the observed one reaches 2.5.
    assert stats.permutation_test([1, 2], [4]) == (pytest.approx(1 / 3), pytest.approx(1 / 3), True, 3)
    # 3 vs 3 seeds: 20 splits, only the observed one and its mirror are as extreme: p = 0.1 is the smallest possible.
    assert stats.permutation_test([0, 0, 0], [1, 1, 1]) == (pytest.approx(0.1), pytest.approx(0.1), True, 20)


def test_permutation_test_identical_samples_give_p_one():
    assert stats.permutation_test([5.0, 5.0, 5.0], [5.0, 5.0]).p_value == 1.0
    assert stats.permutation_test([0.1, 0.2, 0.3], [0.3, 0.2, 0.1]).p_value == 1.0  # equal means, sums in any order
    assert stats.permutation_test([4.0], [9.0]).p_value == 1.0  # one seed each: both splits are as extreme


def test_permutation_test_equals_naive_enumeration():
    rng = np.random.default_rng(3)
    a, b = list(rng.normal(size=4)), list(rng.normal(0.5, 1, size=3))
    pooled = a + b
    observed = abs(sum(a) / 4 - sum(b) / 3)
    count = total = 0
    for members in itertools.combinations(range(7), 4):
        left = [pooled[i] for i in members]
        right = [pooled[i] for i in range(7) if i not in members]
        count += abs(sum(left) / 4 - sum(right) / 3) >= observed - 1e-12
        total += 1
    assert stats.permutation_test(a, b) == (pytest.approx(count / total), pytest.approx(1 / 35), True, 35)


def test_permutation_test_random_permutations_approximate_the_exact_p():
    rng = np.random.default_rng(4)
    a, b = rng.normal(size=6), rng.normal(0.8, 1, size=6)
    exact = stats.permutation_test(a, b)  # 924 splits
    drawn = stats.permutation_test(a, b, exact_limit=0)
    assert exact.exact and not drawn.exact and drawn.n_splits == 20_000
    assert drawn.p_value == pytest.approx(exact.p_value, abs=0.02)  # standard error <= 0.0036
    assert drawn.p_min == pytest.approx(1 / 20_001)
    assert stats.permutation_test(a, b, exact_limit=0) == drawn  # fixed seed


def test_summarize_and_compare():
    s = stats.summarize([1.0, 2.0, 3.0], zoo=2.0, wall_s=[10, 20, 30], steps_per_s=[1, 2, 3])
    assert (s["seeds"], s["mean"], s["seeds_reached"], s["reached"], s["wall_s"]) == (3, 2.0, 2, True, 20.0)
    assert s["std"] == pytest.approx(math.sqrt(2 / 3))  # population std, as the table always showed
    assert s["ci"][0] < 2.0 < s["ci"][1] and s["per_seed"] == [1.0, 2.0, 3.0]
    assert stats.summarize([5.0], zoo=6.0)["ci"] is None
    reference = stats.summarize([2.0, 2.0], zoo=2.0)
    versus = stats.compare(s, reference)
    assert versus["inside"] is True and versus["ratio"] == 1.0 and versus["test"].p_value == 1.0
    assert stats.compare(s, stats.summarize([4.0], zoo=2.0))["inside"] is None  # one seed: no interval
    assert stats.compare(s, stats.summarize([-1.0, 1.0], zoo=2.0))["ratio"] is None  # mean 0


def test_results_zoo_schedules_translate_lin_strings_only():
    results = _load("results")
    hp = results._zoo_schedules(results.TASKS["cartpole"].sb3)
    assert hp["learning_rate"](1.0) == pytest.approx(1e-3) and hp["learning_rate"](0.25) == pytest.approx(2.5e-4)
    assert hp["clip_range"](0.5) == pytest.approx(0.1) and hp["n_steps"] == 32
    policy = results._zoo_schedules(results.TASKS["hopper"].sb3)["policy_kwargs"]
    assert policy["activation_fn"] == "relu"  # kppo.PPO takes the name; SB3 gets torch.nn.ReLU


def _record(task: str, framework: str, seed: int, final: float) -> dict:
    curve = {"steps": [50, 100], "eval_mean": [final / 2, final], "eval_std": [0.0, 0.0]}
    return dict(
        task=task,
        framework=framework,
        seed=seed,
        final_mean=final,
        final_std=0.0,
        curve=curve,
        wall_s=10.0,
        steps_per_s=100.0,
    )


def test_results_report_table_and_figures(tmp_path):
    records = tmp_path / "records"
    finals = {"kppo": [97.0, 99.0, 98.0], "kppo_ppo": [80.0], "sb3": [60.0, 95.0, 70.0]}
    for framework, values in finals.items():
        for seed, final in enumerate(values):
            path = records / "mountaincar_continuous" / f"{framework}-seed{seed}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(_record("mountaincar_continuous", framework, seed, final)))
    doc = tmp_path / "results.md"
    doc.write_text("before\n<!-- RESULTS-TABLE -->\nold\n<!-- /RESULTS-TABLE -->\nafter\n")
    out = _bench(
        "results.py",
        "report",
        "--records",
        str(records),
        "--doc",
        str(doc),
        "--figures",
        str(tmp_path / "figures"),
        timeout=120,
    )
    text = doc.read_text()
    assert text.startswith("before\n<!-- RESULTS-TABLE -->\n| task |")
    assert text.endswith("<!-- /RESULTS-TABLE -->\nafter\n")
    assert "old" not in text and out.strip() in text
    assert [p.name for p in (tmp_path / "figures").iterdir()] == ["results_mountaincar_continuous.png"]
    kppo, kppo_ppo, sb3 = _rows(out, "MountainCarContinuous-v0")
    # kppo 97/99/98 vs SB3 60/95/70: of the 20 splits only the observed one and its mirror differ by 23 -> p = 0.1;
    # SB3's interval ends at 95 (all three resampled seeds 95: 1/27 > 2.5% of the resamples), below kppo's 98.
    assert kppo[3:6] == ["kppo (configs/)", "3", "98.0"] and kppo[10:13] == ["0.1 (min 0.1)", "no", "1.31"]
    # kppo.PPO 80 vs 60/95/70: single-value splits differ by (4x - 305) / 3 = 5, -21.7, 25, -8.3 -> p = 1, min 1/4.
    assert kppo_ppo[4:7] == ["1", "80.0", "—"] and kppo_ppo[10:13] == ["1 (min 0.25)", "yes", f"{80 / 75:.2f}"]
    assert sb3[3] == "SB3 (zoo args)" and sb3[10:13] == ["—", "—", "—"]
    assert _rows(out, "Hopper-v5")[0][4:6] == ["0", "not run"]


def test_results_kppo_ppo_runs_a_tiny_budget(tmp_path):
    """run_kppo_ppo end to end on CartPole at 1,024 steps (8 envs x 32 steps x 4 rollouts), in a fresh interpreter
    (it sets TensorFlow's thread pools before TensorFlow starts)."""
    script = tmp_path / "tiny.py"
    script.write_text(
        "import dataclasses, importlib.util, json, sys\n"
        f"spec = importlib.util.spec_from_file_location('results', {str(ROOT / 'benchmarks' / 'results.py')!r})\n"
        "results = sys.modules['results'] = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(results)\n"
        "task = dataclasses.replace(results.TASKS['cartpole'], budget=1024, eval_rounds=2, eval_episodes=2)\n"
        "print(json.dumps(results.run_kppo_ppo(task, 0)))\n"
    )
    out = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    record = json.loads(out.stdout.strip().splitlines()[-1])
    assert record["curve"]["steps"] == [512, 1024] and record["total_steps"] == 1024  # one mid-run round, the final
    assert len(record["returns"]) == 2 and record["final_mean"] == pytest.approx(np.mean(record["returns"]))
    assert record["curve"]["eval_mean"][-1] == record["final_mean"] and record["threads"] == 1


def test_cnn_speed_counts_a_rollouts_image_bytes():
    cnn = _load("cnn_settings")
    assert cnn.rollout_bytes(8, 128, (84, 84, 4), 1) == 8 * 128 * 84 * 84 * 4  # 28.9 MB


@pytest.mark.slow
def test_cnn_floor_benchmark_bounds_the_minatar_setting():
    (row,) = _rows(
        _bench("cnn_floor.py", "--settings", "minatar", "--threads", "1"), "MinAtar Breakout, 8 envs, SmallCNN"
    )
    steps, gradient_steps, env_s, network_s, bound = row[2], int(row[3]), float(row[4]), float(row[5]), row[6]
    assert (steps, gradient_steps) == ("8,192", 128) and env_s > 0 and network_s > 0
    assert float(bound.replace(",", "")) == pytest.approx(8192 / (env_s + network_s), rel=0.05)  # rounded seconds


@pytest.mark.slow
def test_cnn_speed_worker_trains_kppo_on_ale_pys_vector_env():
    pytest.importorskip("ale_py")
    out = _bench("cnn_speed.py", "--worker", "kppo", "--setting", "pong_ale", "--rollouts", "1")
    result = json.loads(out.strip().splitlines()[-1])
    assert result["env_steps"] == 1024 and result["observation_space"] == "Box(0, 255, (4, 84, 84), uint8)"
    assert "AtariVectorEnv" in result["env_source"] and result["extractor"] == "NatureCNN"


@pytest.mark.slow  # ~1 min: 2 x 2 single runs, 2 populations, 2 floors, each a fresh interpreter
def test_gym_population_benchmark_reports_ratios_and_the_floor(tmp_path):
    out = tmp_path / "out.json"
    _bench("gym_population.py", "--members", "2", "--scale", "0.01", "--json", str(out), timeout=600)
    rows = json.loads(out.read_text())["rows"]
    assert [r["task"] for r in rows] == ["cartpole", "pendulum"]
    for row in rows:
        assert row["ratio"] > 0 and row["floor_ratio"] > 0 and len(row["population_final"]) == 2


# --- the shelf: every script on a page, every table with its script and command, one harness -------------------------

PAGES = sorted((ROOT / "docs" / "benchmarks").glob("*.md"))
SCRIPTS = sorted((ROOT / "benchmarks").glob("*.py"))
COMMAND = re.compile(r"(?:^|[\s`(])(?:\S*/)?python3? (?:-m \S+ )?(?:\S+ )*?benchmarks/(\w+)\.py", re.M)
DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")


def _without_code(text: str) -> list[str]:
    """The page's lines, with those inside fenced or indented code blocks replaced by empty ones."""
    lines, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            lines.append("")
        else:
            lines.append("" if fenced or line.startswith("    ") else line)
    return lines


def _tables(page: Path) -> list[tuple[str, str]]:
    """Each Markdown table of `page` as (its heading row, the text of its section up to it: from the heading above)."""
    lines = _without_code(page.read_text())
    raw = page.read_text().splitlines()
    out, section_start = [], 0
    for i, line in enumerate(lines):
        if line.startswith("#"):
            section_start = i
        starts = line.startswith("|") and i + 1 < len(lines) and lines[i + 1].startswith("|-")
        if starts and not (i and lines[i - 1].startswith("|")):
            out.append((line, "\n".join(raw[section_start:i])))
    return out


def test_every_script_is_cited_by_a_benchmark_page():
    text = "\n".join(page.read_text() for page in PAGES)
    uncited = [script.name for script in SCRIPTS if f"benchmarks/{script.name}" not in text]
    assert not uncited, f"scripts no page of docs/benchmarks/ cites (cite them or remove them): {uncited}"


def test_every_table_names_its_script_and_the_command_with_date_load_and_versions():
    for page in PAGES:
        for header, section in _tables(page):
            if header.startswith("| page |"):  # the overview's list of pages
                continue
            where = f"{page.name}, table {header[:60]!r}"
            named = set(re.findall(r"benchmarks/(\w+)\.py", section))
            commands = set(COMMAND.findall(section))
            assert named, f"{where}: its section names no benchmarks/<script>.py"
            assert commands & named, f"{where}: no command (`python benchmarks/<script>.py ...`) of {sorted(named)}"
            assert DATE.search(section), f"{where}: no date (YYYY-MM-DD) in its section"
            assert "load" in section, f"{where}: no load average in its section"
            assert re.search(r"(?i)tensorflow\s+\d", section), f"{where}: no TensorFlow version in its section"


def test_pages_lead_with_the_result_and_keep_one_earlier_section():
    for page in PAGES:
        text = page.read_text()
        lines = _without_code(text)
        earlier = [i for i, line in enumerate(lines) if line.startswith("#") and "earlier results" in line.lower()]
        assert len(earlier) <= 1, f"{page.name}: more than one section of earlier results"
        tables = [i for i, line in enumerate(lines) if line.startswith("|")]
        assert not earlier or (tables and tables[0] < earlier[0]), f"{page.name}: history before the first table"


def test_lists_start_a_block_of_their_own():
    """A list right under a paragraph line renders as part of the paragraph: a blank line must come before it."""
    for page in PAGES:
        lines = _without_code(page.read_text())
        for i, line in enumerate(lines[1:], 1):
            if re.match(r"(- |\d+\. )", line):
                above = lines[i - 1]
                ok = not above.strip() or re.match(r"(- |\d+\. |\s)", above)
                assert ok, f"{page.name}:{i + 1}: a list item right under a paragraph line"


INTERNAL = re.compile(
    r"(?i)\bsessions?\b|\bissues?\b|\bhelper's\b|\bcommits?\b|\bthis project\b|\blent\b"
    r"|\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b"  # a commit hash: hex digits, letters and digits both
)


def test_pages_and_script_docstrings_say_nothing_about_how_the_project_is_made():
    for path in [*PAGES, *SCRIPTS]:
        text = path.read_text()
        if path.suffix == ".py":
            text = (ast.get_docstring(ast.parse(text)) or "") + "\n".join(
                line for line in text.splitlines() if line.lstrip().startswith("#")
            )
        found = INTERNAL.findall(text)
        assert not found, f"{path.relative_to(ROOT)}: {found}"


def test_every_script_prints_through_the_harness():
    """Scripts (files with a `__main__` block) import benchmarks/harness.py, or their docstring says why not."""
    for script in SCRIPTS:
        text = script.read_text()
        if "__main__" not in text or script.name == "harness.py":
            continue
        uses = re.search(r"^\s*(import harness|from harness import)|_load_module\([^)]*harness", text, re.M)
        assert uses or "harness: not used" in text, f"{script.name}: neither imports the harness nor says why not"


harness = _load("harness")


def test_side_by_side_takes_the_reference_row_over_each_row():
    rows = [
        {"framework": "kppo", "total_s": 4.0, "steps_per_s": 250_000.0},
        {"framework": "sb3", "total_s": 16.0, "steps_per_s": 31_250.0},
        {"framework": "broken", "total_s": 0.0, "steps_per_s": None},
    ]
    table = harness.side_by_side(
        rows,
        [("framework", "framework", str), ("total s", "total_s", 1), ("steps/s", "steps_per_s", 0)],
        [("kppo total / this", "total_s"), ("kppo steps/s / this", "steps_per_s")],
    )
    assert table.splitlines() == [
        "| framework | total s | steps/s | kppo total / this | kppo steps/s / this |",
        "|---|---|---|---|---|",
        "| kppo | 4.0 | 250,000 | 1.00 | 1.00 |",
        "| sb3 | 16.0 | 31,250 | 0.25 | 8.00 |",  # 4 / 16 and 250,000 / 31,250
        "| broken | 0.0 | n/a | n/a | n/a |",  # zero and missing values: no ratio
    ]
    assert harness.side_by_side(rows[:2], [("framework", "framework", str)], [("r", "total_s")], reference=1).endswith(
        "| sb3 | 1.00 |"
    )


def test_machine_header_names_date_cpu_load_versions_and_command():
    first, command = harness.machine_header({"stable-baselines3": "9.9.9"}, "numpy").splitlines()
    assert DATE.search(first) and harness.cpu_model() in first and "CPUs" in first and "load average" in first
    assert "tensorflow " in first and "keras " in first and "stable-baselines3 9.9.9" in first and "numpy " in first
    assert command.startswith("`python ") and command.endswith("`")
    assert harness.markdown_table(["a", "b"], [[1, "x"]], align="lr") == "| a | b |\n|---|--:|\n| 1 | x |"
