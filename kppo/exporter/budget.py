"""A device budget for `kppo export --budget flash=64KiB,ram=16KiB[,latency=LIMIT]`: the budget read from its text
(`parse_budget`), each candidate artifact's fit (`fits`, `over`), the Pareto front of the candidates (`pareto`), the
choice among them (`choose`: the best closed-loop return among those that fit, then the smallest) and the refusal
naming the closest candidate's numbers when none fits.

flash is the artifact's size in bytes, ram TFLite Micro's arena (`kppo.exporter.micro`: a candidate TFLite Micro
cannot run has none, so it fits no ram budget), latency the median time of one invoke of the artifact in LiteRT on
this machine (a host's figure, a proxy for the device's).
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

UNITS = {"": 1, "b": 1, "kb": 1000, "kib": 1024, "mb": 1000**2, "mib": 1024**2}
TIME_UNITS = {"us": 1.0, "µs": 1.0, "ms": 1000.0, "s": 1e6}
KEYS = ("flash", "ram", "latency")
EXAMPLE = "flash=64KiB,ram=16KiB,latency=1ms"


class Budget(NamedTuple):
    """Limits a chosen artifact must meet (None: no limit)."""

    flash_bytes: int | None
    ram_bytes: int | None
    latency_us: float | None


def _bad(text: str, why: str) -> ValueError:
    return ValueError(f"--budget: expected KEY=VALUE pairs of {', '.join(KEYS)} (e.g. {EXAMPLE}), got {text!r}: {why}")


def parse_budget(text: str) -> Budget:
    """`flash=64KiB,ram=16KiB,latency=LIMIT` -> a `Budget`. Sizes in B, KB, KiB, MB or MiB (a bare number: bytes),
    latency in us, ms or s; each key at most once, one at least. A one-line ValueError naming the flag otherwise."""
    values: dict[str, float] = {}
    for item in str(text).split(","):
        key, sep, value = item.strip().partition("=")
        key = key.strip().lower()
        if not sep or key not in KEYS:
            raise _bad(text, f"{item.strip()!r} is no {'/'.join(KEYS)}=VALUE")
        if key in values:
            raise _bad(text, f"{key} given twice")
        values[key] = _amount(text, key, value.strip())
    return Budget(
        None if "flash" not in values else int(values["flash"]),
        None if "ram" not in values else int(values["ram"]),
        values.get("latency"),
    )


def _amount(text: str, key: str, value: str) -> float:
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([a-zµ]*)", value.lower())
    units = TIME_UNITS if key == "latency" else UNITS
    if match is None or match.group(2) not in units:
        wanted = "a time in us, ms or s" if key == "latency" else "a size in B, KB, KiB, MB or MiB"
        raise _bad(text, f"{key}: expected {wanted}, got {value!r}")
    amount = float(match.group(1)) * units[match.group(2)]
    if amount <= 0:
        raise _bad(text, f"{key}: expected a positive amount, got {value!r}")
    return amount


def figures(candidate: dict[str, Any]) -> dict[str, float | None]:
    """A candidate's (its report's) flash, ram and latency."""
    return {
        "flash": candidate["size_bytes"],
        "ram": candidate.get("arena_bytes"),
        "latency": candidate["latency"]["median_invoke_us"],
    }


def over(candidate: dict[str, Any], budget: Budget) -> dict[str, float]:
    """How far each limit is exceeded, as figure / limit (> 1), per key; a missing figure (no arena) is inf."""
    limits = {"flash": budget.flash_bytes, "ram": budget.ram_bytes, "latency": budget.latency_us}
    out = {}
    for key, limit in limits.items():
        value = figures(candidate)[key]
        if limit is None:
            continue
        ratio = float("inf") if value is None else value / limit
        if ratio > 1:
            out[key] = ratio
    return out


def fits(candidate: dict[str, Any], budget: Budget) -> bool:
    return not over(candidate, budget)


def score(candidate: dict[str, Any]) -> float:
    """What the choice maximizes: the artifact's closed-loop mean return, else (no env) minus its parity error."""
    loop = candidate.get("closed_loop")
    if loop is not None:
        return float(loop["artifact"]["mean"])
    return -float(candidate.get("parity_max_error", 0.0))


def pareto(candidates: list[dict[str, Any]]) -> list[bool]:
    """Per candidate: on the Pareto front (no other candidate is at least as good in return, size, arena and
    latency and better in one); a candidate without an arena is behind every one with one."""

    def key(c):
        f = figures(c)
        return (-score(c), f["flash"], float("inf") if f["ram"] is None else f["ram"], f["latency"])

    keys = [key(c) for c in candidates]
    return [not any(all(o <= s for o, s in zip(other, own)) and other != own for other in keys) for own in keys]


def describe(candidate: dict[str, Any]) -> str:
    f = figures(candidate)
    ram = "no TFLite Micro arena" if f["ram"] is None else f"ram {f['ram']:,} B"
    return f"{candidate['quantization']}: flash {f['flash']:,} B, {ram}, latency {f['latency']:.1f} us"


def choose(candidates: list[dict[str, Any]], budget: Budget) -> int:
    """The index of the best-return candidate that fits (ties: the smallest); a one-line ValueError naming the
    closest candidate's numbers (the one whose worst excess over a limit is least) when none fits."""
    fitting = [i for i, c in enumerate(candidates) if fits(c, budget)]
    if fitting:
        return max(fitting, key=lambda i: (score(candidates[i]), -candidates[i]["size_bytes"]))
    closest = min(range(len(candidates)), key=lambda i: max(over(candidates[i], budget).values()))
    excess = over(candidates[closest], budget)
    limits = {"flash": budget.flash_bytes, "ram": budget.ram_bytes, "latency": budget.latency_us}
    missed = ", ".join(f"{key} over {limits[key]:,.0f}{' us' if key == 'latency' else ' B'}" for key in excess)
    raise ValueError(
        f"--budget: expected an artifact within {budget_text(budget)}, got none of {len(candidates)} candidates; the "
        f"closest, {describe(candidates[closest])} ({missed})"
    )


def budget_text(budget: Budget) -> str:
    parts = []
    if budget.flash_bytes is not None:
        parts.append(f"flash {budget.flash_bytes:,} B")
    if budget.ram_bytes is not None:
        parts.append(f"ram {budget.ram_bytes:,} B")
    if budget.latency_us is not None:
        parts.append(f"latency {budget.latency_us:,.1f} us")
    return ", ".join(parts)


def candidate_table(candidates: list[dict[str, Any]], budget: Budget, chosen: int | None) -> list[dict[str, Any]]:
    """The report's Pareto table: one row per candidate."""
    front = pareto(candidates)
    rows = []
    for i, candidate in enumerate(candidates):
        loop = candidate.get("closed_loop")
        f = figures(candidate)
        rows.append(
            {
                "quantization": candidate["quantization"],
                "return": None if loop is None else loop["artifact"]["mean"],
                "return_ci95": None if loop is None else loop["artifact"]["ci95"],
                "degraded": None if loop is None else loop["degraded"],
                "size_bytes": f["flash"],
                "arena_bytes": f["ram"],
                "latency_us": f["latency"],
                "fits": fits(candidate, budget),
                "pareto": front[i],
                "chosen": i == chosen,
            }
        )
    return rows
