"""Small shared test helpers."""

import sys
import types

import numpy as np

# Reduced sizes that keep every model's structure but run in well under a second.
SMALL = {
    "sample": {"channels": 8, "size": 7},
    "inception_v3": {"image_size": 96},
    "randwire": {"image_size": 64, "channels": 16},
    "nasnet": {"image_size": 64, "filters": 24, "stem_filters": 16},
    "squeezenet": {"image_size": 64},
    "resnet50": {"image_size": 64},
}


def rel_err(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.asarray(a, np.float64).reshape(a.shape[0], -1), np.asarray(b, np.float64).reshape(b.shape[0], -1)
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-12))


def import_torchvision_models():
    """torchvision's model definitions, with its C++ ops disabled.

    PyPI's torchvision wheels are built against the CUDA torch, and its op registration
    module fails beside the CPU build; the model classes themselves are pure Python.
    """
    sys.modules.setdefault("torchvision._meta_registrations", types.ModuleType("torchvision._meta_registrations"))
    import torchvision.models as models
    return models


def tiny_net():
    """A user's module for ``model=module model.target=tests.helpers:tiny_net`` (a conv, BatchNorm, a squeeze-
    excitation side path, a classifier), with trained-looking statistics the harness must leave alone."""
    import torch
    from torch import nn

    class Tiny(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, padding=1)
            self.bn = nn.BatchNorm2d(8)
            self.se = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(8, 8, 1), nn.Hardsigmoid())
            self.fc = nn.Linear(8, 5)

        def forward(self, x):
            y = torch.relu(self.bn(self.conv(x)))
            y = y * self.se(y)
            return self.fc(y.mean((2, 3))), y  # a tuple: the first tensor is the output

    torch.manual_seed(3)
    net = Tiny()
    net.bn.running_mean.fill_(0.25)
    return net


def cumsum_net():
    """A module whose ONNX export has an operator ios_core's IR does not know (CumSum)."""
    from torch import nn

    class Cumulative(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3, padding=1)

        def forward(self, x):
            return self.conv(x).cumsum(dim=3)
    return Cumulative()


def lstm_net():
    """A module with a recurrent layer: its ONNX export is one LSTM operator, which ios_core's IR does not take."""
    from torch import nn

    class RowReader(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3, padding=1)
            self.pool = nn.AdaptiveAvgPool2d(16)
            self.rows = nn.LSTM(input_size=4 * 16, hidden_size=8, batch_first=True)

        def forward(self, x):
            y = self.pool(self.conv(x))  # (n, 4, 16, 16) read row by row
            return self.rows(y.permute(0, 2, 1, 3).flatten(2))[0]
    return RowReader()


def wrong_width_net():
    """A module whose classifier expects another width than its features give: its forward fails at any size."""
    from torch import nn

    return nn.Sequential(nn.Conv2d(3, 8, 3), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))


def not_a_module():
    return 42


def slow_net():
    """A module factory that takes a minute (a model whose build is long): where a stop must land mid-build."""
    import time

    time.sleep(60)
    return tiny_net()


def cancelling_net():
    """An ill-conditioned module: its output is the difference of two terms 10^4 times larger, so float32's
    rounding of them leaves about 1e-3 relative error in any correct float32 evaluation (above the fixed fp32
    tolerance), as a deep random network's amplification does."""
    from torch import nn

    class Cancelling(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3, padding=1)

        def forward(self, x):
            y = self.conv(x)
            return (y * 1e4 + y) - y * 1e4
    return Cancelling()
