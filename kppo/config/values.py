"""Option values as they arrive from YAML, the command line or Python: checked against a field's annotated type, with
one-line errors naming the field (`coerce`), and YAML read with errors naming the file and line (`read_text`,
`yaml_problem`)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any
from collections.abc import Callable

import yaml


def as_bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    raise ValueError(f"{name}: expected true or false, got {value!r}")


def _as_int(name: str, value: Any) -> int:
    if name == "verbose" and isinstance(value, bool):  # rex's VERBOSE is a bool
        return int(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not float(value).is_integer():
        raise ValueError(f"{name}: expected an integer, got {value!r}")
    return int(value)


def _as_float(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{name}: expected a finite number, got {value!r}")
    return float(value)


def _as_positive_ints(name: str, value: Any) -> tuple[int, ...]:
    if not isinstance(value, (list, tuple)) or not all(
        isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in value
    ):
        raise ValueError(f"{name}: expected a list of positive integers, got {value!r}")
    return tuple(int(v) for v in value)


def _as_names(name: str, value: Any) -> tuple[str, ...]:
    """A list of strings (device names, Dict keys)."""
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{name}: expected a list of names (strings), got {value!r}")
    return tuple(value)


def _as_str(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{name}: expected a string, got {value!r}")
    return value


#: annotation -> the check of one value (it returns the value coerced, or raises a one-line ValueError)
_CHECKS: dict[str, Callable[[str, Any], Any]] = {
    "bool": as_bool,
    "int": _as_int,
    "float": _as_float,
    "tuple[int, ...]": _as_positive_ints,
    "tuple[str, ...]": _as_names,
    "str": _as_str,
}


def coerce(name: str, type_name: Any, value: Any) -> Any:
    """Checks one value against its annotated type ("int", "float", "bool", "str", "... | None")."""
    type_name = str(type_name)
    if type_name.endswith("| None"):
        if value is None:
            return None
        type_name = type_name[: -len("| None")].strip()
    if type_name not in _CHECKS:
        raise TypeError(f"{name}: unsupported annotation {type_name}")  # a kppo bug, not user input
    if isinstance(value, str) and type_name in ("int", "float"):
        try:  # YAML 1.1 reads "1e5" and "1.0e6" (its exponents need a dot and a sign) as strings; so does --set
            value = float(value)
        except ValueError:
            raise ValueError(
                f"{name}: expected {'an integer' if type_name == 'int' else 'a number'}, got {value!r}"
            ) from None
    return _CHECKS[type_name](name, value)


def yaml_problem(err: yaml.YAMLError) -> str:
    """'at line L, column C: problem (context at line L2, column C2)' of a PyYAML error, without its source snippets."""
    mark, problem = getattr(err, "problem_mark", None), getattr(err, "problem", None)
    if mark is None or not problem:
        return "(" + " ".join(str(err).replace(' in "<unicode string>",', " at").split()) + ")"
    text = f"at line {mark.line + 1}, column {mark.column + 1}: {problem}"
    context, where = getattr(err, "context", None), getattr(err, "context_mark", None)
    if context and where is not None:
        text += f" ({context} at line {where.line + 1}, column {where.column + 1})"
    return text


def read_text(path_or_text: str | Path) -> tuple[str, str]:
    """(text, how errors name it): a file's text and its quoted path, or YAML text itself and 'text'."""
    if isinstance(path_or_text, Path) or ("\n" not in path_or_text and ":" not in path_or_text):
        path = Path(path_or_text)
        name = repr(str(path))
        if not path.is_file():
            raise ValueError(f"config YAML: expected an existing file, got {name}")
        try:
            return path.read_text(encoding="utf-8"), name
        except UnicodeDecodeError as err:
            raise ValueError(
                f"config YAML {name}: expected UTF-8 text, got byte {err.object[err.start]:#04x} at offset {err.start}"
            ) from None
        except OSError as err:
            raise ValueError(f"config YAML {name}: expected a readable file, got {err.strerror}") from None
    return path_or_text, "text"
