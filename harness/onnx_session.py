"""An ONNX model run by ONNX Runtime: its session and the callables the protocol times. Shared by
the backends that hand ONNX Runtime a model (``onnxruntime``; ``taso``, whose graphs it executes)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .backend import BackendError

LEVELS = ("disable", "basic", "extended", "all")  # ONNX Runtime's graph optimization levels


def session(model: Any, provider: str, precision: str, level: str = "all", threads: int = 0,
            cuda_graph: bool = False, prefer_nhwc: bool = False) -> Any:
    """An ``InferenceSession`` of ``model`` (an ONNX ModelProto) on ``provider`` (an ONNX Runtime
    provider name), with :func:`cuda_options` on CUDA."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.graph_optimization_level = {
        "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL, "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
        "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL}[level]
    opts.intra_op_num_threads = threads  # 0: ONNX Runtime decides
    options = cuda_options(precision, cuda_graph, prefer_nhwc) if provider == "CUDAExecutionProvider" else {}
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=[(provider, options)])
    got = sess.get_providers()[0]
    if got != provider:  # ONNX Runtime falls back, with a log line, where a provider's libraries fail to load
        hint = FALLBACK_HINTS.get(provider, "")
        raise BackendError(f"ONNX Runtime could not start {provider} and fell back to {got} (its log above says "
                           f"why); this run would not be what it is named{': ' + hint if hint else ''}")
    return sess


#: what to do where ONNX Runtime could not start a provider it lists as available
FALLBACK_HINTS = {
    "TensorrtExecutionProvider": "install TensorRT 10 (pip install -e '.[tensorrt]' --extra-index-url "
                                 "https://pypi.nvidia.com) or run the CUDA provider",
    "CUDAExecutionProvider": "onnxruntime-gpu needs the CUDA 13 and cuDNN 9 libraries of the CUDA build of torch "
                             "(pip install -e '.[onnxruntime-gpu]' beside it)",
}


def cuda_options(precision: str, cuda_graph: bool, prefer_nhwc: bool) -> dict[str, str]:
    """The CUDA provider's options: TF32 only for ``precision=tf32``, cuDNN's exhaustive algorithm search;
    with ``cuda_graph`` the whole run captured once as a CUDA graph and replayed (ONNX Runtime refuses it,
    at creation or first run, when a node is not on the CUDA provider); with ``prefer_nhwc`` convolutions and
    pools in ONNX Runtime's NHWC kernels (the layout cuDNN's tensor-core kernels read; the graph gets the
    transposes at its ends)."""
    return {"use_tf32": "1" if precision == "tf32" else "0", "cudnn_conv_algo_search": "EXHAUSTIVE",
            "enable_cuda_graph": "1" if cuda_graph else "0", "prefer_nhwc": "1" if prefer_nhwc else "0"}


def callables(sess: Any, batch: int, input_shape: tuple[int, ...], cuda_graph: bool = False
              ) -> tuple[Callable[[Any], Any], Callable[[np.ndarray], Any]]:
    """(infer, load_input) of a session with one input: ``infer`` returns its first output. One
    call is made here, so a model ONNX Runtime cannot run fails while being prepared. On CUDA the
    session runs with I/O binding (see :func:`bound_callables`; :func:`graph_callables` for a session
    made with ``cuda_graph``)."""
    if sess.get_providers()[0] == "CUDAExecutionProvider":
        return (graph_callables if cuda_graph else bound_callables)(sess, batch, input_shape)
    inp, out = sess.get_inputs()[0].name, sess.get_outputs()[0].name

    def infer(x):
        return sess.run([out], {inp: x})[0]

    def load(x: np.ndarray):
        return np.ascontiguousarray(x, dtype=np.float32)

    infer(load(np.zeros((batch, *input_shape), np.float32)))
    return infer, load


def output_to_numpy(y: Any) -> np.ndarray:
    """An output of ``infer`` on the host: an OrtValue on the GPU (I/O binding) or an array already."""
    return np.asarray(y.numpy() if hasattr(y, "numpy") else y, dtype=np.float32)


def bound_callables(sess: Any, batch: int, input_shape: tuple[int, ...]
                    ) -> tuple[Callable[[Any], Any], Callable[[np.ndarray], Any]]:
    """On CUDA: the input is copied to the GPU once (``load_input``, timed as load time) and the output
    stays in a GPU buffer allocated once, both bound to the session (I/O binding), so a timed run moves
    nothing between host and device. ``infer`` returns the output as an OrtValue on the GPU; ``.numpy()``
    brings it back for the correctness check. ONNX Runtime's CUDA ``run`` returns once the GPU is done."""
    import onnxruntime as ort

    inp, out = sess.get_inputs()[0].name, sess.get_outputs()[0].name
    binding = sess.io_binding()
    bound: dict[str, Any] = {}

    def load(x: np.ndarray):
        return ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(x, dtype=np.float32), "cuda", 0)

    def infer(x):
        if bound.get("input") is not x:  # a new input: bound once, not per run
            binding.bind_ortvalue_input(inp, x)
            bound["input"] = x
        sess.run_with_iobinding(binding)
        return bound["output"]

    first = load(np.zeros((batch, *input_shape), np.float32))
    binding.bind_ortvalue_input(inp, first)
    bound["input"] = first
    binding.bind_output(out, "cuda", 0)
    sess.run_with_iobinding(binding)  # the first run sizes the output; that buffer is kept and reused
    output = binding.get_outputs()[0]
    bound["output"] = ort.OrtValue.ortvalue_from_shape_and_type(output.shape(), np.float32, "cuda", 0)
    binding.bind_ortvalue_output(out, bound["output"])
    return infer, load


def graph_callables(sess: Any, batch: int, input_shape: tuple[int, ...]
                    ) -> tuple[Callable[[Any], Any], Callable[[np.ndarray], Any]]:
    """A CUDA-graph session replays its captured run on the same device addresses: one input buffer and
    one output buffer are allocated here and bound for good. ``load_input`` copies the data into that
    input buffer (and returns it), so whatever the protocol loads is what the next replay reads; the
    output's shape comes from the model, with the batch for a symbolic first axis. The first run here is
    the capture (after ONNX Runtime's own warm-up runs)."""
    import onnxruntime as ort

    inp, out = sess.get_inputs()[0], sess.get_outputs()[0]
    dims = [batch if i == 0 and not isinstance(d, int) else d for i, d in enumerate(out.shape)]
    if not all(isinstance(d, int) for d in dims):
        raise ValueError(f"the output {out.name!r} has no fixed shape ({out.shape}) to bind a CUDA graph's buffer to")
    fixed_in = ort.OrtValue.ortvalue_from_numpy(np.zeros((batch, *input_shape), np.float32), "cuda", 0)
    fixed_out = ort.OrtValue.ortvalue_from_shape_and_type(dims, np.float32, "cuda", 0)
    binding = sess.io_binding()
    binding.bind_ortvalue_input(inp.name, fixed_in)
    binding.bind_ortvalue_output(out.name, fixed_out)

    def load(x: np.ndarray):
        fixed_in.update_inplace(np.ascontiguousarray(x, dtype=np.float32))
        return fixed_in

    def infer(x):  # x is the bound buffer (load_input's return): nothing to bind
        sess.run_with_iobinding(binding)
        return fixed_out

    infer(fixed_in)
    return infer, load
