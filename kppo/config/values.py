"""Option values as they arrive from YAML, the command line or Python: checked against a field's annotated type, with
one-line errors naming the field (`coerce`), and YAML read with errors naming the file and line (`read_text`,
`load_yaml`, `yaml_problem`)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any
from collections.abc import Callable

import yaml
from yaml.composer import ComposerError
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode


def printable(text: str) -> str:
    """`text` (a name the user gave, another library's message) with each character that is not printable escaped as
    in a repr: a line break of any kind (`\\x1e` and `\\u2028` included) would split kppo's one-line error."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def as_bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    raise ValueError(f"{name}: expected true or false, got {value!r}")


def _as_int(name: str, value: Any) -> int:
    if name == "verbose" and isinstance(value, bool):  # rex's VERBOSE is a bool
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return int(value)  # never through float: a 400-digit integer overflows it
    if not isinstance(value, float) or not value.is_integer():
        raise ValueError(f"{name}: expected an integer, got {value!r}")
    return int(value)


def _as_float(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not is_finite(value):
        raise ValueError(f"{name}: expected a finite number, got {value!r}")
    return float(value)


def is_finite(value: int | float) -> bool:
    """True for a number a float holds (an integer beyond 1.8e308 is not: `math.isfinite` would overflow on it)."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


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


#: Bounds on a YAML document that kppo reads (issue 39): deeper nesting overflows PyYAML's recursive composer (a
#: RecursionError), and aliases can expand a small file into billions of values ("billion laughs"), which anything
#: that walks or prints the result (an error message's repr) would then expand. kppo's files are a few levels deep.
MAX_YAML_DEPTH = 32
MAX_YAML_NODES = 100_000


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader (a tag never constructs a Python object) that also refuses nesting deeper than
    MAX_YAML_DEPTH, more than MAX_YAML_NODES values once aliases are expanded, recursive aliases and duplicate keys
    (PyYAML keeps the last one silently), each as a YAML error with its line; a scalar its constructors cannot read
    (a 5,000-digit integer, the date 2001-13-45, `!!bool maybe`) is a YAML error with its line too, not a bare
    ValueError, KeyError or IndexError."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._checked: set[int] = set()

    def compose_node(self, parent: Node | None, index: Any) -> Node:
        self._depth += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                mark = self.peek_event().start_mark
                raise ComposerError(None, None, f"expected at most {MAX_YAML_DEPTH} nested levels", mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def compose_document(self) -> Node:
        node = super().compose_document()
        _check_expanded(node)
        return node

    def construct_object(self, node: Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)
        except (ValueError, ArithmeticError, LookupError, AttributeError, TypeError) as err:
            if not isinstance(node, ScalarNode):
                raise
            # PyYAML's scalar constructors fail on bad text in assorted ways: int("9" * 5000) and date(2001, 13, 45)
            # a ValueError, `!!bool maybe` a KeyError, `!!float ''` an IndexError, `!!timestamp x` an AttributeError
            shown = node.value if len(node.value) <= 40 else f"{node.value[:40]}... ({len(node.value):,} characters)"
            problem = f"could not read {shown!r} as {node.tag.rsplit(':', 1)[-1]} ({type(err).__name__}: {err})"
            raise ConstructorError(None, None, problem, node.start_mark) from None

    def flatten_mapping(self, node: MappingNode) -> None:
        if id(node) not in self._checked:  # its explicit keys, before '<<' merges add the keys they override
            self._checked.add(id(node))
            seen: dict[Any, Node] = {}
            for key_node, _ in node.value:
                if not isinstance(key_node, ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node)
                if key in seen:
                    raise ConstructorError(
                        "while constructing a mapping", node.start_mark, f"found duplicate key {key!r}",
                        key_node.start_mark,
                    )  # fmt: skip
                seen[key] = key_node
        super().flatten_mapping(node)


def _children(node: Node) -> list[Node]:
    if isinstance(node, SequenceNode):
        return list(node.value)
    if isinstance(node, MappingNode):
        return [child for pair in node.value for child in pair]
    return []


def _check_expanded(root: Node) -> None:
    """Refuses a node graph whose aliases expand past MAX_YAML_NODES values or MAX_YAML_DEPTH levels, or refer to
    themselves: sizes memoized per node (a shared node is measured once), without recursion."""
    measured: dict[int, tuple[int, int]] = {}  # id -> (values, depth) with aliases expanded
    open_nodes: set[int] = set()
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        if finished:
            kids = [measured[id(k)] for k in _children(node)]
            size, depth = 1 + sum(k[0] for k in kids), 1 + max((k[1] for k in kids), default=0)
            open_nodes.discard(id(node))
            measured[id(node)] = (size, depth)
            if size > MAX_YAML_NODES or depth > MAX_YAML_DEPTH:
                problem = (
                    f"expected at most {MAX_YAML_NODES:,} values with aliases expanded, got {size:,}"
                    if size > MAX_YAML_NODES
                    else f"expected at most {MAX_YAML_DEPTH} nested levels with aliases expanded, got {depth}"
                )
                raise ComposerError(None, None, problem, node.start_mark)
            continue
        if id(node) in measured:
            continue
        if id(node) in open_nodes:
            raise ComposerError(
                None, None, "expected no alias inside its own anchor (a recursive value)", node.start_mark
            )
        open_nodes.add(id(node))
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node) if id(child) not in measured)


def load_yaml(text: str) -> Any:
    """One YAML document as plain values (`yaml.safe_load`, bounded as `_Loader` says); raises `yaml.YAMLError`,
    which `yaml_problem` words."""
    loader = _Loader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def yaml_problem(err: yaml.YAMLError) -> str:
    """'at line L, column C: problem (context at line L2, column C2)' of a PyYAML error, without its source snippets,
    on one line."""
    mark, problem = getattr(err, "problem_mark", None), getattr(err, "problem", None)
    if mark is None or not problem:
        return "(" + " ".join(str(err).replace(' in "<unicode string>",', " at").split()) + ")"
    text = f"at line {mark.line + 1}, column {mark.column + 1}: {' '.join(str(problem).split())}"
    context, where = getattr(err, "context", None), getattr(err, "context_mark", None)
    if context and where is not None:
        text += f" ({' '.join(str(context).split())} at line {where.line + 1}, column {where.column + 1})"
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
