"""The ``null`` backend: does nothing per iteration, so its latency is the harness's own
overhead (sync, timers, loop) -- the floor under every other number."""

from harness.backend import Backend, Prepared
from harness.hookspecs import hookimpl


class NullBackend(Backend):
    name = "null"
    display_name = "Null"
    devices = ("cpu", "cuda")

    def prepare(self, graph, batch, device, precision) -> Prepared:
        return Prepared(infer=lambda x: x, check_output=False, device_name=device)


@hookimpl
def harness_backends():
    return [NullBackend]
