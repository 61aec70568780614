"""Layer 0: `Config`, every option validated, with rex and SB3 spellings; option values and YAML (`values`)."""

from kppo.config.options import Config, Sweep

__all__ = ["Config", "Sweep"]
