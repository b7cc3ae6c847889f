"""The ``overhead`` backend: does nothing per iteration, so its latency is the harness's own
overhead (sync, timers, loop) -- the floor under every other number. It was called ``null``,
which YAML and Hydra read as "no value"; ``null`` still works as an alias."""

from harness.backend import Backend, Prepared
from harness.hookspecs import hookimpl


class NullBackend(Backend):
    name = "overhead"
    runs = "nothing: the harness's own per-iteration overhead"
    display_name = "Overhead"
    devices = ("cpu", "cuda")

    def prepare(self, graph, batch, device, precision) -> Prepared:
        return Prepared(infer=lambda x: x, check_output=False, device_name=device)


@hookimpl
def harness_backends():
    return [NullBackend]
