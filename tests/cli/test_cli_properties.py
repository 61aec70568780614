"""Property-based tests (Hypothesis) of the command line, `kppo.cli.main.main(argv)` in process: random argument lists
and mutations of the documented command lines either reach the point where the command really runs, or exit with
status 2 and exactly one line on stderr (`kppo <command>: error: ...`), and never write outside the test's folder.

Nothing trains here: the calls that start the work — `kppo.train`, `kppo.export`, `kppo eval`'s episodes, `kppo
tune`'s study storage and PBT's training — are replaced, for the whole module, by stubs that raise `WouldRun` (a
BaseException, so no `except` in kppo swallows it). A generated command that gets that far is counted as one that
"would run" (Hypothesis' statistics show how many) and checked only for what it wrote on the way; every other
command must be refused in one line. Every example runs in a fresh folder as its working directory, and an audit
hook records every file the command opens for writing, creates, renames or removes: all that are left afterwards
must lie in that folder (generated paths are relative and never `..`; a temporary folder that is removed again, as
`kppo eval` unpacks a zip, is fine)."""

from __future__ import annotations

import functools
import os
import re
import shlex
import signal
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

import pytest
from hypothesis import HealthCheck, currently_in_test_context, event, example, given, settings
from hypothesis import strategies as st

import kppo
import kppo.cli.configs
import kppo.cli.evaluate
import kppo.cli.main
import kppo.cli.tune
import kppo.tuning.pbt
import kppo.tuning.search
from kppo.cli.main import main
from kppo.config.options import Config
from tests.helpers.fuzz import fast, one_line, slow, within

ROOT = Path(__file__).resolve().parents[2]
FIELDS = [f.name for f in Config.__dataclass_fields__.values()]


# ---------------------------------------------------------------------------------------------------------------
# The harness: stubs for the work, the write watcher, one command's outcome
# ---------------------------------------------------------------------------------------------------------------


class WouldRun(BaseException):
    """A command reached the call that starts its work (training, exporting, episodes, a study)."""


def _stub(what: str):
    def stub(*args, **kwargs):
        raise WouldRun(what)

    return stub


#: What the stubs replace: (module, attribute) -> what the command would have done.
STUBS = {
    (kppo, "train"): "train",
    (kppo, "export"): "export",
    (kppo.cli.evaluate, "_gym_returns"): "eval episodes",
    (kppo.tuning.search, "open_storage"): "tune study",
    (kppo.tuning.pbt, "train"): "pbt training",
}

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
_PATH_EVENTS = {"os.mkdir", "os.remove", "os.rmdir", "os.symlink", "os.link", "os.truncate", "sqlite3.connect"}
_WATCH: dict = {"root": None, "outside": []}


def _written_path(name: str, args: tuple):
    """The path an audit event writes (None when it only reads)."""
    if name == "open":
        path, mode, flags = args
        writing = any(c in mode for c in "wax+") if isinstance(mode, str) else bool((flags or 0) & _WRITE_FLAGS)
        return path if writing and not isinstance(path, int) else None
    if name in ("os.rename", "os.replace"):
        return args[1]
    return args[0] if name in _PATH_EVENTS else None


def _audit(name: str, args: tuple, watch: dict = _WATCH) -> None:
    """`watching`'s hook (`watch` is bound here: at interpreter exit the module's globals are cleared to None while the
    hook still runs)."""
    root = watch["root"]
    if root is None or not (name == "open" or name in _PATH_EVENTS or name in ("os.rename", "os.replace")):
        return
    try:
        path = _written_path(name, args)
        if path is None:
            return
        full = os.path.abspath(os.fsdecode(path))
        if "__pycache__" not in full and os.path.commonpath([full, root]) != root:  # imports write bytecode
            watch["outside"].append(f"{name} {full}")
    except Exception as err:  # an audit hook must not raise; a path it cannot read is reported instead
        watch["outside"].append(f"{name} {args!r} ({err})")


sys.addaudithook(_audit)  # process-wide and permanent: it only looks while `watching` sets a root


@contextmanager
def watching(root: Path):
    """Records the writes outside `root` made inside the block (the list it yields)."""
    _WATCH["root"], _WATCH["outside"] = os.path.realpath(root), []
    try:
        yield _WATCH["outside"]
    finally:
        _WATCH["root"] = None


class Outcome(NamedTuple):
    kind: str  # "refused" (returned 2), "ran" (a stub was reached), "exit" (SystemExit), "returned" (another code)
    code: object
    out: str
    err: str
    outside: list


def run_cli(argv: list[str], capsys, root: Path, files: dict[str, bytes] | None = None) -> Outcome:
    """`main(argv)` in a fresh folder under `root` (its working directory, holding `files`), with stdout/stderr and
    the writes outside `root` recorded; SIGINT/SIGTERM handlers restored after (`kppo train` sets its own)."""
    work = Path(tempfile.mkdtemp(dir=root))
    for name, data in (files or {}).items():
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_bytes(data)
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    capsys.readouterr()
    kind, code = "returned", None
    with pytest.MonkeyPatch.context() as patch, watching(root) as outside:
        patch.chdir(work)
        try:
            with within(20):
                code = main(list(argv))
            kind = "refused" if code == 2 else "returned"
        except SystemExit as exit:
            kind, code = "exit", exit.code
        except WouldRun as run:
            kind, code = "ran", run.args[0]
        finally:
            for sig, handler in handlers.items():
                signal.signal(sig, handler)
    out, err = capsys.readouterr()
    left = [entry for entry in outside if os.path.lexists(entry.split(" ", 1)[1])]  # a temporary folder removed: fine
    return Outcome(kind, code, out, err, left)


def _asks_for_help(argv: list[str]) -> bool:
    """-h, -h in a cluster of short flags (-hh), --help or its abbreviation (--he)."""
    return any(re.match(r"-h|--h", t) and (t[1] == "h" or "--help".startswith(t.split("=")[0])) for t in argv)


def _note(what: str) -> None:
    """Hypothesis' event (its statistics count each outcome), outside an example too (the plain tests)."""
    if currently_in_test_context():
        event(what)


def check_outcome(outcome: Outcome, argv: list[str], names: list[str] | None = None) -> None:
    """The contract for one command: it would run, or it printed help, or it exited 2 with one line on stderr
    (`names`: what that line must mention, one of them; by default anything of the command line or a field)."""
    assert outcome.outside == [], f"{argv}: wrote outside its folder: {outcome.outside[:3]}"
    if outcome.kind == "ran":
        _note(f"would run: {outcome.code}")
        return
    if outcome.kind == "exit" and outcome.code == 0 and _asks_for_help(argv):
        _note("help")
        return
    assert outcome.kind in ("refused", "exit"), f"{argv}: neither ran nor refused: {outcome}"
    assert outcome.code == 2, f"{argv}: exit status {outcome.code!r}, expected 2; stderr {outcome.err!r}"
    lines = outcome.err.splitlines()
    assert len(lines) == 1 and outcome.err.endswith("\n"), f"{argv}: not one line on stderr: {outcome.err!r}"
    line = lines[0]
    assert re.match(r"kppo( [a-z]+)?: error: \S", line), f"{argv}: not kppo's error line: {line!r}"
    message = line.split(": error: ", 1)[1]
    if names is None:
        names = [*(part for t in argv for part in (t, t.split("=")[0]) if part.strip()), *FIELDS, *NOUNS]
    one_line(message, names)
    _note(f"refused: {message.split(':')[0][:30]}")


#: What refusals name besides a token of the command line or a field: argparse's words, the positional arguments'.
NOUNS = ["argument", "CONFIG", "RUN_DIR", "ARTIFACT", "path", "checkpoints", "--env", "space", "config YAML"]


@pytest.fixture(scope="module")
def cli_root(tmp_path_factory):
    """The module's folder (each example a fresh folder in it), the stubs in place, and the heavy imports done
    (TensorFlow, gymnasium, Optuna) so that no example pays for them. Two costs of every example are paid once: the
    parser is built once (argparse's parsers keep no state between calls), and configs/ is a copy of the tuned
    configs reduced to two fields each, which PyYAML (pure Python, slow on a shipped file with its comments) reads
    fast; the shipped files' YAML is tests/config/test_yaml_properties.py's target."""
    root = tmp_path_factory.mktemp("cli")
    configs = tmp_path_factory.mktemp("cli-configs")
    for path in sorted(kppo.cli.configs.CONFIG_DIR.glob("*.yaml")):  # the tuned configs without their comments
        config = Config.from_yaml(path)
        (configs / path.name).write_text(f"env: {config.env}\nnum_envs: {config.num_envs}\n")
    with pytest.MonkeyPatch.context() as patch:
        for (module, name), what in STUBS.items():
            patch.setattr(module, name, _stub(what))
        patch.setattr(kppo.cli.configs, "CONFIG_DIR", configs)
        patch.setattr(kppo.cli.main, "build_parser", functools.cache(kppo.cli.main.build_parser))
        for argv in (["train", "--set", "x=1"], ["tune", "--set", "x=1"], ["eval", "x"], ["export", "x"]):
            main(argv)
        main(["train", "--set", "env=CartPol-v1"])
        yield root


def capturing(profile: settings) -> settings:
    """`profile` for a test that takes capsys (function-scoped: each example reads and clears it)."""
    return settings(
        profile, suppress_health_check=[*profile.suppress_health_check, HealthCheck.function_scoped_fixture]
    )


# ---------------------------------------------------------------------------------------------------------------
# The command lines: the documented ones, their tokens, junk
# ---------------------------------------------------------------------------------------------------------------


def _documented_commands() -> list[list[str]]:
    """Every `kppo train|eval|export|tune ...` line of kppo/cli/main.py's and kppo/cli/tune.py's docstrings and of
    README.md (code blocks and inline code), without `kppo` and comments."""
    texts = [kppo.cli.main.__doc__ or "", kppo.cli.tune.__doc__ or "", (ROOT / "README.md").read_text()]
    found = []
    for text in texts:
        spans = re.findall(r"`(kppo (?:train|eval|export|tune)[^`]*)`", text)
        spans += re.findall(r"^\s*(kppo (?:train|eval|export|tune).*)$", text, flags=re.M)
        for span in spans:
            tokens = shlex.split(span.split("#")[0].replace("\n", " "))
            if tokens[1:] not in found:
                found.append(tokens[1:])
    return found


DOCUMENTED = _documented_commands()
COMMANDS = ["train", "eval", "export", "tune"]

OPTIONS = {
    "train": ["--set", "--seed", "--seeds", "--sweep", "--out", "--quiet", "--no-export", "--resume", "--env"],
    "eval": ["--episodes", "--env", "--seed", "--vecnormalize"],
    "export": [
        "--format",
        "--quantize",
        "--batch-size",
        "--out",
        "--vecnormalize",
        "--calibrate-env",
        "--calibrate-data",
        "--episodes",
        "--accept-degraded",
        "--budget",
    ],
    "tune": [
        "--space",
        "--trials",
        "--timeout",
        "--batch",
        "--seeds-per-trial",
        "--sampler",
        "--sampler-seed",
        "--startup-trials",
        "--pruner",
        "--objective-rounds",
        "--storage",
        "--study",
        "--resume",
        "--out",
        "--env",
        "--set",
        "--quiet",
        "--pbt",
        "--pbt-interval",
        "--pbt-quantile",
    ],
}
ALL_OPTIONS = sorted({o for options in OPTIONS.values() for o in options})
BAD_OPTIONS = ["--bogus", "-x", "--", "-", "--se", "--s", "--ou", "--tri", "--pbt-", "-hh", "---set", "--SET", "-1"]

#: YAML values that must be refused or bounded wherever a value is parsed (--set, --sweep).
YAML_JUNK = [
    "",
    "~",
    "[",
    "]",
    "{",
    "{a: 1}",
    "[1, 2]",
    "'",
    '"',
    "*a",
    "&a [*a]",
    "&a 1",
    "!!python/object/apply:os.system ['true']",
    "!!python/name:os.system",
    "!foo 1",
    "!!binary aGVsbG8=",
    "!!set {a}",
    "2001-13-45",
    "2001-12-14",
    "1e400",
    "-.inf",
    ".nan",
    "0x1F",
    "0o17",
    "1_000",
    "9" * 400,
    "9" * 5000,
    "[" * 100 + "]" * 100,
    "{a: " * 40 + "1" + "}" * 40,
    "lin_0.1",
    "lin_x",
    "true",
    "yes",
    "no",
    "null",
    "\t",
    "a\nb",
    "- 1",
    "? a",
    "%YAML 1.1",
    "---",
    "...",
    "\x01",
    "[&a [x, x, x, x, x, x, x, x], &b [*a, *a, *a, *a, *a, *a, *a, *a], &c [*b, *b, *b, *b, *b, *b, *b, *b],"
    " &d [*c, *c, *c, *c, *c, *c, *c, *c], &e [*d, *d, *d, *d, *d, *d, *d, *d], &f [*e, *e, *e, *e, *e, *e, *e, *e]]",
]
NUMBERS = [
    "0",
    "1",
    "-1",
    "2",
    "8",
    "1e5",
    "1e400",
    "nan",
    "inf",
    "-inf",
    "0x10",
    "1.5",
    "-0",
    "1_0",
    "٣",
    "9" * 30,
    "9" * 5000,
    "4294967296",
    "-4294967297",
    " 3",
    "3 ",
    "+3",
    "",
]
SEEDS = ["0-7", "0,3,5", "0-3,10", "7-0", "-1", "0-99999999", "0-9999", "a", "", ",", "0--1", "1_0", "0-3,2-5", "3-"]
SWEEPS = [
    "learning_rate=3e-4,1e-3",
    "lr=",
    "=1",
    "x=1,2",
    "learning_rate=[",
    "learning_rate=a,b",
    "seed=1,2",
    "num_envs=1,2",
    "LR=1e-3,2e-3",
    "learning_rate=1e-3",
    "ent_coef=0.0,0.01",
    "gamma=1.5",
    "learning_rate=,",
    "clip_range=[0.1,0.2]",
    "learning_rate=" + ",".join(["1e-3"] * 50),
]
SAMPLERS = [
    "tpe",
    "random",
    "cmaes",
    "qmc",
    "TPESampler",
    "GridSampler",
    "BaseSampler",
    "NSGAIISampler",
    "GPSampler",
    "BruteForceSampler",
    "PartialFixedSampler",
    "x",
    "",
    "intersection_search_space",
]
PRUNERS = [
    "median",
    "none",
    "nop",
    "halving",
    "hyperband",
    "ThresholdPruner",
    "PatientPruner",
    "BasePruner",
    "PercentilePruner",
    "WilcoxonPruner",
    "x",
    "",
]
PATHS = [
    "runs/p1",
    "runs",
    "taken",
    "taken/run",
    "space.yaml",
    "ppo.yml",
    "model.zip",
    "x.tflite",
    "nope",
    "empty.yaml",
    "bad.yaml",
    "journal:j.log",
    "sqlite:///s.db",
    "policy.tflite",
    "vec_normalize.pkl",
    ".",
]
NAMES = [*FIELDS, "LR", "n_envs", "batch_size", "normalize", "ANNEAL_LR", "colour", "learning_rat", "", " ", "x.y"]

#: Files every example's folder holds: a file where a directory is expected, an empty YAML file, junk YAML.
FILES = {"taken": b"", "empty.yaml": b"", "bad.yaml": b"num_envs: [4\n\xff"}

#: Free text: no path separator, NUL (no argv holds one) or `..`, so a path it names lies in the example's folder.
TEXT = st.text(st.characters(blacklist_characters="/\\\x00", blacklist_categories=("Cs",)), max_size=12).filter(
    lambda t: t not in ("..", ".")
)
VALUES = st.one_of(
    TEXT,
    st.sampled_from(NUMBERS),
    st.sampled_from(YAML_JUNK),
    st.sampled_from(SEEDS),
    st.sampled_from(SWEEPS),
    st.sampled_from(SAMPLERS + PRUNERS),
    st.sampled_from(PATHS),
    st.sampled_from(
        [
            "tflite",
            "saved_model",
            "none",
            "float16",
            "dynamic",
            "int8",
            "CartPole-v1",
            "Nope-v0",
            "cartpole",
            "pendulum",
            "x:y",
            "ALE/Pong-v5",
            "FrozenLake-v1",
        ]
    ),
    st.builds(
        lambda name, value: f"{name}={value}", st.sampled_from(NAMES), st.one_of(TEXT, st.sampled_from(YAML_JUNK))
    ),
)
OPTION_TOKENS = st.one_of(
    st.sampled_from(ALL_OPTIONS),
    st.sampled_from([*BAD_OPTIONS, "-h", "--help"]),
    st.builds(lambda option, value: f"{option}={value}", st.sampled_from(ALL_OPTIONS), VALUES),
)
TOKENS = st.one_of(OPTION_TOKENS, VALUES, st.sampled_from(COMMANDS))


@st.composite
def option_pairs(draw, command: str) -> list[str]:
    """One of `command`'s options with a value that fits it (or junk)."""
    option = draw(st.sampled_from(OPTIONS[command]))
    pools = {
        "--set": st.builds(
            lambda n, v: f"{n}={v}", st.sampled_from(NAMES), st.one_of(st.sampled_from(YAML_JUNK + NUMBERS), TEXT)
        ),
        "--seeds": st.sampled_from(SEEDS),
        "--sweep": st.sampled_from(SWEEPS),
        "--sampler": st.sampled_from(SAMPLERS),
        "--pruner": st.sampled_from(PRUNERS),
        "--space": st.sampled_from([*PATHS, "learning_rate: {type: float, low: 1e-4, high: 1e-3}", "x: 1"]),
        "--storage": st.sampled_from(PATHS),
        "--out": st.sampled_from(PATHS),
        "--resume": st.sampled_from(PATHS),
    }
    if option in ("--quiet", "--no-export", "--pbt", "--accept-degraded") or (
        option == "--resume" and command == "tune"
    ):
        return [option]
    return [option, draw(pools.get(option, st.one_of(st.sampled_from(NUMBERS), VALUES)))]


@st.composite
def mutated(draw, base: list[str]) -> list[str]:
    """`base` with 1-4 edits: a token dropped, duplicated, replaced by junk, an option (with a value) or junk
    inserted, two tokens swapped, or the command replaced."""
    argv = list(base)
    for _ in range(draw(st.integers(1, 4))):
        where = draw(st.integers(0, len(argv)))
        edit = draw(st.sampled_from(["drop", "duplicate", "replace", "insert", "option", "swap", "command"]))
        command = argv[0] if argv and argv[0] in OPTIONS else draw(st.sampled_from(COMMANDS))
        if edit == "option":
            argv[where:where] = draw(option_pairs(command))
        elif edit == "insert" or not argv:
            argv.insert(where, draw(TOKENS))
        elif edit == "command":
            argv[0] = draw(st.one_of(st.sampled_from(COMMANDS), TEXT))
        else:
            where = min(where, len(argv) - 1)
            if edit == "drop":
                del argv[where]
            elif edit == "duplicate":
                argv.insert(where, argv[where])
            elif edit == "replace":
                argv[where] = draw(TOKENS)
            else:
                other = draw(st.integers(0, len(argv) - 1))
                argv[where], argv[other] = argv[other], argv[where]
    return argv


DOCUMENTED_MUTATIONS = st.sampled_from(DOCUMENTED).flatmap(mutated)


@st.composite
def commands(draw) -> list[str]:
    """A command and a few of its options with fitting values or junk, in any order."""
    command = draw(st.sampled_from(COMMANDS))
    argv = [command]
    if draw(st.booleans()):
        argv.append(draw(st.one_of(st.sampled_from(["cartpole", "pendulum", "nope", *PATHS]), TEXT)))
    for _ in range(draw(st.integers(0, 4))):
        argv += draw(option_pairs(command))
    return argv


# ---------------------------------------------------------------------------------------------------------------
# The targets
# ---------------------------------------------------------------------------------------------------------------


def check_command(argv: list[str], capsys, root: Path) -> None:
    check_outcome(run_cli(argv, capsys, root, FILES), argv)


def test_the_documented_commands_are_found_and_the_stubs_catch_their_work(cli_root, capsys):
    """The mutations start from real command lines (a test that would fail if the docstrings' format changed), and
    a valid command reaches a stub: nothing here trains, exports or opens a study."""
    assert ["train", "pendulum", "--set", "learning_rate=3e-4", "--seed", "1", "--out", "runs/p1"] in DOCUMENTED
    assert {argv[0] for argv in DOCUMENTED} == set(COMMANDS) and len(DOCUMENTED) >= 10
    for argv, what in [
        (["train", "--quiet"], "train"),
        (["train", "cartpole", "--seeds", "0-1", "--quiet"], "train"),
        (["tune", "cartpole", "--trials", "2", "--quiet"], "tune study"),
        (
            [
                "tune",
                "cartpole",
                "--pbt",
                "--batch",
                "2",
                "--space",
                "learning_rate: {type: float, low: 1e-4, high: 1e-3}",
            ],
            "pbt training",
        ),
    ]:
        outcome = run_cli(argv, capsys, cli_root)
        assert (outcome.kind, outcome.code, outcome.outside) == ("ran", what, []), (argv, outcome)


@given(DOCUMENTED_MUTATIONS)
@example(["Traceback", "eval", "|", "export", "|", "tune"])  # argparse quotes the word back: not a traceback
@capturing(fast())
def test_documented_commands_mutated_run_or_refuse_in_one_line(cli_root, capsys, argv):
    check_command(argv, capsys, cli_root)


@given(commands())
@capturing(fast())
def test_commands_with_junk_values_run_or_refuse_in_one_line(cli_root, capsys, argv):
    check_command(argv, capsys, cli_root)


@given(st.lists(TOKENS, max_size=8))
@capturing(fast())
def test_random_tokens_run_or_refuse_in_one_line(cli_root, capsys, argv):
    check_command(argv, capsys, cli_root)


@pytest.mark.slow
@given(DOCUMENTED_MUTATIONS)
@capturing(slow(3_000))
def test_documented_commands_mutated_at_scale(cli_root, capsys, argv):
    check_command(argv, capsys, cli_root)


@pytest.mark.slow
@given(commands())
@capturing(slow(3_000))
def test_commands_with_junk_values_at_scale(cli_root, capsys, argv):
    check_command(argv, capsys, cli_root)


@pytest.mark.slow
@given(st.lists(TOKENS, max_size=12))
@capturing(slow(2_000))
def test_random_tokens_at_scale(cli_root, capsys, argv):
    check_command(argv, capsys, cli_root)


def test_help_is_argparses_and_a_usage_error_is_one_line(cli_root, capsys):
    """--help still prints argparse's help (usage, options, the config fields) and exits 0; argparse's own errors
    printed the usage and then the message (several lines): now one line naming the command, with a hint."""
    outcome = run_cli(["train", "--help"], capsys, cli_root)
    assert (outcome.kind, outcome.code, outcome.err) == ("exit", 0, "")
    assert outcome.out.startswith("usage: kppo train [-h]") and "learning_rate" in outcome.out
    for argv, line in [
        (
            ["train", "--seed", "abc"],
            "kppo train: error: argument --seed: invalid int value: 'abc' (see kppo train --help)",
        ),
        (["train", "--bogus"], "kppo train: error: unrecognized arguments: '--bogus' (see kppo train --help)"),
        ([], "kppo: error: the following arguments are required: command (see kppo --help)"),
        (["tune", "a\nb", "c"], "kppo tune: error: unrecognized arguments: 'c' (see kppo tune --help)"),
    ]:
        outcome = run_cli(argv, capsys, cli_root)
        assert (outcome.kind, outcome.code, outcome.err) == ("exit", 2, line + "\n"), argv


# ---------------------------------------------------------------------------------------------------------------
# What Hypothesis (or a reading of the code) found, kept as regressions
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv, message",
    [
        # argparse's errors: the usage, then the message (two lines or more), SystemExit(2)
        (["bogus"], "kppo: error: argument command: invalid choice: 'bogus'"),
        (["train", "--seed"], "kppo train: error: argument --seed: expected one argument"),
        # an unknown argument's text may hold a newline: quoted, it stays on the line
        (["train", "a\nb", "c"], "kppo train: error: unrecognized arguments: 'c'"),
        (["export", "x", "--out", "o", "z\nz"], "kppo export: error: unrecognized arguments: 'z\\nz'"),
        # a character str.splitlines breaks at (\x1e, \u2028) in a name or in gymnasium's message split the line
        (["tune", "--env", "\x1e"], "--env: only an RL-Zoo file's entry is chosen so; use --set env='\\x1e'"),
        (["eval", "cartpole", "--env", "\x1e"], "Malformed environment ID: \\x1e."),
        (["train", "--set", "a\u2028b=["], "--set a\\u2028b: could not parse the value"),
        (["train", "--sweep", "a\x1eb=1", "--sweep", "a\x1eb=2"], "--sweep a\\x1eb: given twice"),
        (["train", "x", "y\x1ez"], "unrecognized arguments: 'y\\x1ez'"),
        # --set ' =': a blank name reached the options as '' ("unknown option ''", naming nothing given)
        (["train", "--set", " ="], "--set: expected name=value, got ' ='"),
        # --set: a value nested 100 deep overflowed PyYAML's composer (RecursionError, a traceback)
        (["train", "--set", "env=" + "[" * 100 + "]" * 100], "--set env: could not parse the value"),
        # --set: an alias bomb reached a repr of a billion strings (a hang)
        (["train", "--set", "env=" + YAML_JUNK[-1]], "--set env: could not parse the value"),
        (["train", "--set", "seed=" + "9" * 5000], "--set seed: could not parse the value"),
        # --sweep: a value that is no YAML was a yaml.ParserError (a traceback)
        (["train", "--sweep", "learning_rate=[1e-3,3e-4]"], "--sweep learning_rate: could not parse the values"),
        # --sweep: the same name twice lost the first grid silently
        (["train", "--sweep", "ent_coef=0,0.01", "--sweep", "ent_coef=0.1"], "--sweep ent_coef: given twice"),
        # --seeds: 0-99999999 built its list in quadratic time (a hang)
        (["train", "--seeds", "0-99999999"], "--seeds: expected at most 10,000 seeds, got '0-99999999'"),
        # kppo tune: --trials 0 or --timeout nan ran no trial and exited 1, silently; a negative sampler seed was
        # numpy's error, naming no option
        (["tune", "--trials", "0"], "--trials: expected an integer >= 1, got 0"),
        (["tune", "--timeout", "nan"], "--timeout: expected a positive number of seconds, got nan"),
        (["tune", "--sampler-seed", "-1"], "--sampler-seed: expected an integer from 0 to 2**32 - 1, got -1"),
        (["tune", "--pbt", "--pbt-quantile", "0.9"], "--pbt-quantile: expected a share in (0, 0.5]"),
        # an unregistered gymnasium id for a population or a search: said before building anything
        (["tune", "--set", "env=Nope-v0"], "env: expected a built-in task or a registered gymnasium id"),
        (["train", "--seeds", "0-1", "--set", "env=Nope-v0"], "env: expected a built-in task or a registered"),
        # kppo eval --seed -1 / kppo export --batch-size -1: refused before the env or the exporter says it its way
        (["eval", "x", "--seed", "-1"], "--seed: expected an integer from 0 to 2**32 - 1, got -1"),
        (["export", "x", "--batch-size", "-1"], "--batch-size: expected an integer >= 0 (0: a dynamic batch), got -1"),
    ],
)
def test_found_by_hypothesis(argv, message, cli_root, capsys):
    """Each was a traceback, a multi-line error, a hang or a silent loss before its fix (the comment says which)."""
    outcome = run_cli(argv, capsys, cli_root, FILES)
    check_outcome(outcome, argv)
    assert message in outcome.err, outcome.err


def test_a_population_run_whose_population_file_is_junk_is_refused_in_one_line(cli_root, capsys):
    """`kppo train --resume RUN` read population.yaml with `population["seeds"]`: a junk file was a KeyError or a
    TypeError (a traceback)."""
    argv = ["train", "--resume", "run"]
    for junk in (b"", b"seeds: 3\n", b"[1, 2]\n", b"seeds: [0, -1]\nsweep: {}\n", b"\xff\xfe", b"sweep: {a: 1}\n"):
        files = {"run/config.yaml": Config().to_yaml().encode(), "run/population.yaml": junk}
        outcome = run_cli(argv, capsys, cli_root, files)
        check_outcome(outcome, argv)
        assert "--resume: expected" in outcome.err and "population.yaml" in outcome.err, outcome.err


def test_the_write_watcher_sees_a_write_outside_the_folder(tmp_path):
    """The audit hook check can fail: a file written next to the watched folder is reported."""
    inside = tmp_path / "inside"
    inside.mkdir()
    with watching(inside) as outside:
        (inside / "ok").write_text("")
        (tmp_path / "escaped").write_text("")
        os.mkdir(tmp_path / "made")
        os.mkdir(tmp_path / "removed")
        os.rmdir(tmp_path / "removed")
    assert [entry.split()[0] for entry in outside] == ["open", "os.mkdir", "os.mkdir", "os.rmdir"], outside


@example(["train", "--set", "colour=blue"])
@given(st.just(["train", "--set", "colour=blue"]))
@capturing(fast(1))
def test_the_contract_check_fails_a_multi_line_error(cli_root, capsys, argv):
    """`check_outcome` can fail: the same refusal printed with the usage line first (argparse's habit) is caught."""
    outcome = run_cli(argv, capsys, cli_root)
    check_outcome(outcome, argv)
    with pytest.raises(AssertionError, match="not one line"):
        check_outcome(outcome._replace(err="usage: kppo train ...\n" + outcome.err), argv)
    with pytest.raises(AssertionError, match="wrote outside"):
        check_outcome(outcome._replace(outside=["open /elsewhere"]), argv)
