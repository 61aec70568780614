"""Property-based tests (Hypothesis) of observations of another shape or dtype, NaN or infinite, given to every entry
point that acts on one: `kppo.PPO(...).predict` (kppo/sb3/ppo.py), `Policy.get_action` (kppo/agent/policy.py), the
kit's `Controller.act` (export/kppo_runtime) and a loaded artifact (`kppo.exporter.runner.TFLiteRunner`), on a Box
observation space (CartPole-v1, Box(4)) and a Discrete one (FrozenLake-v1, Discrete(16)).

The contract (issue 39), per entry point:
- what is not an observation of the space (not numbers: strings, None, objects, complex; lists numpy cannot stack;
  another shape; in a Discrete space a value that is not one of its integers) is one ValueError line naming the
  observation (`obs`) and what was received (its shape, dtype or values);
- NaN and infinite values of a Box pass through `predict` and `get_action`, as Stable-Baselines3's `predict` passes
  them (an action of the action space's shape comes back); the kit and `TFLiteRunner` (what runs on a device) refuse
  them in one line, and values beyond float32's range, which would reach the artifact as infinite;
- `Policy` and `predict` take one observation [*shape] or a batch [N, *shape]; the kit one observation of the
  space's size ("values once flattened"); `TFLiteRunner` input rows [N, *input_shape] (it does not check an integer
  input's range: the artifact encodes an integer out of range as zeros; the kit and `Policy` refuse one);
- never a traceback from numpy, TensorFlow or LiteRT.
The policies are built as `kppo.train` builds a result's (`build_agent`, `make_policy`: see
tests/exporter/test_artifact_properties.py `untrained`), untrained: one traced training iteration would cost tens of
seconds on this 2-core machine."""

from __future__ import annotations

import warnings
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import currently_in_test_context, event, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tests.exporter.test_artifact_properties import NAME, half, untrained
from tests.helpers.fuzz import fast, one_line, slow, within

SLOW_CASES = 2500
SPACES = {"CartPole-v1": gym.spaces.Box(-np.inf, np.inf, (4,), np.float32), "FrozenLake-v1": gym.spaces.Discrete(16)}


class Target(NamedTuple):
    """One env's entry points."""

    space: gym.spaces.Space
    policy: Any  # kppo.agent.policy.Policy
    model: Any  # kppo.PPO
    controller: Any  # kppo_runtime.runtime.Controller
    runner: Any  # kppo.exporter.runner.TFLiteRunner

    def __repr__(self) -> str:  # Hypothesis prints the fixtures of a failing example
        return f"Target({self.space})"


@pytest.fixture(scope="module")
def targets(tmp_path_factory) -> dict[str, Target]:
    import kppo
    from kppo.exporter.runner import TFLiteRunner
    from kppo_runtime.runtime import Controller

    made = {}
    for env_id, space in SPACES.items():
        source = untrained(env_id)
        path = kppo.export(source, tmp_path_factory.mktemp(env_id) / NAME).path
        model = kppo.PPO("MlpPolicy", env_id, policy_kwargs={"net_arch": [4]}, seed=0)
        made[env_id] = Target(space, source.policy, model, Controller(path), TFLiteRunner(path))
    return made


def tally(text: str) -> None:
    """Hypothesis's `event` (its statistics), a no-op in the plain regression tests that call the checks too."""
    if currently_in_test_context():
        event(text)


# ---------------------------------------------------------------------------------------------------------------
# Observations and what each entry point must say about them
# ---------------------------------------------------------------------------------------------------------------

NUMERIC = ["float32", "float64", "float16", "int64", "int32", "int8", "uint8", "bool"]
OTHER = ["complex64", "object", "U3", "datetime64[s]"]


def _elements(dtype: str) -> st.SearchStrategy:
    if dtype in ("float32", "float64", "float16"):
        return st.one_of(st.floats(width=16 if dtype == "float16" else 32), st.sampled_from([0.0, 1.0, 3.0, 15.0]))
    if dtype == "object":
        return st.one_of(st.none(), st.floats(), st.text(max_size=3), st.integers())  # an object array holds any
    if dtype == "U3":  # numpy drops trailing NULs: Hypothesis refuses the draw
        return st.text(st.characters(exclude_characters="\x00"), max_size=3)
    return hnp.from_dtype(np.dtype(dtype))


@st.composite
def arrays(draw, shape: tuple[int, ...]) -> np.ndarray:
    """numpy arrays, half of them of the space's shape or a batch of it."""
    dtype = draw(st.sampled_from(NUMERIC + OTHER))
    shapes = st.one_of(
        st.just(shape),
        st.integers(0, 3).map(lambda n: (n, *shape)),
        hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=5),
    )
    return draw(hnp.arrays(np.dtype(dtype), draw(shapes), elements=_elements(dtype)))


#: Python values a caller might hand over instead: numbers, lists of them (ragged among them), None, text, dicts.
PYTHON = st.one_of(
    st.none(),
    st.floats(),
    st.integers(-(2**70), 2**70),
    st.text(max_size=4),
    st.lists(st.floats(), max_size=6),
    st.lists(st.lists(st.floats(width=32), max_size=5), max_size=3),
    st.dictionaries(st.text(max_size=3), st.floats(), max_size=2),
    st.lists(st.one_of(st.integers(0, 20), st.floats(0, 20), st.none(), st.booleans()), min_size=1, max_size=4),
)


@st.composite
def plausible(draw, space: gym.spaces.Space) -> np.ndarray:
    """Observations of the space's shape or batches of them, of numeric dtypes, their values mostly of the space
    (a Discrete's integers, a Box's moderate numbers), sometimes NaN, infinite, beyond float32 or out of range."""
    shape = tuple(space.shape)
    row = (max(1, int(np.prod(shape))),)  # an artifact's input row
    shape = draw(st.sampled_from([shape, (1, *shape), (3, *shape), (2, *row)]))
    if isinstance(space, gym.spaces.Discrete):
        dtype = draw(st.sampled_from(["int64", "int32", "uint8", "float32", "float64"]))
        usual = st.integers(0, int(space.n) - 1) if dtype != "uint8" else st.integers(0, 15)
        odd = st.sampled_from([-1, 16, 17, 255] if dtype != "uint8" else [16, 255])
        if dtype.startswith("float"):
            usual, odd = usual.map(float), st.sampled_from([0.5, 3.5, -1.0, 16.0, float("nan"), float("inf")])
    else:
        dtype = draw(st.sampled_from(["float32", "float64", "int64", "bool"]))
        usual = st.floats(-10, 10, width=32) if dtype.startswith("float") else hnp.from_dtype(np.dtype(dtype))
        odd = st.sampled_from([float("nan"), float("inf"), -float("inf"), 1e39]) if dtype == "float64" else usual
    elements = st.one_of(usual, usual, usual, odd)
    return draw(hnp.arrays(np.dtype(dtype), shape, elements=elements))


def observations(env_id: str) -> st.SearchStrategy:
    space = SPACES[env_id]
    return half(plausible(space), st.one_of(arrays(tuple(space.shape)), PYTHON))


class Verdict(NamedTuple):
    accept: bool
    words: tuple[str, ...]  # a refusal names one of these: what it received
    finite: bool = True  # every value is finite (in float32)


def verdict(space: gym.spaces.Space, obs: Any, shapes: str) -> Verdict:
    """What an entry point must do with `obs`. `shapes`: "batch" (one observation or [N, *shape]: Policy, predict),
    "one" (one observation of the space's size: the kit), "rows" (input rows [N, *shape]: TFLiteRunner)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            array = np.asarray(obs)
        except (ValueError, TypeError):
            return Verdict(False, ("numbers",))
    if array.dtype.kind not in "biuf":
        return Verdict(False, (str(array.dtype),))
    shape = tuple(space.shape)
    fits = {
        "batch": array.shape == shape or (array.ndim == len(shape) + 1 and array.shape[1:] == shape),
        "one": array.size == max(1, int(np.prod(shape))),
        "rows": array.ndim == 2 and array.shape[1:] == (max(1, int(np.prod(shape))),),
    }[shapes]
    wrong = (str(array.shape), f"got {array.size}") if not fits else ()
    with np.errstate(over="ignore", invalid="ignore"):
        finite = bool(np.isfinite(array.astype(np.float32)).all())  # what reaches a float32 network
        values = array.astype(np.float64)  # integers are read exactly
    if isinstance(space, gym.spaces.Discrete) and (shapes != "rows" or not finite):
        integral = finite and np.array_equal(values, np.round(values))
        if not integral or (shapes != "rows" and ((values < 0) | (values >= space.n)).any()):
            wrong = (*wrong, "integers", "finite")
    if isinstance(space, gym.spaces.Discrete) and shapes == "rows" and finite:
        if not np.array_equal(values, np.round(values)) or (values.size and np.abs(values).max() >= 2**31):
            wrong = (*wrong, "integers")
    if shapes != "batch" and not finite:
        wrong = (*wrong, "finite")
    return Verdict(not wrong, wrong, finite)


def _acted(obs: Any, act) -> tuple[Any, None] | tuple[None, str]:
    """(the result, None), or (None, the one-line refusal)."""
    try:
        with within(10):
            return act(obs), None
    except ValueError as err:
        message = str(err)
        one_line(message, ["obs"])
        return None, message


def check(target: Target, entry: str, obs: Any) -> None:
    """The contract for one observation at one entry point: `verdict`'s outcome, a refusal naming what it received,
    an accepted observation acting with an action of the action space's shape (one per row)."""
    shapes = {"get_action": "batch", "predict": "batch", "controller": "one", "runner": "rows"}[entry]
    act = {
        "get_action": target.policy.get_action,
        "predict": lambda o: target.model.predict(o, deterministic=True)[0],
        "controller": target.controller.act,
        "runner": target.runner,
    }[entry]
    want = verdict(target.space, obs, shapes)
    action, refusal = _acted(obs, act)
    if refusal is not None:
        assert not want.accept, f"{entry} refused an observation it must take: {refusal}"
        assert any(word in refusal for word in want.words), f"names none of {want.words}: {refusal!r}"
        tally(f"{entry}: refused")
        return
    assert want.accept, f"{entry} took {obs!r}, which it must refuse ({want.words})"
    array = np.asarray(obs)
    rows = () if shapes == "one" or (shapes == "batch" and array.shape == tuple(target.space.shape)) else (len(array),)
    assert np.shape(action) == rows, (entry, np.shape(action), rows)
    tally(f"{entry}: acted" + ("" if want.finite else " on non-finite values"))


ENTRIES = ["get_action", "predict", "controller", "runner"]


#: numpy's warnings for NaN, infinite and huge values passed through the numpy actor (as SB3 passes them, silently).
NAN_MATMUL = pytest.mark.filterwarnings("ignore:.* encountered in matmul:RuntimeWarning")


@NAN_MATMUL
@pytest.mark.parametrize("env_id", list(SPACES))
@pytest.mark.parametrize("entry", ENTRIES)
@fast(250)
@given(data=st.data())
def test_an_observation_acts_or_is_refused_in_one_line(targets, env_id, entry, data):
    """250 examples per (entry point, space): 500 per entry point, CASES, over its two spaces."""
    check(targets[env_id], entry, data.draw(observations(env_id), label="obs"))


@NAN_MATMUL
@pytest.mark.slow
@pytest.mark.parametrize("env_id", list(SPACES))
@pytest.mark.parametrize("entry", ENTRIES)
@slow(SLOW_CASES // 2)
@given(data=st.data())
def test_observations_at_scale(targets, env_id, entry, data):
    check(targets[env_id], entry, data.draw(observations(env_id), label="obs"))


# ---------------------------------------------------------------------------------------------------------------
# What Hypothesis found (before the fixes), kept as explicit cases
# ---------------------------------------------------------------------------------------------------------------

NAN4 = np.full(4, np.nan, np.float32)


@NAN_MATMUL
@pytest.mark.parametrize(
    "env_id, obs",
    [
        ("CartPole-v1", {}),  # TypeError: float() argument must be ... not 'dict'
        ("CartPole-v1", ""),  # ValueError: could not convert string to float: '' (no `obs`)
        ("CartPole-v1", [[0.1, 2.0], [1.0]]),  # numpy's "inhomogeneous shape" (no `obs`)
        ("CartPole-v1", np.array([None] * 4, dtype=object)),  # acted on NaN, silently
        ("CartPole-v1", np.full(4, 1 + 2j)),  # acted on the real part, the imaginary one dropped
        ("CartPole-v1", np.zeros(4, "datetime64[s]")),  # acted on seconds since 1970
        ("FrozenLake-v1", 3.5),  # acted as 3
        ("FrozenLake-v1", 16),  # one-hot all zeros: acted on no observation
        ("FrozenLake-v1", np.nan),  # acted as state 0... or garbage
    ],
)
@pytest.mark.parametrize("entry", ["get_action", "predict"])
def test_policy_and_predict_refuse_what_is_not_an_observation(targets, env_id, obs, entry):
    """Found by Hypothesis: `Policy.get_action` and `PPO.predict` raised numpy's and Python's own errors (naming no
    observation), or acted silently on None, complex and datetime values and on a Discrete space's non-integers."""
    check(targets[env_id], entry, obs)
    with pytest.raises(ValueError, match=r"^obs"):
        targets[env_id].policy.get_action(obs)


@pytest.mark.parametrize("env_id, entry", [("CartPole-v1", "get_action"), ("FrozenLake-v1", "predict")])
def test_an_empty_batch_gets_no_actions(targets, env_id, entry):
    """Found by Hypothesis: a batch of no observations raised numpy's "cannot reshape array of size 0 into shape
    (0,newaxis)" (`Policy`, both spaces) and "need at least one array to concatenate" (`TFLiteRunner`)."""
    shape = tuple(SPACES[env_id].shape)
    check(targets[env_id], entry, np.zeros((0, *shape), np.float32))
    assert targets["CartPole-v1"].runner(np.zeros((0, 4), np.float32)).shape == (0,)


@NAN_MATMUL
def test_nan_passes_through_predict_as_in_sb3_but_not_through_an_artifact(targets):
    """The NaN decision, per entry point: `predict` / `get_action` act on NaN as SB3's predict does; the kit and
    `TFLiteRunner` (what runs on a device) refuse it (they acted on it, silently)."""
    target = targets["CartPole-v1"]
    assert np.shape(target.model.predict(NAN4, deterministic=True)[0]) == ()
    assert np.shape(target.policy.get_action(np.stack([NAN4, np.zeros(4, np.float32)]))) == (2,)
    with pytest.raises(ValueError, match=r"^obs: expected finite values, got nan at position 0$"):
        target.controller.act(NAN4)
    with pytest.raises(ValueError, match=r"^obs: expected finite float32 values, got \[nan, nan, nan, nan\] in row 0$"):
        target.runner(NAN4[None])
    with pytest.raises(ValueError, match=r"^obs: expected finite values, got inf at position 0$"):
        target.controller.act(np.full(4, 1e39))  # float64 beyond float32: infinite in the artifact


@pytest.mark.parametrize("obs", [3.5, 16, -1, np.nan, "x", 10**30, [[2]] * 2])
def test_the_kit_refuses_what_is_not_a_discrete_observation(targets, obs):
    """Found by Hypothesis: `Controller.act` on a Discrete(16) artifact acted on 3.5 (as 3), 16 and -1 (one-hot
    zeros) and NaN, and raised Python's "invalid literal for int()" for text and an OverflowError for 10**30."""
    check(targets["FrozenLake-v1"], "controller", obs)
    with pytest.raises(ValueError, match=r"^obs"):
        targets["FrozenLake-v1"].controller.act(obs)


@pytest.mark.parametrize("rows", [[[3.5]], [[np.inf]], [[2.0**40]], [[None]]])
def test_the_runner_refuses_rows_an_integer_input_cannot_hold(targets, rows):
    """Found by Hypothesis: `TFLiteRunner` cast 3.5 to 3 and infinity to garbage for an int32 input, and named
    the shape, not the dtype, of rows of None."""
    check(targets["FrozenLake-v1"], "runner", rows)
