"""The ``overhead`` backend: does nothing per iteration, so its latency is the harness's own
overhead (sync, timers, loop) -- the floor under every other number. It was called ``null``,
which YAML and Hydra read as "no value"; ``null`` still works as an alias.

``backend.cpu_s`` and ``backend.exclusive_s`` make it a job of known phase lengths (a CPU phase,
then an exclusive device phase, in ``prepare``): what the load-aware launcher's tests schedule."""

import time
from dataclasses import dataclass

from harness.backend import Backend, Prepared
from harness.config import BackendConfig, ConfigError
from harness.hookspecs import hookimpl
from harness.machine.leases import exclusive


@dataclass
class OverheadConfig(BackendConfig):
    name: str = "overhead"
    cpu_s: float = 0.0  # seconds of simulated CPU work in prepare (compilation)
    exclusive_s: float = 0.0  # seconds of simulated exclusive device work in prepare (stage timing)

    def check(self) -> None:
        if self.cpu_s < 0 or self.exclusive_s < 0:
            raise ConfigError("backend.cpu_s and backend.exclusive_s must be >= 0")


class NullBackend(Backend[OverheadConfig]):
    name = "overhead"
    runs = "nothing: the harness's own per-iteration overhead"
    display_name = "Overhead"
    config_class = OverheadConfig
    devices = ("cpu", "cuda")
    gpu_run = "n/a: no device work"
    aliases = ("null",)  # its first name, which reads as "no value" in YAML and Hydra overrides
    forms = ()  # it runs no model

    def prepare(self, model, batch, device, precision) -> Prepared:
        _work(self.cfg.cpu_s)
        if self.cfg.exclusive_s:
            with exclusive():
                time.sleep(self.cfg.exclusive_s)
        return Prepared(infer=lambda x: x, check_output=False, device_name=device)


def _work(seconds: float, step: float = 0.01) -> None:
    """``seconds`` of simulated work that, as real work does, makes no progress while the process is stopped
    (the load-aware launcher's pause): a gap between two steps counts as one step."""
    done, last = 0.0, time.monotonic()
    while done < seconds:
        time.sleep(min(step, seconds - done))
        now = time.monotonic()
        done += min(now - last, 5 * step)
        last = now


@hookimpl
def harness_backends():
    return [NullBackend]
