"""The deployment kit (export/, the distribution kppo-runtime, imported as kppo_runtime) runs artifacts without
TensorFlow and reproduces the Python policy's episodes. It runs from its installation (`pip install -e ./export`), in
processes where importing TensorFlow or kppo fails."""

import importlib.metadata
import json
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import kppo

ROOT = Path(__file__).resolve().parents[1]
BLOCK_TF = (
    "import sys\n"
    "for name in ('tensorflow', 'keras', 'tf_keras', 'tensorflow_probability', 'kppo'):\n"
    "    sys.modules[name] = None  # any import of these now raises ImportError\n"
)
SCRIPTS = Path(sysconfig.get_path("scripts"))  # where pip put the kit's console scripts


@pytest.fixture(autouse=True, scope="module")
def _installed_kit():
    """The kit is a distribution of its own: the tests run the installed one (not the export/ folder on sys.path)."""
    try:
        importlib.metadata.distribution("kppo-runtime")
    except importlib.metadata.PackageNotFoundError:
        pytest.fail("the deployment kit is not installed: pip install -e ./export", pytrace=False)


def _python_returns(policy, env_id, seeds):
    env = gym.make(env_id)
    returns = []
    for seed in seeds:
        obs, _ = env.reset(seed=seed)
        total, done = 0.0, False
        while not done:
            action = policy.get_action(obs)
            obs, reward, terminated, truncated, _ = env.step(int(action) if action.ndim == 0 else action)
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    return returns


def _kit(code: str) -> dict:
    out = subprocess.run([sys.executable, "-c", BLOCK_TF + code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
def test_kit_reproduces_the_python_policy_without_tensorflow(env_id, request, tmp_path):
    """CartPole: the module's policy trained on gymnasium envs (`cartpole`); Pendulum: the module's squashed run with
    normalized observations (`pendulum`)."""
    result = request.getfixturevalue("pendulum") if env_id == "Pendulum-v1" else request.getfixturevalue("cartpole")[0]
    exported = kppo.export(result, tmp_path / "policy.tflite")
    seeds = [11, 12, 13]
    want = _python_returns(result.policy, env_id, seeds)
    got = _kit(
        "import json\n"
        "try:\n    import tensorflow\n    blocked = False\nexcept ImportError:\n    blocked = True\n"
        "from kppo_runtime.evaluate import run_episodes\nfrom kppo_runtime.runtime import Controller\n"
        f"returns = [run_episodes(Controller({str(exported.path)!r}), {env_id!r}, 1, s)[0] for s in {seeds}]\n"
        "print(json.dumps({'blocked': blocked, 'tf_loaded': 'tensorflow' in sys.modules and sys.modules['tensorflow'] "
        "is not None, 'returns': returns}))\n"
    )
    assert got["blocked"] and not got["tf_loaded"]
    np.testing.assert_allclose(got["returns"], want, rtol=0.01)


@pytest.fixture(scope="module")
def pendulum():
    """A short squashed Pendulum run with normalized observations (3 values in, a torque in [-2, 2] out), trained
    once per module for the tests that export it."""
    return kppo.train(
        "Pendulum-v1",
        kppo.Config(num_envs=4, num_steps=16, total_timesteps=128, eval_freq=1, squash=True, normalize_obs=True),
    )


def test_latency_and_controller_errors(pendulum, tmp_path):
    exported = kppo.export(pendulum, tmp_path / "p.tflite")
    got = _kit(
        "import json\nfrom kppo_runtime.latency import measure\nfrom kppo_runtime.runtime import Controller\n"
        f"c = Controller({str(exported.path)!r})\n"
        "r = measure(c, 200)\n"
        "try:\n    c.act([1.0, 2.0])\n    err = ''\nexcept ValueError as e:\n    err = str(e)\n"
        "print(json.dumps({**r, 'err': err}))\n"
    )
    assert 0 < got["invoke_us"] < 10_000 and got["act_us"] >= got["invoke_us"] * 0.5
    assert got["err"] == "obs: expected 3 values once flattened, got 2"


@pytest.mark.parametrize("quantize", [None, "int8"])
def test_tflite_micro_runs_float32_and_int8_artifacts(pendulum, quantize, tmp_path):
    exported = kppo.export(pendulum, tmp_path / "p.tflite", quantize=quantize)
    got = _kit(
        "import json\nfrom kppo_runtime.micro_check import check\n"
        f"print(json.dumps(check({str(exported.path)!r}, 100)))\n"
    )
    assert 0 < got["arena_bytes"] <= 16 * 1024
    # float32: the same arithmetic up to float rounding; int8: TFLite Micro and LiteRT may round a value on either
    # side of a quantization step (one step of the output is ~1e-3 of Pendulum's [-2, 2] torque)
    assert got["max_abs_error_vs_litert"] <= (1e-5 if quantize is None else 0.05)
    assert got["mean_abs_error_vs_litert"] <= (1e-6 if quantize is None else 1e-3)


def _micro_check_cli(path, *args) -> subprocess.CompletedProcess:
    code = f"from kppo_runtime.micro_check import main\nsys.exit(main([{str(path)!r}, *{list(args)!r}]))\n"
    return subprocess.run(
        [sys.executable, "-c", BLOCK_TF + code], cwd=ROOT, capture_output=True, text=True, timeout=300
    )


@pytest.fixture(scope="module")
def cartpole(tmp_path_factory):
    """CartPole trained on gymnasium envs (a short run: the network has the default 2 x 64 tanh shape) and its int8
    export."""
    config = kppo.Config(
        num_envs=8, num_steps=64, total_timesteps=8 * 64 * 8, eval_freq=1, num_eval_envs=2, env_backend="gymnasium"
    )
    result = kppo.train("CartPole-v1", config, seed=0)
    return result, kppo.export(result, tmp_path_factory.mktemp("cartpole") / "policy_int8.tflite", quantize="int8")


def test_the_int8_cartpole_artifact_runs_under_tflite_micro(cartpole):
    """The issue: micro_check printed "Node FULLY_CONNECTED (number 3) failed to prepare" and died with SIGSEGV. The
    model was fine; TFLite Micro crashes (or misreports a node) when the arena is a few bytes too small, and the arena
    search probed such sizes in-process. Probes now run in child processes."""
    _, exported = cartpole
    out = _micro_check_cli(exported.path, "--observations", "300")
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert 0 < got["arena_bytes"] <= 8 * 1024 and got["observations"] == 300
    assert got["action_mismatch_vs_litert"] <= 0.01  # int8 rounding on a knife-edge observation, at most
    assert exported.metadata["calibration"]["source"] == "policy rollouts in CartPole-v1"
    assert {"QUANTIZE", "FULLY_CONNECTED", "ARG_MAX"} <= set(exported.metadata["tflite_ops"])


def test_micro_check_reports_a_model_tflite_micro_rejects_in_one_line(cartpole, tmp_path):
    result, _ = cartpole
    exported = kppo.export(result, tmp_path / "policy_dynamic.tflite", quantize="dynamic")  # float input, int8 weights
    out = _micro_check_cli(exported.path)
    assert out.returncode == 2 and out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("kppo-micro-check: TFLite Micro rejects policy_dynamic.tflite")
    assert "FULLY_CONNECTED" in lines[0] and "not dynamic-range ones" in lines[0]


def test_a_tflite_micro_crash_is_a_one_line_reason_not_the_end_of_the_check(cartpole):
    """An arena of 256 bytes makes this TFLite Micro build dereference a failed allocation (SIGSEGV)."""
    _, exported = cartpole
    got = _kit(
        "import json\nimport numpy as np\nfrom kppo_runtime.micro_check import run_isolated\n"
        f"model = open({str(exported.path)!r}, 'rb').read()\n"
        "out, reason = run_isolated(model, 256, np.zeros((2, 4), np.float32))\n"
        "ok, _ = run_isolated(model, 64 * 1024, np.zeros((2, 4), np.float32))\n"
        "print(json.dumps({'out': out, 'reason': reason, 'ok': ok.tolist()}))\n"
    )
    assert got["out"] is None and got["reason"] and "\n" not in got["reason"]
    assert len(got["ok"]) == 2  # the checking process goes on


@pytest.mark.slow
def test_int8_cartpole_keeps_the_closed_loop_return(tmp_path):
    """The issue's numbers: the default CartPole run, int8 vs float32 over 30 episodes (README: within 3%)."""
    result = kppo.train("CartPole-v1", kppo.Config(), seed=0)
    paths = [kppo.export(result, tmp_path / f"{q or 'float32'}.tflite", quantize=q).path for q in (None, "int8")]
    got = _kit(
        "import json\nfrom kppo_runtime.evaluate import run_episodes\n"
        "from kppo_runtime.runtime import Controller\n"
        f"paths = {list(map(str, paths))}\n"
        "print(json.dumps([run_episodes(Controller(p), 'CartPole-v1', 30, 0) for p in paths]))\n"
    )
    float32, int8 = (np.mean(r) for r in got)
    assert int8 >= 0.97 * float32, (float32, int8)


def test_kit_runs_a_discrete_observation_policy_without_tensorflow(tmp_path):
    """FrozenLake-v1: Discrete(16) observations; the kit passes the raw integer, the artifact one-hot encodes it.
    float32 and int8 artifacts play the Python policy's episodes and run under TFLite Micro."""
    result = kppo.train(
        "FrozenLake-v1",
        kppo.Config(
            num_envs=8, num_steps=64, total_timesteps=8 * 64 * 4, eval_freq=1, num_eval_envs=2, learning_rate=1e-3
        ),
        seed=0,
    )
    paths = [str(kppo.export(result, tmp_path / f"{q}.tflite", quantize=q).path) for q in (None, "int8")]
    seeds = list(range(20))
    want = _python_returns(result.policy, "FrozenLake-v1", seeds)
    got = _kit(
        "import json\nfrom kppo_runtime.evaluate import run_episodes\nfrom kppo_runtime.micro_check import check\n"
        "from kppo_runtime.runtime import Controller\n"
        f"paths, seeds = {paths}, {seeds}\n"
        "returns = [[run_episodes(Controller(p), 'FrozenLake-v1', 1, s)[0] for s in seeds] for p in paths]\n"
        "c = Controller(paths[0])\n"
        "acts = [c.act(s) for s in range(16)]\n"
        "print(json.dumps({'returns': returns, 'acts': acts, 'micro': [check(p, 200) for p in paths]}))\n"
    )
    assert got["returns"][0] == want
    np.testing.assert_array_equal(got["acts"], result.policy.get_action(np.arange(16)))
    for micro in got["micro"]:
        assert 0 < micro["arena_bytes"] <= 16 * 1024 and micro["action_mismatch_vs_litert"] == 0


@pytest.fixture(scope="module")
def masked_model():
    """A MaskablePPO model on MultiDiscrete([3, 4]) choices with action masks, trained once per module."""
    import functools

    from tests.helpers.masked_envs import MaskedChoiceEnv

    model = kppo.MaskablePPO(
        "MlpPolicy", functools.partial(MaskedChoiceEnv, nvec=[3, 4]), n_steps=64, batch_size=64, n_epochs=2, seed=0
    )
    return model.learn(128)


@pytest.mark.parametrize(
    "quantize",
    [
        None,
        # slow: int8 under TFLite Micro is checked in the default suite by test_kit_runs_a_discrete_observation_policy_
        # without_tensorflow, test_the_int8_cartpole_artifact_runs_under_tflite_micro and
        # test_tflite_micro_runs_float32_and_int8_artifacts[int8]; masked int8 artifacts by tests/exporter/test_artifact
        pytest.param("int8", marks=pytest.mark.slow),
    ],
)
def test_masked_artifacts_run_in_the_kit_and_under_tflite_micro(masked_model, quantize, tmp_path):
    """The kit's controller takes the mask; TFLite Micro runs the masked artifact (random masks) as LiteRT does.
    (int8: slow, see the parameter's comment.)"""
    exported = kppo.export(masked_model, tmp_path / "masked.tflite", quantize=quantize)
    got = _kit(
        "import json\nimport numpy as np\nfrom kppo_runtime.micro_check import check\n"
        "from kppo_runtime.runtime import Controller\n"
        f"c = Controller({str(exported.path)!r})\n"
        "actions = [c.act(np.eye(7, dtype=np.float32)[i], np.eye(7)[[i % 3, 3 + i % 4]].sum(0)).tolist() "
        "for i in range(7)]\n"
        "errors = []\n"
        "for mask in (None, np.ones(5), np.zeros(7)):\n"
        "    try:\n        c.act(np.zeros(7), mask)\n    except ValueError as e:\n        errors.append(str(e))\n"
        f"print(json.dumps({{'actions': actions, 'errors': errors, 'micro': check({str(exported.path)!r}, 100)}}))\n"
    )
    assert got["actions"] == [[i % 3, i % 4] for i in range(7)]  # the only allowed action of each dimension
    assert got["errors"] == [
        "mask: expected 7 values, got None",
        "mask: expected 7 values with one allowed action at least, got 5 values, 5 allowed",
        "mask: expected 7 values with one allowed action at least, got 7 values, 0 allowed",
    ]
    assert got["micro"]["action_mismatch_vs_litert"] == 0.0 and 0 < got["micro"]["arena_bytes"] <= 16 * 1024


def test_the_kit_refuses_a_mask_for_an_unmasked_artifact(cartpole):
    _, exported = cartpole
    got = _kit(
        "import json\nfrom kppo_runtime.runtime import Controller\n"
        f"c = Controller({str(exported.path)!r})\n"
        "try:\n    c.act([0.0] * 4, [1, 1])\n    err = ''\nexcept ValueError as e:\n    err = str(e)\n"
        "print(json.dumps({'err': err}))\n"
    )
    assert got["err"] == "mask: expected None (the artifact takes no mask), got a mask"


def test_the_controller_needs_neither_gymnasium_nor_tflite_micro():
    """A device that only acts installs numpy + ai-edge-litert: gymnasium and tflite-micro are extras (eval, micro),
    used by evaluate and micro_check only; evaluate imports without gymnasium and says what to install when it is
    asked to play episodes."""
    requires = importlib.metadata.requires("kppo-runtime")
    hard = {re.match(r"[\w.-]+", r).group() for r in requires if "extra ==" not in r}
    assert hard == {"numpy", "ai-edge-litert"}, requires
    got = _kit(
        "import json\n"
        "for name in ('gymnasium', 'gym', 'tflite_micro'):\n    sys.modules[name] = None\n"
        "import kppo_runtime.runtime, kppo_runtime.latency, kppo_runtime.micro_check\n"
        "import kppo_runtime.evaluate\n"
        "try:\n    kppo_runtime.evaluate.run_episodes(None, 'CartPole-v1', 1, 0)\n    err = ''\n"
        "except ImportError as e:\n    err = str(e)\n"
        "print(json.dumps({'err': err}))\n"
    )
    assert got["err"].startswith('kppo_runtime.evaluate needs gymnasium: pip install "kppo-runtime[eval]"')


def test_the_kit_commands_run_from_their_console_scripts_and_with_python_m(cartpole):
    _, exported = cartpole
    path = str(exported.path)

    def run(*command):
        out = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr[-2000:]
        return out.stdout.strip().splitlines()[-1]

    assert run(SCRIPTS / "kppo-latency", path, "--calls", "100").startswith("median ")
    assert run(SCRIPTS / "kppo-evaluate", path, "--env", "CartPole-v1", "--episodes", "1").startswith("CartPole-v1: ")
    assert json.loads(run(SCRIPTS / "kppo-micro-check", path, "--observations", "20"))["observations"] == 20
    assert run(
        sys.executable, "-m", "kppo_runtime.evaluate", path, "--env", "CartPole-v1", "--episodes", "1"
    ).startswith("CartPole-v1: ")


def _kit_cli(module: str, args: list, block: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """`python -m kppo_runtime.<module> args` without TensorFlow (and without the modules in `block`)."""
    hide = "".join(f"sys.modules[{name!r}] = None\n" for name in block)
    code = f"{hide}from kppo_runtime.{module} import main\nsys.exit(main({[str(a) for a in args]!r}))\n"
    return subprocess.run(
        [sys.executable, "-c", BLOCK_TF + code], cwd=ROOT, capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize(
    "module, args, block, says",
    [
        (
            "evaluate",
            ["{artifact}", "--env", "Pendulum-v1"],
            ("gymnasium",),
            "kppo-evaluate: kppo_runtime.evaluate needs gymnasium",
        ),
        ("evaluate", ["{missing}", "--env", "CartPole-v1"], (), "kppo-evaluate: "),
        ("evaluate", ["{artifact}", "--env", "NoSuchEnv-v9"], (), "kppo-evaluate: "),
        ("latency", ["{damaged}"], (), "kppo-latency: "),
        ("micro_check", ["{damaged}"], (), "kppo-micro-check: "),
    ],
)
def test_the_kits_command_lines_fail_in_one_line_with_status_2(cartpole, tmp_path, module, args, block, says):
    """A missing extra, a missing file, an unknown env and a damaged artifact: one line on standard error, exit 2
    (kppo-evaluate without gymnasium printed a two-exception traceback)."""
    _, exported = cartpole
    damaged = tmp_path / "damaged.tflite"
    damaged.write_bytes(exported.path.read_bytes()[:200])
    meta = exported.path.with_name(exported.path.name + ".metadata.json")
    (tmp_path / "damaged.tflite.metadata.json").write_text(meta.read_text())
    paths = {"artifact": exported.path, "missing": tmp_path / "none.tflite", "damaged": damaged}
    out = _kit_cli(module, [a.format(**paths) for a in args], block)
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(lines) == 1, out.stderr[-2000:]
    assert lines[0].startswith(says) and "Traceback" not in out.stderr
