from __future__ import annotations

import os

import numpy as np

from harness.backend import Backend, BackendError, Model, Prepared
from ios_core.runtime.target import DTYPES

from .config import TensorFlowConfig, XlaConfig


class TensorFlowBackend(Backend[TensorFlowConfig]):
    name = "tensorflow"
    times_in_prepare = True  # cuDNN autotuning (and XLA's autotuner) time algorithms on the GPU
    runs = "the IR as a TensorFlow tf.function graph"
    display_name = "TensorFlow"
    config_class = TensorFlowConfig
    devices = ("cpu", "cuda")
    requires = ("tensorflow",)
    extra = "tf"
    install = ("pip install -e '.[tf]' (CPU); on a GPU: pip install 'tensorflow[and-cuda]==2.21.0' (CUDA 12 "
               "libraries, ~3 GB; not installable on this project's GPU machine)")
    jit_compile = False

    def prepare(self, model: Model, batch: int, device: str, precision: str) -> Prepared:
        graph = model.graph()  # the IR: this backend converts it node by node
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        import tensorflow as tf

        from ios_core.interpreters.tensorflow import tf_params, to_tensorflow

        if device == "cuda":
            if not tf.config.list_physical_devices("GPU"):
                raise BackendError(f"TensorFlow {tf.__version__} here sees no GPU (tensorflow-cpu, or no CUDA); "
                                   f"on a GPU machine: pip install 'tensorflow[and-cuda]'")
            name = "/GPU:0"
        else:
            name = "/CPU:0"
        tf.config.experimental.enable_tensor_float_32_execution(precision == "tf32")
        dtype = getattr(tf, DTYPES[precision])
        with tf.device(name):
            params = tf_params(graph, lambda a: tf.constant(a, dtype=dtype))
            fn = to_tensorflow(graph, params, self.jit_compile)

            def load(x: np.ndarray):
                with tf.device(name):
                    return tf.constant(x, dtype=dtype)

            example = load(np.zeros((batch, *graph.input_shape), np.float32))
            out = fn(example)  # trace (and XLA-compile) now: it counts as optimization cost
            last = [out]

        def infer(x):
            last[0] = fn(x)
            return last[0]

        def synchronize() -> None:
            # a GPU tensor's .numpy() waits for it; on the CPU the call already returned
            if device == "cuda" and last[0] is not None:
                last[0][0, 0, 0, 0].numpy()

        return Prepared(infer=infer, load_input=load, synchronize=synchronize,
                        to_numpy=lambda y: np.asarray(tf.cast(y, tf.float32).numpy()),
                        device_name=out.device, display_name=self.display_name,
                        params={"tf_device": out.device, "jit_compile": self.jit_compile})


class XlaBackend(TensorFlowBackend):
    name = "xla"
    runs = "TensorFlow with XLA (jit_compile=True)"
    display_name = "TF-XLA"
    config_class = XlaConfig
    jit_compile = True
