"""SB3 policy_kwargs as SB3 takes them: net_arch in every format SB3 reads, torch optimizers named by module and
qualname (torch is not imported), features extractors (a Keras layer; a torch module is refused)."""

import warnings

import gymnasium as gym
import keras
import numpy as np
import pytest

from kppo.config.options import Config
from kppo.core.errors import ArgumentTypeError, NotSupportedError
from kppo.agent.extractors import NatureCNN
from kppo.sb3.arguments import (
    NET_ARCH_LIST_WARNING,
    check_extractor_class,
    extractor_fields,
    net_arch_units,
    optimizer_config,
    policy_config,
)


def _torch_named(module: str, qualname: str) -> type:
    """A class standing in for a torch class: what kppo reads of it is its module and qualname."""
    cls = type(qualname, (), {})
    cls.__module__, cls.__qualname__ = module, qualname
    return cls


ADAM = _torch_named("torch.optim.adam", "Adam")
ADAMW = _torch_named("torch.optim.adamw", "AdamW")
RMSPROP = _torch_named("torch.optim.rmsprop", "RMSprop")
SGD = _torch_named("torch.optim.sgd", "SGD")
RMSPROP_TF = _torch_named("stable_baselines3.common.sb2_compat.rmsprop_tf_like", "RMSpropTFLike")


@pytest.mark.parametrize(
    "net_arch, expected",
    [
        (None, ([64, 64], [64, 64])),  # SB3's default
        ([], ([], [])),  # no hidden layer: the heads on the observations
        ([32, 16], ([32, 16], [32, 16])),
        (dict(pi=[], vf=[64]), ([], [64])),  # sb3-contrib's LSTM examples
        (dict(vf=[8]), ([], [8])),  # a missing key is an empty list, as SB3's MlpExtractor
    ],
)
def test_net_arch_formats(net_arch, expected):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert net_arch_units(net_arch) == expected


def test_the_old_list_format_warns_with_sb3s_text_and_is_read_as_its_dict():
    with pytest.warns(UserWarning) as record:
        assert net_arch_units([dict(pi=[32], vf=[16])]) == ([32], [16])
    assert str(record[0].message) == NET_ARCH_LIST_WARNING


@pytest.mark.parametrize(
    "net_arch, message",
    [
        ([64, dict(pi=[8], vf=[8])], r"shared layers before a dict were removed in SB3 1\.8\.0"),
        (dict(pi=[8], qf=[8]), "expected keys 'pi' and 'vf'"),
        (dict(pi=[0]), r"net_arch\['pi'\]: expected a list of positive ints"),
        ("64", "expected a list of ints or dict"),
    ],
)
def test_net_arch_sb3_cannot_build_is_a_type_error(net_arch, message):
    with pytest.raises(ArgumentTypeError, match=message) as err:
        net_arch_units(net_arch)
    assert isinstance(err.value, TypeError) and "\n" not in str(err.value)


def test_empty_heads_make_a_valid_config():
    fields = policy_config(dict(net_arch=dict(pi=[], vf=[64])))
    config = Config(**fields)
    assert (config.actor_hidden_units, config.critic_hidden_units) == ((), (64,))
    assert Config.from_yaml(config.to_yaml()) == config


@pytest.mark.parametrize(
    "cls, kwargs, expected",
    [
        (ADAM, None, {"optimizer": "adam"}),  # SB3: eps=1e-5 when no kwargs are given (kppo's default)
        (ADAM, {}, {"optimizer": "adam", "optimizer_eps": 1e-8}),  # SB3 then passes torch's defaults
        (
            ADAM,
            dict(betas=(0.8, 0.9), eps=1e-6, weight_decay=0.01, foreach=True),
            {"optimizer": "adam", "adam_beta_1": 0.8, "adam_beta_2": 0.9, "optimizer_eps": 1e-6, "weight_decay": 0.01},
        ),
        (
            RMSPROP,
            dict(alpha=0.9, eps=1e-5, momentum=0.5, centered=True),
            {
                "optimizer": "rmsprop",
                "rmsprop_alpha": 0.9,
                "optimizer_eps": 1e-5,
                "optimizer_momentum": 0.5,
                "rmsprop_centered": True,
            },
        ),
        (
            RMSPROP_TF,
            dict(alpha=0.99, eps=1e-5),
            {"optimizer": "rmsprop_tf", "rmsprop_alpha": 0.99, "optimizer_eps": 1e-5},
        ),
        (RMSPROP, None, {"optimizer": "rmsprop", "optimizer_eps": 1e-8}),
        (ADAMW, None, {"optimizer": "adamw", "optimizer_eps": 1e-8, "weight_decay": 0.01}),  # torch's defaults
        (
            ADAMW,
            dict(betas=(0.8, 0.9), weight_decay=0.1),
            {"optimizer": "adamw", "adam_beta_1": 0.8, "adam_beta_2": 0.9, "optimizer_eps": 1e-8, "weight_decay": 0.1},
        ),
        (
            SGD,
            dict(momentum=0.9, nesterov=True),
            {"optimizer": "sgd", "optimizer_eps": 1e-8, "optimizer_momentum": 0.9, "sgd_nesterov": True},
        ),
    ],
)
def test_torch_optimizers_map_to_config_fields(cls, kwargs, expected):
    fields = optimizer_config(cls, kwargs)
    assert fields == expected
    Config(**fields, adam_style="torch")  # valid


@pytest.mark.parametrize(
    "cls, kwargs, error, message",
    [
        (_torch_named("torch.optim.nadam", "NAdam"), None, ArgumentTypeError, "got torch.optim.nadam.NAdam"),
        (ADAMW, dict(amsgrad=True), NotSupportedError, "optimizer_kwargs.amsgrad: expected False"),
        (keras.optimizers.Adam, None, ArgumentTypeError, "got keras.src.optimizers.adam.Adam"),
        (ADAM, dict(lr=0.1), ArgumentTypeError, "takes no 'lr' here"),
        (ADAM, dict(amsgrad=True), NotSupportedError, "optimizer_kwargs.amsgrad: expected False"),
        (RMSPROP_TF, dict(foreach=True), ArgumentTypeError, "takes no 'foreach'"),
        (SGD, dict(betas=(0.9, 0.9)), ArgumentTypeError, "takes no 'betas'"),
    ],
)
def test_optimizers_kppo_does_not_build_are_named_in_one_line(cls, kwargs, error, message):
    with pytest.raises(error, match=message) as err:
        optimizer_config(cls, kwargs)
    assert "\n" not in str(err.value)


def test_policy_kwargs_optimizer_reaches_the_config():
    fields = policy_config(dict(optimizer_class=RMSPROP, optimizer_kwargs=dict(alpha=0.99, eps=1e-5)))
    assert (fields["optimizer"], fields["optimizer_eps"], fields["rmsprop_alpha"]) == ("rmsprop", 1e-5, 0.99)
    assert "optimizer" not in policy_config({})  # no optimizer_class: kppo's (and SB3's) Adam, eps 1e-5


class _Features(keras.layers.Layer):
    def __init__(self, units=8, **kwargs):
        super().__init__(**kwargs)
        self.dense = keras.layers.Dense(units, activation="relu")

    def call(self, obs):
        return self.dense(obs)


def test_a_keras_extractor_class_is_kept_and_a_torch_module_is_refused():
    check_extractor_class(_Features)
    kwargs = dict(features_extractor_class=_Features, features_extractor_kwargs=dict(units=4))
    fields = extractor_fields("MlpPolicy", kwargs, None)
    assert "features_extractor" not in fields and kwargs["features_extractor_class"] is _Features  # a user's layer
    module = _torch_named("torch.nn.modules.module", "Module")
    cnn = type("NatureCNN", (module,), {})
    with pytest.raises(ArgumentTypeError, match=r"expected a Keras layer class .* got the torch module"):
        check_extractor_class(cnn)
    with pytest.raises(ArgumentTypeError, match="expected a Keras layer class, got <class 'object'>"):
        check_extractor_class(object)


def test_sb3_policy_names_and_kppo_extractor_classes_become_config_fields():
    image = gym.spaces.Box(0, 255, (40, 40, 3), np.uint8)
    assert extractor_fields("CnnPolicy", {}, image)["features_extractor"] == "cnn"
    vectors = gym.spaces.Dict(a=gym.spaces.Box(-1, 1, (2,)), b=gym.spaces.Box(-1, 1, (3,)))
    assert extractor_fields("MultiInputPolicy", {}, vectors)["features_extractor"] == "flatten"  # nothing to convolve
    mixed = gym.spaces.Dict(image=image, b=gym.spaces.Box(-1, 1, (3,)))
    assert extractor_fields("MultiInputPolicy", {}, mixed)["features_extractor"] == "combined"
    kwargs = dict(
        features_extractor_class=NatureCNN,
        features_extractor_kwargs=dict(features_dim=256),
        normalize_images=False,
        share_features_extractor=False,
    )
    fields = extractor_fields("MlpPolicy", kwargs, image)
    assert fields == dict(
        features_extractor="nature_cnn", features_dim=256, normalize_images=False, share_features_extractor=False
    )
    assert kwargs == {} and Config(**fields).features_dim == 256
    with pytest.raises(ArgumentTypeError, match="NatureCNN takes features_dim here, got \\['channels'\\]"):
        extractor_fields(
            "CnnPolicy", dict(features_extractor_class=NatureCNN, features_extractor_kwargs={"channels": 1}), image
        )
    # without a class, SB3 gives the kwargs to the policy's default extractor (its most common CNN / Dict setting)
    assert extractor_fields("CnnPolicy", dict(features_extractor_kwargs={"features_dim": 32}), image) == dict(
        features_extractor="cnn", features_dim=32, normalize_images=True, share_features_extractor=True
    )
    combined = extractor_fields("MultiInputPolicy", dict(features_extractor_kwargs={"cnn_output_dim": 64}), mixed)
    assert (combined["features_extractor"], combined["features_dim"]) == ("combined", 64)
    flat = extractor_fields("MultiInputPolicy", dict(features_extractor_kwargs={"cnn_output_dim": 64}), vectors)
    assert (flat["features_extractor"], flat["features_dim"]) == ("flatten", None)  # nothing to convolve
    with pytest.raises(TypeError, match=r"MlpPolicy's default extractor takes no arguments, got \['features_dim'\]"):
        extractor_fields("MlpPolicy", dict(features_extractor_kwargs={"features_dim": 1}), image)  # SB3's TypeError


def test_optimizer_kwargs_without_a_class_are_torchs_adams():
    """SB3's default optimizer_class is torch.optim.Adam: optimizer_kwargs alone configure it (SB3's tests pass
    `optimizer_kwargs=dict(eps=1e-5)` without a class)."""
    fields = policy_config(dict(optimizer_kwargs=dict(eps=1e-5, betas=(0.8, 0.99), weight_decay=1e-4)))
    assert {k: fields[k] for k in ("optimizer", "optimizer_eps", "adam_beta_1", "adam_beta_2", "weight_decay")} == {
        "optimizer": "adam",
        "optimizer_eps": 1e-5,
        "adam_beta_1": 0.8,
        "adam_beta_2": 0.99,
        "weight_decay": 1e-4,
    }
