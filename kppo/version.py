"""kppo's version (one place: the package, checkpoints, exports and reports read it from here)."""

__version__ = "0.1.0"
