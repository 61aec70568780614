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
