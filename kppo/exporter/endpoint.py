"""The artifact's `action` function: one `tf.function` body and its fixed input signature (`action_endpoint`), which
the SavedModel (and through it TFLite) and ONNX export alike, so every format computes the same graph: encoding,
normalization and clipping, the actor, an action mask, the mode, and tanh/clip and rescaling (`kppo.exporter.artifact`
describes it)."""

from __future__ import annotations

from typing import Any, NamedTuple
from collections.abc import Callable

import numpy as np

from kppo._tf import tf
from kppo.agent.policy import Policy
from kppo.exporter.convert import quantized_image_input
from kppo.exporter.inputs import ArtifactInput, artifact_inputs, join_graph
from kppo.exporter.runner import MASK_INPUT, STATE_INPUTS


class Endpoint(NamedTuple):
    """An artifact's `action` function, its input signature and what it reads."""

    fn: Callable[..., Any]  # action(*inputs): the action, or for a recurrent policy {action, state_h, state_c}
    spec: list[tf.TensorSpec]  # the observation inputs, then the mask, then (state_h, state_c)
    inputs: list[ArtifactInput]  # the observation inputs (the first `len(inputs)` entries of `spec`)
    actor: Any  # the actor the function calls (a standardized copy for int8: `_standardized`)
    rows: Callable[[list], tf.Tensor]  # observation input tensors -> the policy's flat input rows


def _standardized(policy: Policy, rows: np.ndarray):
    """int8 without observation normalization: (actor', standardize), standardize(obs) = clip((obs - m) / s, -10, 10)
    with the calibration rows' mean m and std s, and actor' a copy of the actor whose first layer undoes it (kernel * s,
    bias + m @ kernel): the same function, but the one per-tensor int8 input scale now resolves every feature
    (CartPole's pole angle spans 1/25 of the cart position's range: a raw int8 input gave it 17 levels)."""
    rows = policy.encode(rows).astype(np.float64)
    box = np.zeros(rows.shape[1], bool)  # one-hot and binary columns are left as they are (0 and 1)
    for part in policy.layout:
        box[part.encoded] = part.kind == "Box"
    mean, std = np.where(box, rows.mean(axis=0), 0.0), np.where(box, rows.std(axis=0), 1.0)
    std = np.where(std > 1e-6, std, 1.0)
    actor = type(policy.actor).from_config(policy.actor.get_config())
    actor(tf.zeros([1, len(mean)]))
    actor.set_weights(policy.actor.get_weights())
    first = actor.hidden[0] if actor.hidden else actor.head
    kernel = np.asarray(first.kernel, np.float64)
    first.kernel.assign(kernel * std[:, None])
    first.bias.assign(np.asarray(first.bias, np.float64) + mean @ kernel)
    shift, scale = tf.constant(mean, tf.float32), tf.constant(1.0 / std, tf.float32)
    return actor, lambda obs: tf.clip_by_value((obs - shift) * scale, -10.0, 10.0)


def _extracts(policy: Policy) -> bool:
    """The actor reads observations through a features extractor (a CNN, or images / 255): its first layer is not
    a Dense on the observations (`_standardized` does not apply; images need none: bytes are int8's own scale)."""
    return policy.extractor is not None


def masked_for_argmax(logits: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
    """Logits whose argmax (per row, and per MultiDiscrete dimension) is the best allowed action: masked entries are
    lowered by 1.125 x the row's spread + 1, below every logit of the row, with builtin ops TFLite Micro has. Not by
    `MASKED_LOGIT`: an int8 artifact may quantize these values (the converter can put the split of MultiDiscrete
    logits in int8), and a bounded range keeps the allowed logits resolved (a -1e8 in the range left none)."""
    spread = tf.reduce_max(logits, axis=-1, keepdims=True) + tf.reduce_max(-logits, axis=-1, keepdims=True)
    return logits - (1.0 - mask) * (1.125 * spread + 1.0)


def action_endpoint(policy: Policy, batch_size: int | None, int8_rows: np.ndarray | None = None) -> Endpoint:
    """The `action` function of `policy` with inputs of batch `batch_size` (None: dynamic). `int8_rows`: the
    function an int8 conversion calibrates on these rows: a standardized input (`_standardized`), or an image's
    bytes as float32 values (`convert.quantized_image_input`)."""
    image_dtype = np.dtype(np.float32 if int8_rows is not None and quantized_image_input(policy) else np.uint8)
    inputs = artifact_inputs(policy, image_dtype)
    spec = [tf.TensorSpec([batch_size, *item.shape], tf.as_dtype(item.dtype), name=item.name) for item in inputs]
    count = len(spec)  # the observation inputs
    if policy.action_masks:
        spec.append(tf.TensorSpec([batch_size, policy.dist.mask_size], tf.float32, name=MASK_INPUT))
    if policy.lstm is not None:  # a recurrent policy's state in and out: (h, c) as plain tensors, no stateful ops
        spec += [tf.TensorSpec([batch_size, policy.lstm.state_size], tf.float32, name=name) for name in STATE_INPUTS]
    actor, front = policy.actor, policy.normalize
    if int8_rows is not None and not policy.obs_scaling.enabled and policy.lstm is None and not _extracts(policy):
        actor, front = _standardized(policy, int8_rows)

    def rows(tensors):  # the policy's flat input rows
        return tensors[0] if count == 1 else join_graph(inputs, tensors)

    def action(*tensors):
        features, rest = front(policy.encode_graph(rows(tensors[:count]))), list(tensors[count:])
        mask = rest.pop(0) if policy.action_masks else None
        if policy.lstm is not None:
            features, state = policy.lstm(features, rest)
        logits = actor(features)
        if mask is not None:
            logits = masked_for_argmax(logits, mask)
        env_action = policy.dist.to_env_flat(policy.dist.mode(logits))  # a Box of any shape: flat float32
        return env_action if policy.lstm is None else {"action": env_action, **dict(zip(STATE_INPUTS, state))}

    return Endpoint(action, spec, inputs, actor, rows)
