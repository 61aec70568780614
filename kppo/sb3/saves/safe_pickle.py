"""Reading pickles as data, without `pickle`: the opcode stream (`pickletools.genops`) interpreted by a small stack
machine that knows a whitelist of opcodes and of names, and imports and calls nothing.

What the files kppo reads from Stable-Baselines3 hold (torch's `data.pkl`, SB3's `vec_normalize.pkl`, the
cloudpickled spaces in a save's `data` JSON) is numbers, strings, bytes, tuples, lists, dicts, and references to a
few names (`collections.OrderedDict`, `torch._utils._rebuild_tensor_v2`, `numpy._core.multiarray._reconstruct`,
`numpy.dtype`, SB3's `VecNormalize` and `RunningMeanStd`, gymnasium's spaces). A reader passes the names it expects
(`names`): each maps to a builder that kppo wrote (a function of plain data: OrderedDict -> dict, `_reconstruct` ->
a numpy array), or to None, in which case calling the name (REDUCE, NEWOBJ) and its BUILD make an `Instance` record:
the name, the arguments and the state, as data. No name is ever imported, no builder is looked up by name at run
time, and there is no `find_class`.

Refused, in one line that names the file: a name outside `names` (a pickle that reaches for `os.system` is refused
at its GLOBAL / STACK_GLOBAL, before anything else is read), an opcode outside `OPCODES` (INST, OBJ, EXT*, PERSID,
out-of-band buffers), a persistent id without a `persistent_load`, object arrays, values nested deeper than
`MAX_NESTING`, and a stream that is not a complete pickle (truncated, or bytes that are not opcodes). A value that
holds itself (through the memo) is read as one that holds itself.
"""

from __future__ import annotations

import pickletools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np


class PickleRefused(ValueError):
    """A pickle kppo does not read: the message names the file and what it holds."""


@dataclass(frozen=True)
class Global:
    """A name a pickle refers to (GLOBAL / STACK_GLOBAL): a record, never imported."""

    module: str
    name: str

    def __str__(self) -> str:
        return f"{self.module}.{self.name}"


@dataclass(eq=False)
class Instance:
    """What a pickle would have built by calling `cls` (REDUCE / NEWOBJ) and setting its state (BUILD), as data."""

    cls: Global
    args: tuple = ()
    state: Any = None
    kwargs: dict = field(default_factory=dict)


Builder = Callable[[tuple], Any]
#: The opcodes the machine interprets; any other is refused.
OPCODES = frozenset(
    """PROTO FRAME STOP MARK POP POP_MARK DUP NONE NEWTRUE NEWFALSE INT BININT BININT1 BININT2 LONG LONG1 LONG4 FLOAT
    BINFLOAT UNICODE BINUNICODE SHORT_BINUNICODE BINUNICODE8 BINBYTES SHORT_BINBYTES BINBYTES8 BYTEARRAY8 EMPTY_TUPLE
    TUPLE TUPLE1 TUPLE2 TUPLE3 EMPTY_LIST LIST APPEND APPENDS EMPTY_DICT DICT SETITEM SETITEMS EMPTY_SET ADDITEMS
    FROZENSET PUT BINPUT LONG_BINPUT MEMOIZE GET BINGET LONG_BINGET GLOBAL STACK_GLOBAL REDUCE NEWOBJ NEWOBJ_EX BUILD
    BINPERSID""".split()
)
_LITERALS = frozenset(
    """INT BININT BININT1 BININT2 LONG LONG1 LONG4 FLOAT BINFLOAT UNICODE BINUNICODE SHORT_BINUNICODE BINUNICODE8
    BINBYTES SHORT_BINBYTES""".split()
)
_CONSTANTS = {"NONE": None, "NEWTRUE": True, "NEWFALSE": False, "EMPTY_TUPLE": (), "EMPTY_SET": None}


class _Mark:
    """The MARK on the stack."""


def describe(value: Any) -> str:
    """What a value read from a pickle is, for a one-line message."""
    if isinstance(value, Instance):
        return f"a {value.cls} object"
    if isinstance(value, Global):
        return f"the name {value}"
    return f"a {type(value).__name__}"


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


class _Machine:
    def __init__(self, source: str, names: Mapping[tuple[str, str], Builder | None], persistent_load):
        self.source, self.names, self.persistent_load = source, names, persistent_load
        self.stack: list[Any] = []
        self.marks: list[int] = []
        self.memo: dict[int, Any] = {}

    def refuse(self, what: str) -> PickleRefused:
        return PickleRefused(f"{self.source}: {what}; not read (kppo reads pickles as data and runs nothing)")

    def pop_mark(self) -> list:
        if not self.marks:
            raise self.refuse("holds an opcode that needs a MARK without one")
        start = self.marks.pop()
        items, self.stack[start:] = self.stack[start:], []
        return items

    def pop(self) -> Any:
        if not self.stack:
            raise self.refuse("pops an empty stack")
        return self.stack.pop()

    def top(self) -> Any:
        if not self.stack:
            raise self.refuse("reads an empty stack")
        return self.stack[-1]

    def name(self, module: Any, name: Any) -> Global:
        if not isinstance(module, str) or not isinstance(name, str):
            raise self.refuse(f"names a global by {describe(module)} / {describe(name)}")
        if (module, name) not in self.names:
            raise self.refuse(f"holds a reference to {module}.{name}, which a file of this kind does not hold")
        return Global(module, name)

    def call(self, target: Any, args: Any, kwargs: dict | None = None) -> Any:
        if not isinstance(target, Global):
            raise self.refuse(f"calls {describe(target)}")
        if not isinstance(args, tuple):
            raise self.refuse(f"calls {target} with {describe(args)} for its arguments")
        builder = self.names[(target.module, target.name)]
        if builder is None:
            return Instance(target, args, kwargs=dict(kwargs or {}))
        if kwargs:
            raise self.refuse(f"calls {target} with keyword arguments")
        try:
            return builder(args)
        except PickleRefused as err:  # a builder's refusal, named for the file here if it is not yet
            raise err if str(err).startswith(self.source) else self.refuse(str(err)) from None
        except (TypeError, ValueError, IndexError, KeyError, OverflowError) as err:
            raise self.refuse(f"calls {target} with arguments it cannot take ({err})") from None

    def build(self, state: Any) -> None:
        target = self.top()
        if isinstance(target, Instance):
            target.state = state
        elif hasattr(target, "set_state"):  # kppo's own placeholders (numpy arrays before their data)
            target.set_state(state, self)
        elif isinstance(target, dict) and isinstance(state, dict):
            return  # torch's state_dict: its `_metadata` attribute (module versions), not needed
        elif isinstance(target, np.dtype):
            if not (isinstance(state, tuple) and len(state) >= 5 and state[1] in ("<", "|", "=") and state[3] is None):
                raise self.refuse(f"holds a numpy dtype kppo does not read (state {state!r})")
        else:
            raise self.refuse(f"sets the state of {describe(target)}")

    # --- one method per kind of opcode (`_OPS` maps each opcode to its method) ---
    def literal(self, op: str, arg: Any) -> None:
        self.stack.append(bytes(arg) if op in ("BINBYTES8", "BYTEARRAY8") else arg)

    def nothing(self, op: str, arg: Any) -> None:
        pass

    def constant(self, op: str, arg: Any) -> None:
        self.stack.append(
            set() if op == "EMPTY_SET" else [] if op == "EMPTY_LIST" else {} if op == "EMPTY_DICT" else _CONSTANTS[op]
        )

    def mark(self, op: str, arg: Any) -> None:
        if op == "MARK":
            self.marks.append(len(self.stack))
        elif op == "POP_MARK":
            self.pop_mark()
        elif op == "POP":
            self.pop()
        else:  # DUP
            self.stack.append(self.top())

    def tuple_(self, op: str, arg: Any) -> None:
        if op in ("TUPLE", "LIST"):
            items = self.pop_mark()
            self.stack.append(tuple(items) if op == "TUPLE" else items)
            return
        n = int(op[-1])
        if len(self.stack) < n:
            raise self.refuse(f"builds a tuple of {n} from a shorter stack")
        last = tuple(self.stack[len(self.stack) - n :])
        del self.stack[len(self.stack) - n :]
        self.stack.append(last)

    def append(self, op: str, arg: Any) -> None:
        items = [self.pop()] if op == "APPEND" else self.pop_mark()
        target = self.top()
        if not isinstance(target, list):
            raise self.refuse(f"appends to {describe(target)}")
        target.extend(items)

    def setitems(self, op: str, arg: Any) -> None:
        if op == "SETITEM":
            value = self.pop()
            items = [self.pop(), value]
        else:
            items = self.pop_mark()
        target = {} if op == "DICT" else self.top()
        if not isinstance(target, dict):
            raise self.refuse(f"sets items of {describe(target)}")
        for key, value in zip(items[::2], items[1::2]):
            if isinstance(key, Instance) or not _hashable(key):  # a tuple holding a list is unhashable too
                raise self.refuse(f"uses {describe(key)} as a dict key")
            target[key] = value
        if op == "DICT":
            self.stack.append(target)

    def set_items(self, op: str, arg: Any) -> None:
        items = self.pop_mark()
        if any(isinstance(x, (Instance, list, dict, set)) for x in items):
            raise self.refuse("puts an unhashable value in a set")
        if op == "FROZENSET":
            self.stack.append(frozenset(items))
        elif isinstance(self.top(), set):
            self.top().update(items)
        else:
            raise self.refuse(f"adds set items to {describe(self.top())}")

    def memo_op(self, op: str, arg: Any) -> None:
        if op == "MEMOIZE":
            self.memo[len(self.memo)] = self.top()
        elif op.endswith("PUT"):
            self.memo[int(arg)] = self.top()
        elif int(arg) in self.memo:
            self.stack.append(self.memo[int(arg)])
        else:
            raise self.refuse(f"reads memo entry {arg}, which it never stored")

    def global_(self, op: str, arg: Any) -> None:
        if op == "GLOBAL":
            module, _, name = str(arg).partition(" ")
        else:
            name = self.pop()
            module = self.pop()
        self.stack.append(self.name(module, name))

    def reduce(self, op: str, arg: Any) -> None:
        kwargs = self.pop() if op == "NEWOBJ_EX" else None
        args = self.pop()
        self.stack.append(self.call(self.pop(), args, kwargs if isinstance(kwargs, dict) else None))

    def build_op(self, op: str, arg: Any) -> None:
        self.build(self.pop())

    def persistent(self, op: str, arg: Any) -> None:
        if self.persistent_load is None:
            raise self.refuse("holds a persistent id (data kept outside the pickle)")
        self.stack.append(self.persistent_load(self.pop()))


_OPS: dict[str, Callable[[_Machine, str, Any], None]] = {
    **{op: _Machine.literal for op in _LITERALS | {"BINBYTES8", "BYTEARRAY8"}},
    **{op: _Machine.nothing for op in ("PROTO", "FRAME", "STOP")},
    **{op: _Machine.constant for op in (*_CONSTANTS, "EMPTY_LIST", "EMPTY_DICT")},
    **{op: _Machine.mark for op in ("MARK", "POP", "POP_MARK", "DUP")},
    **{op: _Machine.tuple_ for op in ("TUPLE", "TUPLE1", "TUPLE2", "TUPLE3", "LIST")},
    **{op: _Machine.append for op in ("APPEND", "APPENDS")},
    **{op: _Machine.setitems for op in ("DICT", "SETITEM", "SETITEMS")},
    **{op: _Machine.set_items for op in ("ADDITEMS", "FROZENSET")},
    **{op: _Machine.memo_op for op in ("PUT", "BINPUT", "LONG_BINPUT", "MEMOIZE", "GET", "BINGET", "LONG_BINGET")},
    **{op: _Machine.global_ for op in ("GLOBAL", "STACK_GLOBAL")},
    **{op: _Machine.reduce for op in ("REDUCE", "NEWOBJ", "NEWOBJ_EX")},
    "BUILD": _Machine.build_op,
    "BINPERSID": _Machine.persistent,
}
assert set(_OPS) == OPCODES, sorted(set(_OPS) ^ OPCODES)


def read_pickle(
    data: bytes,
    source: str,
    names: Mapping[tuple[str, str], Builder | None],
    persistent_load: Callable[[Any], Any] | None = None,
) -> Any:
    """The value the pickle `data` describes, built as data (see the module docstring); `source` names the file in
    errors; `names`: the (module, name) pairs the file may refer to, each with its builder or None (an `Instance`);
    `persistent_load(pid)`: what a persistent id stands for (torch's storages). Raises `PickleRefused`."""
    machine = _Machine(source, names, persistent_load)
    try:
        ops = list(pickletools.genops(data))
    except Exception as err:  # genops reports a broken stream with ValueError, struct.error, ...
        raise PickleRefused(
            f"{source}: expected a complete pickle, got bytes that are not one ({type(err).__name__}: "
            f"{str(err).splitlines()[0] if str(err) else 'no message'}); not read"
        ) from None
    if not ops or ops[-1][0].name != "STOP":
        raise PickleRefused(f"{source}: expected a complete pickle, got one without its STOP; not read")
    for opcode, _, _ in ops:
        if opcode.name not in OPCODES:
            raise machine.refuse(f"holds the opcode {opcode.name}")
    for opcode, arg, _ in ops:
        _OPS[opcode.name](machine, opcode.name, arg)
    if len(machine.stack) != 1 or machine.marks:
        raise machine.refuse(f"ends with {len(machine.stack)} values on its stack")
    try:
        return resolve(machine.stack[0])
    except PickleRefused as err:
        raise machine.refuse(f"holds {err}") from None


#: How deep a pickle's values may nest (SB3's files nest under 10 levels); deeper is refused, not recursed into.
MAX_NESTING = 100


def resolve(value: Any) -> Any:
    """`value` with kppo's placeholders replaced by what they built (numpy arrays), through containers and
    `Instance` records. A list, dict or record holding itself (memo references) resolves to one holding itself; values
    nested deeper than `MAX_NESTING` raise `PickleRefused`."""
    seen: dict[int, Any] = {}

    def walk(x: Any, depth: int) -> Any:
        if id(x) in seen:
            return seen[id(x)]
        if depth > MAX_NESTING:
            raise PickleRefused(f"values nested deeper than {MAX_NESTING} levels")
        if hasattr(x, "set_state"):
            out = x.value()
        elif isinstance(x, list):  # registered before its items: a list may hold itself
            out = seen[id(x)] = []
            out.extend(walk(v, depth + 1) for v in x)
        elif isinstance(x, dict):
            out = seen[id(x)] = {}
            out.update((k, walk(v, depth + 1)) for k, v in x.items())
        elif isinstance(x, Instance):
            out = seen[id(x)] = Instance(x.cls)
            out.args, out.state, out.kwargs = (
                walk(x.args, depth + 1),
                walk(x.state, depth + 1),
                walk(x.kwargs, depth + 1),
            )
        elif isinstance(x, tuple):
            out = tuple(walk(v, depth + 1) for v in x)
        else:
            out = x
        seen[id(x)] = out
        return out

    return walk(value, 0)


# ---------------------------------------------------------------------------------------------------------------
# numpy's pickles, read as data
# ---------------------------------------------------------------------------------------------------------------

#: numpy dtype kinds kppo builds from bytes: bool, integers, floats, complex (never objects).
_NUMERIC_KINDS = "biufc"


def numeric_dtype(spec: Any) -> np.dtype:
    """A numeric numpy dtype from its pickled spec ('f4', '<i8', ...): never an object or structured dtype."""
    if not isinstance(spec, str):
        raise ValueError(f"a dtype named by {describe(spec)}")
    dtype = np.dtype(spec)
    if dtype.kind not in _NUMERIC_KINDS or dtype.fields is not None or dtype.byteorder == ">":
        raise ValueError(f"the dtype {spec!r} (kppo reads little-endian numeric arrays)")
    return dtype


def _dtype(args: tuple) -> np.dtype:
    """numpy.dtype(spec, align, copy) as numpy pickles a dtype."""
    return numeric_dtype(args[0])


def array_from_bytes(raw: Any, dtype: Any, shape: Any, fortran: bool = False) -> np.ndarray:
    if not isinstance(raw, (bytes, bytearray)):
        raise ValueError(f"array data as {describe(raw)} (an object array)")
    if not isinstance(dtype, np.dtype) or dtype.kind not in _NUMERIC_KINDS:
        raise ValueError(f"array of {describe(dtype)}")
    shape = tuple(int(n) for n in (shape if isinstance(shape, tuple) else (shape,)))
    if int(np.prod(shape)) * dtype.itemsize != len(raw):
        raise ValueError(f"{len(raw)} bytes for shape {shape} of {dtype}")
    return np.frombuffer(bytes(raw), dtype).reshape(shape, order="F" if fortran else "C").copy()


class _ArrayStub:
    """`numpy._core.multiarray._reconstruct(ndarray, (0,), b'b')`: an array whose BUILD gives its data."""

    def __init__(self, args: tuple):
        if not (isinstance(args[0], Global) and args[0].name == "ndarray"):
            raise ValueError(f"_reconstruct of {describe(args[0])}")
        self.array: np.ndarray | None = None

    def set_state(self, state: Any, machine: _Machine) -> None:
        if not (isinstance(state, tuple) and len(state) == 5):
            raise machine.refuse(f"builds a numpy array from {describe(state)}")
        _, shape, dtype, fortran, raw = state
        try:
            self.array = array_from_bytes(raw, dtype, shape, bool(fortran))
        except ValueError as err:
            raise machine.refuse(f"builds a numpy array from {err}") from None

    def value(self) -> np.ndarray:
        if self.array is None:
            raise PickleRefused("a numpy array without its data")
        return self.array


def _frombuffer(args: tuple) -> np.ndarray:
    """numpy._core.numeric._frombuffer(buf, dtype, shape, order): protocol 5's arrays."""
    raw, dtype, shape, order = args
    return array_from_bytes(raw, dtype, shape, order == "F")


def _scalar(args: tuple) -> Any:
    """numpy._core.multiarray.scalar(dtype, bytes): a numpy scalar."""
    dtype, raw = args
    return array_from_bytes(raw, dtype, ())[()]


def _ordered_dict(args: tuple) -> dict:
    if args and not (len(args) == 1 and isinstance(args[0], list)):
        raise ValueError(f"OrderedDict of {len(args)} arguments")
    return dict(args[0]) if args else {}


#: numpy's names under numpy 1.x ("numpy.core") and 2.x ("numpy._core"), with their data builders.
NUMPY_NAMES: dict[tuple[str, str], Builder | None] = {
    ("numpy", "dtype"): _dtype,
    ("numpy", "ndarray"): None,
    **{(f"numpy.{core}.multiarray", "_reconstruct"): _ArrayStub for core in ("core", "_core")},
    **{(f"numpy.{core}.multiarray", "scalar"): _scalar for core in ("core", "_core")},
    **{(f"numpy.{core}.numeric", "_frombuffer"): _frombuffer for core in ("core", "_core")},
}
ORDERED_DICT: dict[tuple[str, str], Builder | None] = {("collections", "OrderedDict"): _ordered_dict}
