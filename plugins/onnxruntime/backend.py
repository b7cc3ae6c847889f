from __future__ import annotations

from typing import Any

from harness.backend import Backend, BackendError, Model, Prepared
from harness.machine.cpus import measuring_threads
from harness.onnx_session import callables, output_to_numpy, session

from .config import PROVIDERS, OnnxRuntimeConfig


class OnnxRuntimeBackend(Backend[OnnxRuntimeConfig]):
    name = "onnxruntime"
    times_in_prepare = True  # CUDA: cuDNN's exhaustive algorithm search in the first call
    runs = "the model's ONNX form (the user's file, or torch.onnx's export) in an ONNX Runtime session"
    display_name = "ONNXRuntime"
    config_class = OnnxRuntimeConfig
    devices = ("cpu", "cuda")
    requires = ("onnxruntime",)
    extra = "onnx"
    forms = ("onnx",)
    gpu_run = "H100, 2026-11-27 (CUDA provider, CUDA graph, fp16 and fp32)"
    install = "pip install -e '.[onnx]'; CUDA: pip uninstall -y onnxruntime && pip install -e '.[onnxruntime-gpu]'"

    def prepare(self, model: Model, batch: int, device: str, precision: str) -> Prepared:
        if device == "cuda":  # torch first: it loads the CUDA and cuDNN libraries onnxruntime-gpu links against
            import torch  # noqa: F401
        import onnxruntime as ort

        provider = self.cfg.provider
        if provider == "auto":
            provider = "cuda" if device == "cuda" else "cpu"
        if device == "cpu" and provider != "cpu":
            raise BackendError(f"backend.provider={provider} needs device=cuda")
        if precision == "bf16":
            raise BackendError("backend onnxruntime runs fp32, tf32 (CUDA) and fp16 (a float16 conversion of the "
                               "ONNX model); precision=bf16 is not supported")
        if precision == "fp16" and provider == "cpu":
            raise BackendError("precision=fp16 with ONNX Runtime needs device=cuda: its CPU provider has float16 "
                               "kernels for few operators (use fp32 on the CPU)")
        name = PROVIDERS[provider]
        available = ort.get_available_providers()
        if name not in available:
            gpu = "pip uninstall -y onnxruntime && pip install -e '.[onnxruntime-gpu]'"
            hint = {"cuda": f"this is the CPU build: {gpu}",
                    "tensorrt": f"install TensorRT 10 and onnxruntime-gpu ({gpu})"}
            raise BackendError(f"onnxruntime {ort.__version__} here has no {name} (it has {', '.join(available)}); "
                               f"{hint.get(provider, '')}")
        nhwc = self.cfg.nhwc(provider, precision)
        for option, wanted in (("cuda_graph", self.cfg.cuda_graph == "true"), ("prefer_nhwc", nhwc)):
            if wanted and provider != "cuda":
                raise BackendError(f"backend.{option}=true needs the CUDA provider (device=cuda, "
                                   f"backend.provider=cuda); this run uses {name}")
        onnx_model = model.onnx()
        if precision == "fp16":
            onnx_model = to_float16(onnx_model)

        def build(cuda_graph: bool) -> tuple[Any, Any, Any]:
            threads = self.cfg.intra_op_threads or measuring_threads()  # the lane's, under the load-aware launcher
            sess = session(onnx_model, name, precision, self.cfg.graph_optimization, threads, cuda_graph, nhwc)
            return (sess, *callables(sess, batch, model.input_shape, cuda_graph))

        graph = provider == "cuda" and self.cfg.cuda_graph != "false"
        notes = []
        try:
            sess, infer, load = build(graph)
        except Exception as exc:
            if not graph or self.cfg.cuda_graph == "true" or isinstance(exc, BackendError):
                raise  # BackendError: the provider itself did not start, the graph is not the matter
            why = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
            notes.append(f"no CUDA graph: ONNX Runtime could not capture this model ({why})")
            graph = False
            sess, infer, load = build(False)
        return Prepared(infer=infer, load_input=load, to_numpy=output_to_numpy,
                        display_name="ONNXRuntime-CUDAGraph" if graph else f"ONNXRuntime-{provider.upper()}",
                        device_name=device if provider == "cpu" else f"{device} ({name})",
                        params={"ort_provider": sess.get_providers()[0],
                                "ort_graph_optimization": self.cfg.graph_optimization,
                                "ort_model_dtype": "float16" if precision == "fp16" else "float32",
                                "ort_cuda_graph": "on" if graph else "off",
                                "ort_prefer_nhwc": "on" if nhwc else "off"},
                        artifacts={}, notes=notes)


def to_float16(model: Any) -> Any:
    """The model with float16 weights and math (ONNX Runtime's own converter, ``onnxruntime.transformers``),
    its input and output kept float32 so the protocol feeds and reads it as every other backend."""
    from onnxruntime.transformers.float16 import convert_float_to_float16

    try:
        return convert_float_to_float16(model, keep_io_types=True, disable_shape_infer=False)
    except Exception as exc:
        raise BackendError(f"ONNX Runtime's float16 conversion failed: {type(exc).__name__}: "
                           f"{str(exc).splitlines()[0] if str(exc) else ''}") from None
