"""Running an engine: static torch CUDA buffers bound to an execution context, enqueued with
``execute_async_v3`` on a non-default stream (TensorRT adds device syncs on the default one),
optionally captured as one CUDA graph; and the per-layer profile, which runs on a second
context only after timing, since an attached ``IProfiler`` makes every enqueue synchronous."""

from __future__ import annotations

import statistics
import warnings
from collections.abc import Callable, Iterator
from typing import Any

from harness.backend import BackendError

TORCH_DTYPES = {"FLOAT": "float32", "HALF": "float16", "BF16": "bfloat16"}
PROFILE_ITERATIONS = 20


def _name(enum_value: Any) -> str:
    return str(getattr(enum_value, "name", enum_value)).rsplit(".", 1)[-1]


def new_context(engine: Any) -> Any:
    """An execution context; TensorRT returns None (no exception) when it cannot make one."""
    context = engine.create_execution_context()
    if context is None:
        raise BackendError("TensorRT could not create an execution context (create_execution_context() returned "
                           "None: usually too little free GPU memory for the engine's activations, or an engine "
                           "built by another TensorRT version or for another GPU); free GPU memory or lower "
                           "backend.workspace_mb, and delete the cached engine under results/tensorrt/")
    return context


class Execution:
    """One execution context bound to one input and one output buffer (the runner's handle is
    the input buffer, so an inference is one enqueue with nothing rebound)."""

    def __init__(self, trt: Any, engine: Any, input_shape: tuple[int, ...], stream: Any, device: str = "cuda"):
        import torch

        self.torch, self.trt, self.engine, self.stream, self.device = torch, trt, engine, stream, device
        names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
        inputs = [n for n in names if engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT]
        outputs = [n for n in names if n not in inputs]
        if len(inputs) != 1 or len(outputs) != 1:
            raise BackendError(f"the engine has inputs {inputs} and outputs {outputs}; one of each was expected")
        self.names = (inputs[0], outputs[0])
        self.context = self.bind(new_context(engine), input_shape)

    def _tensor(self, name: str, shape: tuple[int, ...]) -> Any:
        kind = _name(self.engine.get_tensor_dtype(name))
        if kind not in TORCH_DTYPES:
            raise BackendError(f"engine tensor {name!r} is {kind}; the backend handles {', '.join(TORCH_DTYPES)}")
        return self.torch.empty(shape, dtype=getattr(self.torch, TORCH_DTYPES[kind]), device=self.device)

    def bind(self, context: Any, input_shape: tuple[int, ...]) -> Any:
        """Set the input shape and the buffers' addresses on ``context`` (buffers made on first use)."""
        inp, out = self.names
        if getattr(context, "active_optimization_profile", 0) != 0:  # 8.6 could leave a second context at -1
            context.set_optimization_profile_async(0, self.stream.cuda_stream)
        if not context.set_input_shape(inp, input_shape):
            raise BackendError(f"TensorRT refused input shape {input_shape} (outside the engine's profile)")
        if not hasattr(self, "x"):
            self.x = self._tensor(inp, input_shape)
            self.y = self._tensor(out, tuple(context.get_tensor_shape(out)))
        context.set_tensor_address(inp, self.x.data_ptr())
        context.set_tensor_address(out, self.y.data_ptr())
        return context

    def load(self, x: Any) -> Any:
        """Copy a host array into the input buffer (on the inference stream); returns the buffer."""
        return self.take(self.torch.from_numpy(x))

    def take(self, handle: Any) -> Any:
        """The input buffer, holding ``handle`` (the stream is non-blocking: copies go on it too)."""
        if handle is not self.x:
            with self.torch.cuda.stream(self.stream):
                self.x.copy_(handle.to(device=self.device, dtype=self.x.dtype))
        return self.x

    def fetch(self, y: Any) -> Any:
        """An output on the host, copied after the work queued on the inference stream."""
        with self.torch.cuda.stream(self.stream):
            return y.detach().float().cpu().numpy()

    def enqueue(self, context: Any = None) -> None:
        if not (context or self.context).execute_async_v3(self.stream.cuda_stream):
            raise BackendError("TensorRT's execute_async_v3 failed (its log above says why)")

    def infer_fn(self) -> Callable[[Any], Any]:
        def infer(handle: Any) -> Any:
            self.take(handle)
            self.enqueue()
            return self.y
        return infer

    def graph_fn(self) -> Callable[[Any], Any]:
        """The enqueue captured once in a CUDA graph; each inference replays it on the stream."""
        torch = self.torch
        from ios_core.runtime.streams import capture_stream

        self.enqueue()  # TensorRT's first enqueue does deferred set-up work, which must not be captured
        self.stream.synchronize()
        graph, side = torch.cuda.CUDAGraph(), capture_stream()
        try:
            with torch.cuda.graph(graph, stream=side, capture_error_mode="thread_local"):
                ok = self.context.execute_async_v3(side.cuda_stream)
        except RuntimeError as err:
            raise BackendError(f"the TensorRT enqueue could not be captured in a CUDA graph ({err}); "
                               f"use backend.cuda_graph=false") from err
        if not ok:
            raise BackendError("the engine holds work that CUDA graph capture does not allow; "
                               "use backend.cuda_graph=false")

        def infer(handle: Any) -> Any:
            self.take(handle)
            with torch.cuda.stream(self.stream):
                graph.replay()
            return self.y
        return infer

    def layer_times(self, iterations: int = PROFILE_ITERATIONS) -> dict[str, list[float]]:
        """Per-layer milliseconds over ``iterations`` enqueues of a second, profiled context."""
        trt = self.trt

        class LayerTimes(trt.IProfiler):  # type: ignore[misc,name-defined]
            def __init__(self) -> None:
                trt.IProfiler.__init__(self)
                self.times: dict[str, list[float]] = {}

            def report_layer_time(self, layer_name: str, ms: float) -> None:
                self.times.setdefault(layer_name, []).append(float(ms))

        context = self.bind(new_context(self.engine), tuple(self.x.shape))
        profiler = LayerTimes()
        context.profiler = profiler
        for _ in range(iterations):
            self.enqueue(context)
            self.stream.synchronize()
        return profiler.times


def layer_table(times: dict[str, list[float]], title: str) -> dict[str, str]:
    """CSV and Markdown artifacts of per-layer times (median per layer, slowest first)."""
    rows = sorted(((name, statistics.median(ms), len(ms)) for name, ms in times.items() if ms),
                  key=lambda r: -r[1])
    total = sum(r[1] for r in rows) or 1.0
    csv = "layer,median_ms,share_pct,calls\n" + "".join(
        f"\"{name.replace(chr(34), chr(39))}\",{ms:.6f},{100 * ms / total:.2f},{n}\n" for name, ms, n in rows)
    md = [f"# {title}", "", f"{len(rows)} layers, sum of medians {total:.4f} ms (profiled separately after timing; "
          f"an attached profiler synchronizes every layer, so these add up to more than the timed latency)", "",
          "| layer | median ms | share |", "|---|---:|---:|"]
    md += [f"| `{name}` | {ms:.4f} | {100 * ms / total:.1f}% |" for name, ms, _ in rows]
    return {"trt_layer_profile.csv": csv, "trt_layer_profile.md": "\n".join(md) + "\n"}


class AfterTiming(dict):
    """Artifacts made on first read. The runner copies a backend's artifacts once, after its
    timed loop, so work done here (the per-layer profile) never overlaps the timing."""

    def __init__(self, make: Callable[[], dict[str, str]]):
        super().__init__()
        self._make: Callable[[], dict[str, str]] | None = make

    def _fill(self) -> None:
        make, self._make = self._make, None
        if make is None:
            return
        try:
            super().update(make())
        except Exception as err:  # a failed profile loses the profile, not the measured run
            warnings.warn(f"the TensorRT layer profile failed: {type(err).__name__}: {err}", stacklevel=2)
            super().update({"trt_layer_profile.md": f"the layer profile failed: {type(err).__name__}: {err}\n"})

    def __iter__(self) -> Iterator[str]:
        self._fill()
        return super().__iter__()

    def __len__(self) -> int:
        self._fill()
        return super().__len__()

    def __getitem__(self, key: str) -> str:
        self._fill()
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        self._fill()
        return super().__contains__(key)

    def keys(self):  # type: ignore[override]
        self._fill()
        return super().keys()

    def items(self):  # type: ignore[override]
        self._fill()
        return super().items()

    def values(self):  # type: ignore[override]
        self._fill()
        return super().values()

    def get(self, key, default=None):  # type: ignore[override]
        self._fill()
        return super().get(key, default)
