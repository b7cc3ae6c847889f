"""An ONNX model run by ONNX Runtime: its session and the callables the protocol times. Shared by
the backends that hand ONNX Runtime a model (``onnxruntime``; ``taso``, whose graphs it executes)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

LEVELS = ("disable", "basic", "extended", "all")  # ONNX Runtime's graph optimization levels


def session(model: Any, provider: str, precision: str, level: str = "all", threads: int = 0) -> Any:
    """An ``InferenceSession`` of ``model`` (an ONNX ModelProto) on ``provider`` (an ONNX Runtime
    provider name); on CUDA, TF32 only for ``precision=tf32`` and cuDNN's exhaustive algorithm search."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.graph_optimization_level = {
        "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL, "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
        "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL}[level]
    opts.intra_op_num_threads = threads  # 0: ONNX Runtime decides
    options: dict[str, str] = {}
    if provider == "CUDAExecutionProvider":
        options = {"use_tf32": "1" if precision == "tf32" else "0", "cudnn_conv_algo_search": "EXHAUSTIVE"}
    return ort.InferenceSession(model.SerializeToString(), opts, providers=[(provider, options)])


def callables(sess: Any, batch: int, input_shape: tuple[int, ...]
              ) -> tuple[Callable[[Any], Any], Callable[[np.ndarray], Any]]:
    """(infer, load_input) of a session with one input: ``infer`` returns its first output. One
    call is made here, so a model ONNX Runtime cannot run fails while being prepared."""
    inp, out = sess.get_inputs()[0].name, sess.get_outputs()[0].name

    def infer(x):
        return sess.run([out], {inp: x})[0]

    def load(x: np.ndarray):
        return np.ascontiguousarray(x, dtype=np.float32)

    infer(load(np.zeros((batch, *input_shape), np.float32)))
    return infer, load
