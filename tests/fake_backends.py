"""Misbehaving backends for the isolation tests (registered via HARNESS_PLUGINS)."""

import os
import signal
import time

import numpy as np

from harness.backend import Backend, Prepared
from harness.hookspecs import hookimpl


class Crash(Backend):
    name = "test_crash"

    def prepare(self, model, batch, device, precision):
        os.kill(os.getpid(), signal.SIGSEGV)


class Hang(Backend):
    name = "test_hang"

    def prepare(self, model, batch, device, precision):
        time.sleep(3600)


class HangWithWorker(Backend):
    """Starts a worker process (as a compile pool or a tuning build would), writes its pid, then hangs."""

    name = "test_hang_worker"

    def prepare(self, model, batch, device, precision):
        import subprocess

        worker = subprocess.Popen(["sleep", "3600"])
        with open(os.environ["TEST_WORKER_PID_FILE"], "w") as f:
            f.write(str(worker.pid))
        time.sleep(3600)


class Boom(Backend):
    name = "test_raise"

    def prepare(self, model, batch, device, precision):
        raise RuntimeError("kaboom in prepare")


class Wrong(Backend):
    name = "test_wrong"

    def prepare(self, model, batch, device, precision):
        return Prepared(infer=lambda x: np.zeros((x.shape[0], *model.graph().output_shape)) + 1.0)


class Transposed(Backend):
    """A correct float32 evaluation of the model's module, fed its input with the NHWC memory read as NCHW."""
    name = "test_transposed"
    forms = ("module",)

    def prepare(self, model, batch, device, precision):
        import torch

        module = model.module().float().eval()

        def infer(x):
            n, c, h, w = x.shape
            mangled = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).reshape(n, c, h, w)
            with torch.no_grad():
                return module(torch.from_numpy(mangled)).numpy()
        return Prepared(infer=infer)


class Missing(Backend):
    name = "test_missing"
    requires = ("surely_not_a_module_xyz",)
    extra = "tvm"

    def prepare(self, model, batch, device, precision):
        raise AssertionError("never reached: the missing module is refused first")


class Counting(Backend):
    """Exact (the float64 reference), counting its input copies and output reads."""

    name = "test_counting"
    calls = {"load": 0, "infer": 0, "to_numpy": 0}

    def prepare(self, model, batch, device, precision):
        from ios_core.interpreters import reference_forward

        def count(key, fn):
            def wrapped(x):
                Counting.calls[key] += 1
                return fn(x)
            return wrapped
        return Prepared(infer=count("infer", lambda x: reference_forward(model.graph(), x)),
                        load_input=count("load", lambda x: x), to_numpy=count("to_numpy", np.asarray))


@hookimpl
def harness_backends():
    return [Crash, Hang, HangWithWorker, Boom, Wrong, Transposed, Missing, Counting]
