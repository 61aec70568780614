"""kppo's optimizers against torch's own, and torch's classes recognized by name (skipped without torch)."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import keras  # noqa: E402

from kppo.training.runners.settings import optimizer_spec  # noqa: E402
from kppo.config.options import Config  # noqa: E402
from kppo.core.optimizers import make_optimizer  # noqa: E402
from kppo.sb3.arguments import is_torch_module_class, optimizer_config  # noqa: E402


@pytest.mark.parametrize(
    "cls, kwargs",
    [
        (torch.optim.Adam, dict(eps=1e-5, weight_decay=0.1, betas=(0.8, 0.99))),
        (torch.optim.RMSprop, dict(alpha=0.9, eps=1e-5, momentum=0.5, weight_decay=0.1)),
        (torch.optim.RMSprop, dict(alpha=0.9, eps=1e-5, centered=True)),
        (torch.optim.SGD, dict(momentum=0.9, dampening=0.1, weight_decay=0.1)),
        (torch.optim.SGD, dict(momentum=0.9, nesterov=True)),
    ],
)
def test_six_steps_equal_torchs(cls, kwargs):
    rng = np.random.default_rng(0)
    w0, grads = rng.standard_normal(5).astype(np.float32), rng.standard_normal((6, 5)).astype(np.float32) * 1e-2
    config = Config(**optimizer_config(cls, kwargs), adam_style="torch", learning_rate=0.1)
    variable = keras.Variable(w0)
    optimizer = make_optimizer("torch", 0.1, optimizer_spec(config))
    optimizer.build([variable])
    param = torch.nn.Parameter(torch.tensor(w0))
    reference = cls([param], lr=0.1, **kwargs)
    for g in grads:
        optimizer.apply_gradients([(g, variable)])
        param.grad = torch.tensor(g)
        reference.step()
        np.testing.assert_allclose(variable.numpy(), param.detach().numpy(), rtol=2e-5, atol=1e-6)


def test_torch_modules_are_recognized_by_name():
    assert is_torch_module_class(torch.nn.Linear) and not is_torch_module_class(keras.layers.Dense)
