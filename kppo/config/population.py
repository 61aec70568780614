"""Populations of Configs: the fields members may differ in (`SWEEPABLE`; `Config.sweep` grids over them), the check
that a list of Configs can train as one population (`check_members`) and what its members share (`shape_key`)."""

from __future__ import annotations

from collections.abc import Sequence

from kppo.config.fields import ConfigFields

__all__ = ["SWEEPABLE", "check_members", "shape_key"]

#: The fields a population's members may differ in (besides `seed`); everything else is shared (shapes, networks).
SWEEPABLE = ("learning_rate", "ent_coef", "clip_range", "gamma", "gae_lambda", "vf_coef", "max_grad_norm")

#: A population steps a functional Adam (`kppo.core.optimizers.adam_step`) with these settings, the Config's defaults.
FUNCTIONAL_ADAM = ("optimizer", "weight_decay", "adam_beta_1", "adam_beta_2", "optimizer_eps")


def check_members(configs: Sequence[ConfigFields]) -> None:
    """One-line ValueError unless the members differ only in `seed` and the sweepable fields (shapes are shared),
    run on one device and step Adam with its defaults."""
    if not configs:
        raise ValueError("seed: expected at least one population member, got none")
    first = configs[0].to_dict()
    for config in configs[1:]:
        for name, value in config.to_dict().items():
            if name not in SWEEPABLE and name != "seed" and value != first[name]:
                raise ValueError(
                    f"{name}: population members may differ only in seed and {', '.join(SWEEPABLE)}; "
                    f"got {first[name]!r} and {value!r}"
                )
    if configs[0].distribute != "none":
        raise ValueError(f"distribute: a population runs on one device, expected 'none', got {configs[0].distribute!r}")
    _check_functional_adam(configs[0])


def _check_functional_adam(config: ConfigFields) -> None:
    """Other optimizers, and Adam with other settings, are refused: train each seed on its own."""
    fields = type(config).__dataclass_fields__
    for name in FUNCTIONAL_ADAM:
        default = fields[name].default
        if getattr(config, name) != default:
            raise ValueError(
                f"{name}: a population steps a functional Adam with its defaults, expected {default!r}, got "
                f"{getattr(config, name)!r}; train each seed on its own"
            )


def shape_key(config: ConfigFields) -> tuple:
    """What members must share to train as one population: every field but the seed and the sweepable ones."""
    return tuple(sorted((k, repr(v)) for k, v in config.to_dict().items() if k not in SWEEPABLE and k != "seed"))
