"""Bad input to kppo's readers of SB3 saves: other algorithms' zips (recorded with real SB3), truncated or tampered
zips, pickles that reach for a class (hand-written opcodes, never run), other SB3 versions, policies kppo cannot map:
each a one-line error naming the file; nothing executed."""

import base64
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest

import kppo
from kppo.core.errors import NotSupportedError
from kppo.sb3.saves.safe_pickle import NUMPY_NAMES, PickleRefused, read_pickle
from kppo.sb3.saves.torch_zip import read_state_dict

SAVED = Path(__file__).resolve().parents[1] / "fixtures" / "sb3" / "saved"
#: `os.system("touch <marker>")` as protocol-2 opcodes (GLOBAL + REDUCE) and protocol-4 (STACK_GLOBAL + REDUCE).
EVIL_GLOBAL = b"\x80\x02cos\nsystem\nq\x00X\x0c\x00\x00\x00touch pwnedAq\x01\x85q\x02Rq\x03."
EVIL_STACK = b"\x80\x04\x8c\x02os\x94\x8c\x06system\x94\x93\x94\x8c\x0ctouch pwnedB\x94\x85\x94R\x94."


def _one_line(err: pytest.ExceptionInfo, *parts: str) -> None:
    message = str(err.value)
    assert "\n" not in message, message
    for part in parts:
        assert part in message, message


@pytest.mark.parametrize("algo", ["sac", "dqn", "a2c"])
def test_other_algorithms_are_refused(algo):
    with pytest.raises(NotSupportedError) as err:
        kppo.PPO.load(SAVED / f"{algo}.zip")
    _one_line(err, f"{algo}.zip", {"sac": "SAC", "dqn": "DQN", "a2c": "A2C"}[algo])


def test_a_save_for_another_kppo_class_names_it():
    with pytest.raises(ValueError) as err:
        kppo.PPO.load(SAVED / "lstm.zip")
    _one_line(err, "lstm.zip", "kppo.RecurrentPPO.load")


def _rewrite(tmp_path: Path, source: str, **members: bytes) -> Path:
    """A copy of `source`.zip with `members` replaced (None: left out)."""
    target = tmp_path / f"{source}-changed.zip"
    with zipfile.ZipFile(SAVED / f"{source}.zip") as src, zipfile.ZipFile(target, "w") as out:
        for info in src.infolist():
            if info.filename in members:
                if members[info.filename] is not None:
                    out.writestr(info.filename, members[info.filename])
            else:
                out.writestr(info, src.read(info))
    return target


def test_a_truncated_zip_is_refused(tmp_path):
    data = (SAVED / "cartpole.zip").read_bytes()
    path = tmp_path / "cut.zip"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError) as err:
        kppo.PPO.load(path)
    _one_line(err, "cut.zip")


def test_a_tampered_member_is_refused(tmp_path):
    path = tmp_path / "tampered.zip"
    data = bytearray((SAVED / "cartpole.zip").read_bytes())
    with zipfile.ZipFile(SAVED / "cartpole.zip") as archive:
        info = archive.getinfo("policy.pth")
    header = info.header_offset  # the local header's own name and extra lengths
    name_len, extra_len = (int.from_bytes(data[header + k : header + k + 2], "little") for k in (26, 28))
    start = header + 30 + name_len + extra_len + info.compress_size // 2
    data[start : start + 8] = bytes(8)  # inside the compressed policy.pth: its CRC no longer matches
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError) as err:
        kppo.PPO.load(path)
    _one_line(err, "tampered.zip", "policy.pth")


@pytest.mark.parametrize("evil", [EVIL_GLOBAL, EVIL_STACK], ids=["GLOBAL", "STACK_GLOBAL"])
def test_a_pickle_reaching_for_a_class_runs_nothing(evil, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(PickleRefused) as err:
        read_pickle(evil, "evil.pkl", NUMPY_NAMES)
    _one_line(err, "evil.pkl", "os.system")
    (tmp_path / "vec.pkl").write_bytes(evil)
    with pytest.raises(ValueError) as err:
        kppo.VecNormalize.load(tmp_path / "vec.pkl", kppo.make_vec_env("Pendulum-v1", n_envs=1))
    _one_line(err, "vec.pkl", "os.system")
    assert not (tmp_path / "pwned").exists()


def test_a_policy_pth_holding_a_class_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with zipfile.ZipFile(SAVED / "cartpole.zip") as archive:
        policy = archive.read("policy.pth")
    inner = tmp_path / "policy.pth"
    with zipfile.ZipFile(_bytes(policy)) as src, zipfile.ZipFile(inner, "w") as out:
        for info in src.infolist():
            out.writestr(info, EVIL_GLOBAL if info.filename.endswith("data.pkl") else src.read(info))
    with pytest.raises(PickleRefused) as err:
        read_state_dict(inner.read_bytes(), "policy.pth")
    _one_line(err, "policy.pth", "os.system")
    path = _rewrite(tmp_path, "cartpole", **{"policy.pth": inner.read_bytes()})
    with pytest.raises(ValueError) as err:
        kppo.PPO.load(path)
    _one_line(err, "cartpole-changed.zip", "os.system")
    assert not (tmp_path / "pwned").exists()


def _bytes(data: bytes):
    import io

    return io.BytesIO(data)


def test_an_unreadable_sb3_version_is_refused(tmp_path):
    path = _rewrite(tmp_path, "cartpole", _stable_baselines3_version=b"1.8.0")
    with pytest.raises(NotSupportedError) as err:
        kppo.PPO.load(path)
    _one_line(err, "cartpole-changed.zip", "1.8.0", "2.x")


def test_a_policy_kppo_cannot_map_is_refused(tmp_path):
    with zipfile.ZipFile(SAVED / "cartpole.zip") as archive:
        data = json.loads(archive.read("data"))
    # a user's torch extractor, by reference (what cloudpickle writes for an importable class)
    blob = b"\x80\x04\x8c\x0amy_package\x94\x8c\x0bMyExtractor\x94\x93\x94."
    data["policy_kwargs"] = {
        ":type:": "<class 'dict'>",
        ":serialized:": base64.b64encode(
            b"\x80\x04}\x94\x8c\x18features_extractor_class\x94" + blob[2:-1] + b"s."
        ).decode(),
    }
    path = _rewrite(tmp_path, "cartpole", data=json.dumps(data).encode())
    with pytest.raises(NotSupportedError) as err:
        kppo.PPO.load(path)
    _one_line(err, "cartpole-changed.zip", "my_package", "MyExtractor")
    data["policy_class"][":serialized:"] = base64.b64encode(blob).decode()
    path = _rewrite(tmp_path, "cartpole", data=json.dumps(data).encode())
    with pytest.raises(NotSupportedError) as err:
        kppo.PPO.load(path)
    _one_line(err, "my_package.MyExtractor", "cannot map")


def test_weights_without_a_place_in_kppos_networks_are_refused(tmp_path):
    """A policy.pth whose tensors do not fit the saved architecture (here: the tensors of another save)."""
    with zipfile.ZipFile(SAVED / "lstm.zip") as archive:
        policy = archive.read("policy.pth")
    path = _rewrite(tmp_path, "cartpole", **{"policy.pth": policy})
    with pytest.raises(ValueError) as err:
        kppo.PPO.load(path)
    _one_line(err, "policy.pth")


def test_a_zip_without_policy_pth_is_refused(tmp_path):
    path = _rewrite(tmp_path, "cartpole", **{"policy.pth": None})
    assert not np.isnan(0.0)
    with pytest.raises(ValueError) as err:
        kppo.PPO.load(path)
    _one_line(err, "policy.pth")


def test_an_action_space_larger_than_the_saved_weights_is_refused_before_building():
    """Found by test_sb3_zip_properties: a bit flipped in multidiscrete.zip's pickled action space asked for a head
    of 2**28 outputs, which TensorFlow tried to allocate (out of memory, then a hang) instead of a one-line error."""
    import gymnasium as gym

    from kppo.sb3.saves.from_sb3 import model_from_sb3
    from kppo.sb3.saves.sb3_save import read_sb3_save

    saved = read_sb3_save(SAVED / "multidiscrete.zip")
    huge = saved._replace(action_space=gym.spaces.MultiDiscrete([2**28, 3]))
    with pytest.raises(ValueError, match=r"policy\.pth: expected the weights of the saved policy_kwargs and spaces"):
        model_from_sb3(kppo.PPO, huge, None, "auto", {})
    model_from_sb3(kppo.PPO, saved, None, "auto", {})  # the file as saved loads
