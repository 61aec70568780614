"""kppo's one-line errors, typed so that Stable-Baselines3 programs catch them, and what those messages quote of an
exception they name (imports nothing from kppo).

Where kppo refuses an argument, its message is one line (what, expected, got) and the exception is a `ValueError`, as
everywhere in kppo; where SB3 raises something else for the same argument, the exception is also an instance of
SB3's type, so an SB3 program's `except AssertionError:` or `pytest.raises(NotImplementedError)` still catches it:

    ArgumentError        ValueError + AssertionError       SB3 asserts (`assert batch_size > 1`, `get_schedule_fn`'s
                                                           `assert callable(...)`, `supported_action_spaces`, ...)
    ArgumentTypeError    ValueError + TypeError            SB3's constructors refuse it as Python does (an unknown
                                                           `policy_kwargs` key, a layer spec torch cannot build)
    NotSupportedError    ValueError + NotImplementedError  SB3 does not implement it either (an observation space its
                                                           preprocessing refuses), or kppo does not build an option SB3
                                                           takes (said in the message)

Which case raises which is decided from SB3's source (stable_baselines3/ppo/ppo.py, common/base_class.py,
common/utils.py, common/policies.py, common/preprocessing.py) and listed in `kppo.sb3.arguments`' docstring.
"""

from __future__ import annotations

import re


class ArgumentError(ValueError, AssertionError):
    """A bad argument value where Stable-Baselines3 fails an `assert` (e.g. `batch_size=1`, `n_steps * n_envs = 1`,
    a learning rate that is neither a number nor callable, an action space outside `supported_action_spaces`)."""


class ArgumentTypeError(ValueError, TypeError):
    """An argument Stable-Baselines3's constructors refuse with a TypeError: an unexpected keyword (an unknown
    `policy_kwargs` key reaches the policy's `__init__`), or a value of a type it cannot use."""


class NotSupportedError(ValueError, NotImplementedError):
    """Something Stable-Baselines3 raises NotImplementedError for (an observation space its preprocessing does not
    handle), or an SB3 option kppo does not build (the message says which and why)."""


class OutOfMemoryError(ValueError, MemoryError):
    """Sizes in a config (layer widths, envs x steps) that ask for more memory than the device has: the config is
    what to change, so it is a ValueError too, and kppo's one-line handlers catch it."""


def sorted_keys(keys) -> list:
    """`keys` sorted for a message, whatever their types (a user's dict may mix `1` and `'a'`, which `sorted` cannot
    order)."""
    return sorted(keys, key=lambda k: (type(k).__name__, repr(k)))


def first_line(err: BaseException, sep: str = ": ") -> str:
    """The first line of `err`'s message after `sep` ("" for an empty message)."""
    lines = str(err).strip().splitlines()
    return f"{sep}{lines[0].strip()}" if lines else ""


def reason(err: BaseException) -> str:
    """The first line of `err`'s message, or its type's name when it has none."""
    return first_line(err, sep="") or type(err).__name__


def system_reason(err: BaseException) -> str:
    """The operating system's words in a TensorFlow write error ("... .tempstate123; File too large [Op:SaveV2]"),
    else `reason(err)`."""
    found = re.search(r";\s*([^;\[\]]+?)\s*\[Op:", str(err))
    return found.group(1) if found else reason(err)
