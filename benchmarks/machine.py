"""What every benchmark records about the machine it ran on (imported by the scripts in this folder, which run with
it on `sys.path[0]`)."""

from __future__ import annotations

import platform
from importlib import metadata
from pathlib import Path


def cpu_model() -> str:
    """The "model name" line of /proc/cpuinfo (else the platform's processor string)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def package_versions(*names: str) -> dict[str, str]:
    """The installed version of each distribution in `names` that is installed."""
    out = {}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out


def run_record(**fields: object) -> dict:
    """The header of a benchmark's JSON record: date and time, CPU model, cores and load average at the start, then
    `fields`; `finish_record` adds the load average at the end and writes it."""
    import os
    import time

    return {
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "load_average_start": os.getloadavg(),
        **fields,
    }


def finish_record(record: dict, path: str | None) -> None:
    """Adds the load average at the end; writes `record` as JSON to `path` (its folder made) when one is given."""
    import json
    import os

    record["load_average_end"] = os.getloadavg()
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(record, indent=1) + "\n")
