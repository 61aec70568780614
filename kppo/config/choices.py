"""The values each choice-valued Config field accepts (one tuple a field; the schedules are `kppo.config.schedules`)."""

ACTIVATIONS = ("tanh", "relu", "gelu", "softplus", "swish", "silu", "elu", "selu", "sigmoid", "leaky_relu")
KERNEL_INITS = (
    "orthogonal",
    "glorot_normal",
    "glorot_uniform",
    "he_normal",
    "he_uniform",
    "kaiming_normal",
    "kaiming_uniform",
    "lecun_normal",
    "lecun_uniform",
    "xavier_normal",
    "xavier_uniform",
    "torch_default",
)
DISTRIBUTE = ("none", "mirrored", "multi_worker", "tpu")
VF_CLIP_MODES = ("max", "clipped")
ENV_BACKENDS = ("auto", "native", "gymnasium")
OLD_ENV_BACKENDS = {"tf": "native"}  # an older spelling, still read: "native" is the one word for TF-native envs
VECTORIZATIONS = ("sync", "async")
BIAS_INITS = ("zeros", "torch_default")
FEATURES_EXTRACTORS = ("flatten", "cnn", "nature_cnn", "small_cnn", "combined")
ADAM_STYLES = ("keras", "torch")
OPTIMIZERS = ("adam", "adamw", "rmsprop", "rmsprop_tf", "sgd")  # kppo.core.optimizers.OPTIMIZERS
