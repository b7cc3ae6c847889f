from __future__ import annotations

from harness.backend import Backend, BackendError, Prepared
from harness.onnx_session import callables, output_to_numpy, session
from ios_core.ir import Graph

from .config import PROVIDERS, OnnxRuntimeConfig


class OnnxRuntimeBackend(Backend[OnnxRuntimeConfig]):
    name = "onnxruntime"
    times_in_prepare = True  # CUDA: cuDNN's exhaustive algorithm search in the first call
    runs = "the ONNX export in an ONNX Runtime session"
    display_name = "ONNXRuntime"
    config_class = OnnxRuntimeConfig
    devices = ("cpu", "cuda")
    requires = ("onnxruntime",)
    extra = "onnx"
    gpu_run = "H100 80GB HBM3, 2026-11-25 (CUDA provider)"
    install = "pip install -e '.[onnx]'; CUDA: pip uninstall -y onnxruntime && pip install -e '.[onnxruntime-gpu]'"

    def prepare(self, graph: Graph, batch: int, device: str, precision: str) -> Prepared:
        if device == "cuda":  # torch first: it loads the CUDA and cuDNN libraries onnxruntime-gpu links against
            import torch  # noqa: F401
        import onnxruntime as ort

        from ios_core.onnx import export_onnx

        if precision in ("fp16", "bf16"):
            raise BackendError(f"backend onnxruntime runs the float32 ONNX export; precision={precision} is not "
                               f"supported (use fp32 or tf32)")
        provider = self.cfg.provider
        if provider == "auto":
            provider = "cuda" if device == "cuda" else "cpu"
        if device == "cpu" and provider != "cpu":
            raise BackendError(f"backend.provider={provider} needs device=cuda")
        name = PROVIDERS[provider]
        available = ort.get_available_providers()
        if name not in available:
            gpu = "pip uninstall -y onnxruntime && pip install -e '.[onnxruntime-gpu]'"
            hint = {"cuda": f"this is the CPU build: {gpu}",
                    "tensorrt": f"install TensorRT 10 and onnxruntime-gpu ({gpu})"}
            raise BackendError(f"onnxruntime {ort.__version__} here has no {name} (it has {', '.join(available)}); "
                               f"{hint.get(provider, '')}")
        model = export_onnx(graph)
        sess = session(model, name, precision, self.cfg.graph_optimization, self.cfg.intra_op_threads)
        infer, load = callables(sess, batch, graph.input_shape)
        return Prepared(infer=infer, load_input=load, to_numpy=output_to_numpy,
                        display_name=f"ONNXRuntime-{provider.upper()}",
                        device_name=device if provider == "cpu" else f"{device} ({name})",
                        params={"ort_provider": sess.get_providers()[0],
                                "ort_graph_optimization": self.cfg.graph_optimization},
                        artifacts={})
