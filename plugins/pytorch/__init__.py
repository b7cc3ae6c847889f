"""PyTorch backend: the IR as an nn.Module (ios_core's torch converter), run eager,
as one captured CUDA graph, or through torch.compile."""

from harness.hookspecs import hookimpl

from .backend import PyTorchBackend, PyTorchConfig


@hookimpl
def harness_backends():
    return [PyTorchBackend]


__all__ = ["PyTorchBackend", "PyTorchConfig"]
