"""RL-Zoo's own `hyperparams/ppo.yml` (tests/fixtures/zoo/ppo.yml, unedited) read as rl-zoo3's train.py reads it, on
SB3's PPO defaults (`kppo.config.sb3_defaults`, the one table): every classic-control, Box2D and MuJoCo entry into a
valid Config, the keys without a kppo meaning refused in one line naming `<env id>.<key>`."""

import inspect
import warnings
from pathlib import Path

import pytest

from kppo.config.options import Config
from kppo.config.sb3_defaults import SB3_PPO_ARGUMENTS, SB3_PPO_DEFAULTS
from kppo.config.zoo import REFUSED, RETIRED_IDS, read_entry, zoo_entries
from kppo.sb3.ppo import PPO
from kppo.tuning.zoo import read_zoo

ZOO = Path(__file__).resolve().parents[1] / "fixtures" / "zoo" / "ppo.yml"
CLASSIC = ["CartPole-v1", "Pendulum-v1", "MountainCar-v0", "MountainCarContinuous-v0", "Acrobot-v1"]
BOX2D = ["BipedalWalker-v3", "BipedalWalkerHardcore-v3", "LunarLander-v2", "LunarLanderContinuous-v3"]
MUJOCO = [
    "Ant-v4",
    "Swimmer-v4",
    "HalfCheetah-v4",
    "Hopper-v4",
    "HumanoidStandup-v2",
    "Humanoid-v4",
    "InvertedDoublePendulum-v2",
    "InvertedPendulum-v2",
    "Reacher-v2",
    "Walker2d-v4",
]


def test_the_fixture_is_the_zoos_file_with_every_entry_family():
    entries = zoo_entries(ZOO)
    assert set(CLASSIC + BOX2D + MUJOCO + ["atari", "CarRacing-v2"]) <= set(entries)
    assert "github.com/DLR-RM/rl-baselines3-zoo" in ZOO.read_text().splitlines()[1]


@pytest.mark.parametrize("env", CLASSIC + BOX2D + MUJOCO)
def test_every_classic_control_box2d_and_mujoco_entry_reads_unedited(env):
    entry = read_entry(ZOO, env)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no minibatch warning: each batch_size divides its rollout or exceeds it
        env_id, config = read_zoo(ZOO, env)
    assert env_id == RETIRED_IDS.get(env, env) == config.env and isinstance(config, Config)
    settings = entry.settings
    assert config.num_envs == settings.get("n_envs", 1)  # RL-Zoo's default: one env
    rollouts = -(-int(settings["n_timesteps"]) // config.rollout_size)  # SB3's learn: whole rollouts up to it
    assert config.total_timesteps == rollouts * config.rollout_size >= int(settings["n_timesteps"])
    assert config.num_steps == settings.get("n_steps", SB3_PPO_ARGUMENTS["n_steps"])
    batch = min(settings.get("batch_size", SB3_PPO_ARGUMENTS["batch_size"]), config.rollout_size)
    assert config.minibatch_size == batch  # SB3's minibatches
    assert (config.adam_style, config.advantage_std_ddof, config.clip_range_vf) == ("torch", 1, None)
    assert config.box_actions == "clip" and config.vf_clip_mode == "clipped"
    assert config.normalize_obs == config.normalize_reward == bool(settings.get("normalize", False))
    lr = settings.get("learning_rate", SB3_PPO_ARGUMENTS["learning_rate"])
    assert config.lr_schedule == ("linear" if str(lr).startswith("lin_") else "constant")


@pytest.mark.parametrize("env", CLASSIC + BOX2D + MUJOCO)
def test_every_entry_names_an_id_gymnasium_registers(env):
    # gymnasium 1.x retired LunarLander-v2 and the mujoco-py -v2 ids: those entries train on their successors
    import gymnasium as gym

    pytest.importorskip({"Box2D": "Box2D", "MuJoCo": "mujoco"}.get(_family(env), "gymnasium"))
    spec = gym.spec(read_entry(ZOO, env).env)
    assert spec.id == RETIRED_IDS.get(env, env)


def _family(env: str) -> str:
    return "Box2D" if env in BOX2D else "MuJoCo" if env in MUJOCO else "classic"


def test_a_retired_id_and_its_successor_pick_the_same_entry():
    old, new = read_entry(ZOO, "LunarLander-v2"), read_entry(ZOO, "LunarLander-v3")
    assert old == new and (old.key, old.env) == ("LunarLander-v2", "LunarLander-v3")
    assert read_entry(ZOO, "LunarLanderContinuous-v3").env == "LunarLanderContinuous-v3"  # a current id stays
    with pytest.raises(ValueError, match="expected one of the file's envs"):
        read_entry(ZOO, "Reacher-v5")  # only the successor named in RETIRED_IDS


def test_batch_size_defaults_to_sb3s_64_not_kppos_four_minibatches():
    # Pendulum-v1 gives no batch_size: SB3 trains minibatches of 64 of its 4 x 1024 rollout (64 of them), where
    # read_zoo gave kppo's default of 4 minibatches of 1,024.
    _, pendulum = read_zoo(ZOO, "Pendulum-v1")
    assert (pendulum.rollout_size, pendulum.minibatch_size, pendulum.num_minibatches) == (4096, 64, 64)
    _, acrobot = read_zoo(ZOO, "Acrobot-v1")  # 16 x 256 = 4,096 as well
    assert (acrobot.minibatch_size, acrobot.num_minibatches) == (64, 64)


def test_box_actions_are_clipped_as_sb3_clips_them():
    # SB3 clips an unsquashed Box action to the bounds; read_zoo gave kppo's default, `rescale`.
    for env in ("Pendulum-v1", "MountainCarContinuous-v0", "HalfCheetah-v4", "BipedalWalker-v3"):
        assert read_zoo(ZOO, env)[1].box_actions == "clip", env


def test_policy_kwargs_strings_with_torch_names_become_keras_fields():
    _, cheetah = read_zoo(ZOO, "HalfCheetah-v4")
    assert cheetah.activation == "relu" and cheetah.actor_hidden_units == (256, 256) == cheetah.critic_hidden_units
    assert (cheetah.log_std_init, cheetah.kernel_init, cheetah.bias_init) == (-2.0, "torch_default", "torch_default")
    _, car = read_zoo(ZOO, "MountainCarContinuous-v0")
    assert (car.log_std_init, car.use_sde, car.normalize_obs, car.num_minibatches) == (-3.29, True, True, 1)


def test_atari_and_wrapper_entries():
    # The `atari` entry: SB3's AtariWrapper, frame_stack, CnnPolicy (heads on the CNN's features), lin_ schedules.
    entry = read_entry(ZOO, "PongNoFrameskip-v4", is_atari=lambda env: env.endswith("NoFrameskip-v4"))
    assert (entry.key, entry.env, entry.policy) == ("atari", "PongNoFrameskip-v4", "CnnPolicy")
    _, atari = read_zoo(ZOO, "atari")
    assert (atari.atari_wrapper, atari.frame_stack, atari.features_extractor) == (True, 4, "cnn")
    assert atari.actor_hidden_units == () and (atari.lr_schedule, atari.clip_schedule) == ("linear", "linear")
    # Wrappers kppo does not build are refused in one line naming the key and the wrapper.
    with pytest.raises(ValueError, match=r"MiniGrid-DoorKey-5x5-v0.env_wrapper: expected .*AtariWrapper.*got "):
        read_zoo(ZOO, "MiniGrid-DoorKey-5x5-v0")
    with pytest.raises(ValueError, match=r"CarRacing-v2.env_wrapper: .*got 'rl_zoo3.wrappers.FrameSkip'"):
        read_zoo(ZOO, "CarRacing-v2")


@pytest.mark.parametrize(
    "line, message",
    [
        ("policy_kwargs: '[64, 64]'", "Pendulum-v1.policy_kwargs: expected dict(...), got [64, 64]"),
        ("policy_kwargs: 'dict(activation_fn=nn.PReLU)'", "Pendulum-v1.policy_kwargs: expected a torch activation"),
        ("policy_kwargs: 'dict(net_arch=[0])'", "Pendulum-v1.policy_kwargs.net_arch: expected a list of positive"),
        ("policy_kwargs: 'dict(optimizer_class=th.optim.Adam)'", "Pendulum-v1.policy_kwargs: expected literals"),
        ("n_steps: 0", "Pendulum-v1.n_steps: num_steps: expected"),
        ("gamma: 2", "Pendulum-v1.gamma: expected"),
        ("callback: a.B", "Pendulum-v1.callback: not read by kppo (callbacks named by class path"),
        ("n_stepz: 3", "Pendulum-v1.n_stepz: expected an SB3 PPO argument, an RL-Zoo key or a kppo option"),
        ("policy: MlpLstmPolicy", "Pendulum-v1.policy: expected one of MlpPolicy, CnnPolicy, MultiInputPolicy"),
    ],
)
def test_a_bad_key_is_refused_in_one_line_naming_it(tmp_path, line, message):
    path = tmp_path / "ppo.yml"
    path.write_text(f"Pendulum-v1:\n  n_timesteps: 1000\n  {line}\n")
    with pytest.raises(ValueError) as err:
        read_zoo(path)
    assert message in str(err.value) and len(str(err.value).splitlines()) == 1, str(err.value)


def test_every_refused_key_says_why():
    assert all(reason and "\n" not in reason for reason in REFUSED.values())


def test_one_table_of_sb3s_defaults_is_what_kppo_ppo_takes():
    # kppo.PPO's signature reads the table; a Config of SB3's defaults is SB3's update and semantics.
    signature = inspect.signature(PPO.__init__).parameters
    assert {name: signature[name].default for name in SB3_PPO_ARGUMENTS} == SB3_PPO_ARGUMENTS
    config = Config(**SB3_PPO_DEFAULTS)
    assert (config.learning_rate, config.num_steps, config.num_epochs, config.ent_coef) == (3e-4, 2048, 10, 0.0)
    assert (config.lr_schedule, config.adam_style, config.clip_range_vf, config.box_actions) == (
        "constant",
        "torch",
        None,
        "clip",
    )
