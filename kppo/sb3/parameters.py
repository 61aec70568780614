"""SB3's `get_parameters` / `set_parameters` over a kppo agent (stable_baselines3/common/base_class.py).

`get_parameters()` is {"policy": SB3's `policy.state_dict()` (SB3's names, torch's layouts, numpy arrays: what SB3
programs index, "mlp_extractor.value_net.0.bias"), "policy.optimizer": kppo's optimizer variables by their Keras
path}. The optimizer group is kppo's own, not torch's `{"state", "param_groups"}`: kppo's Adam keeps its moments
under the variables' names and SB3's parameter order is not kppo's, so its round trip is kppo to kppo. A policy
with a user's Keras extractor has no SB3 names: its "policy" group is kppo's Keras paths ("actor/...").

`set_parameters` takes either naming of "policy" (SB3's names hold no "/", Keras paths do), as torch's
`load_state_dict(strict=exact_match)`: missing or unexpected tensors and other shapes are torch's RuntimeError
(`StateDictError`, a ValueError too), with torch's words first; groups other than SB3's two are SB3's ValueError.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kppo.agent.agent import Agent
from kppo.core.errors import sorted_keys
from kppo.sb3.contracts import StateDictError
from kppo.sb3.saves.sb3_weights import assign_sb3_weights, extractor_aliases, sb3_state_dict

__all__ = ["PARAMETER_GROUPS", "assign_parameters", "get_parameters", "numpy_parameters", "parameters"]

#: SB3's `get_parameters` keys: the networks, and their optimizer.
PARAMETER_GROUPS = ("policy", "policy.optimizer")


def _by_path(variables: list, drop_first: bool = False) -> dict[str, Any]:
    """{Keras variable path: variable}; `drop_first` leaves out the first component (an optimizer's own name, which
    Keras numbers per instance: "torch_adam_3/...")."""
    return {(v.path.split("/", 1)[-1] if drop_first else v.path): v for v in variables}


def parameters(agent: Agent) -> dict[str, dict[str, Any]]:
    """SB3's two groups of `agent`'s variables under kppo's names, each {variable path: variable}."""
    return {"policy": _by_path(agent.variables), "policy.optimizer": _by_path(agent.optimizer.variables, True)}


def numpy_parameters(agent: Agent) -> dict[str, dict[str, np.ndarray]]:
    """`parameters(agent)` as numpy arrays (kppo's names)."""
    return {
        group: {name: np.asarray(v.numpy()) for name, v in variables.items()}
        for group, variables in parameters(agent).items()
    }


def get_parameters(agent: Agent) -> dict[str, dict[str, np.ndarray]]:
    """SB3's `get_parameters`: the policy under SB3's names where it has them (see the module docstring)."""
    out = numpy_parameters(agent)
    try:
        out["policy"] = sb3_state_dict(agent)
    except ValueError:  # a user's extractor: no SB3 names, kppo's paths stay
        pass
    return out


def _torch_error(missing: list, unexpected: list, help_text: str) -> StateDictError:
    """torch's `load_state_dict` message (on one line), then kppo's help."""
    parts = []
    if missing:
        parts.append("Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing) + ".")
    if unexpected:
        parts.append("Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in unexpected) + ".")
    return StateDictError(f"Error(s) in loading state_dict for ActorCriticPolicy: {' '.join(parts)} ({help_text})")


def _kppo_updates(targets: dict[str, Any], values: dict, group: str, exact_match: bool) -> list:
    """(variable, array) pairs of a group under kppo's names, checked as torch checks a state_dict."""
    expected, given = set(targets), set(values)
    missing, unexpected = sorted_keys(expected - given), sorted_keys(given - expected)
    if unexpected or (exact_match and missing):
        shown = missing if exact_match else []
        raise _torch_error(
            shown,
            unexpected,
            f"params[{group!r}]: names of parameters do not match the model's: missing {shown}, unexpected "
            f"{unexpected}",
        )
    updates = []
    for name, value in values.items():
        value = np.asarray(value)
        shape = tuple(targets[name].shape)
        if tuple(value.shape) != shape:
            raise StateDictError(
                f"size mismatch for {name}: copying a param with shape {tuple(value.shape)} from checkpoint, the shape "
                f"in current model is {shape} (params[{group!r}][{name!r}]: expected shape {shape}, got "
                f"{tuple(value.shape)})"
            )
        updates.append((targets[name], value))
    return updates


def _sb3_policy(agent: Agent, values: dict, exact_match: bool) -> dict[str, np.ndarray]:
    """The full SB3 state_dict to assign: `values` (SB3's names) over the agent's own where `exact_match` is False
    (torch's `strict=False`: the tensors given replace theirs, an extractor's under each name SB3 gives it)."""
    current = sb3_state_dict(agent)
    given = {name: np.asarray(getattr(v, "numpy", lambda v=v: v)()) for name, v in values.items()}
    missing, unexpected = sorted_keys(set(current) - set(given)), sorted_keys(set(given) - set(current))
    if unexpected or (exact_match and missing):
        raise _torch_error(
            missing if exact_match else [],
            unexpected,
            f"params['policy']: expected SB3's parameter names of this policy (policy.state_dict()), got "
            f"{len(unexpected)} unknown" + (f" and {len(missing)} missing" if exact_match and missing else ""),
        )
    for name, value in given.items():
        if tuple(value.shape) != tuple(current[name].shape):
            raise StateDictError(
                f"size mismatch for {name}: copying a param with shape {tuple(value.shape)} from checkpoint, the shape "
                f"in current model is {tuple(current[name].shape)} (params['policy'][{name!r}]: expected shape "
                f"{tuple(current[name].shape)} in torch's layout, got {tuple(value.shape)})"
            )
    merged, same = dict(current), extractor_aliases(agent)
    for name, value in given.items():
        head, _, rest = name.partition(".")
        for alias in [f"{other}.{rest}" for other in same] if head in same else [name]:
            if alias == name or alias not in given:  # a name given itself keeps its own tensor
                merged[alias] = value
    return merged


def _check_groups(params: dict, exact_match: bool, groups: tuple[str, ...]) -> None:
    unknown = sorted_keys(set(params) - set(PARAMETER_GROUPS))
    if unknown:
        raise ValueError(f"params: expected groups among {list(PARAMETER_GROUPS)}, got {unknown}")
    for group, values in params.items():
        if not isinstance(values, dict):
            raise ValueError(
                f"params[{group!r}]: expected a dict of parameter name -> array, got {type(values).__name__}"
            )
    if exact_match and set(params) != set(groups):
        raise ValueError(  # SB3's words, then kppo's
            f"Names of parameters do not match agents' parameters: expected {set(groups)}, got "
            f"{set(params)} (params: expected the groups {list(groups)}, got {sorted_keys(params)}; "
            f"exact_match=False sets a subset)"
        )
    optimizer = params.get("policy.optimizer", {})
    if {"state", "param_groups"} <= set(optimizer):
        raise ValueError(
            "params['policy.optimizer']: expected kppo's optimizer variables {name: array} (get_parameters()'s), got "
            "torch's optimizer state_dict (state, param_groups); leave the group out with exact_match=False to keep "
            "kppo's optimizer state"
        )


def assign_parameters(
    agent: Agent, params: dict[str, dict[str, Any]], exact_match: bool, groups: tuple[str, ...] = PARAMETER_GROUPS
) -> None:
    """Assigns `params` (`get_parameters`' layout, "policy" under SB3's names or kppo's) to `agent`'s variables;
    with `exact_match`, every group of `groups` and every variable of each; nothing is assigned when a check
    fails."""
    _check_groups(params, exact_match, groups)
    targets = parameters(agent)
    updates: list = []
    sb3_policy = None
    for group, values in params.items():
        if group == "policy" and values and not any("/" in str(name) for name in values):
            sb3_policy = _sb3_policy(agent, values, exact_match)
        else:
            updates += _kppo_updates(targets[group], values, group, exact_match)
    if sb3_policy is not None:
        assign_sb3_weights(agent, sb3_policy, "params['policy']")
    for variable, value in updates:
        variable.assign(value.astype(variable.dtype))
