from __future__ import annotations

import numpy as np

from harness.backend import AllocatorStats, Backend, BackendError, Model, Prepared
from ios_core.runtime.target import DTYPES

from .config import JaxConfig


class JaxBackend(Backend[JaxConfig]):
    name = "jax"
    times_in_prepare = True  # XLA's GPU autotuner times conv and GEMM algorithms while compiling
    runs = "the IR as a jax.jit function (XLA)"
    display_name = "JAX"
    config_class = JaxConfig
    devices = ("cpu", "cuda")
    requires = ("jax",)
    extra = "jax"
    gpu_run = "H100 80GB HBM3, 2026-11-22"
    install = "pip install -e '.[jax]' (CPU); on a GPU: pip install 'jax[cuda13]'"

    def prepare(self, model: Model, batch: int, device: str, precision: str) -> Prepared:
        graph = model.graph()  # the IR: this backend converts it node by node
        import jax
        import jax.numpy as jnp

        from ios_core.interpreters.jax import jax_params, to_jax

        platform = "gpu" if device == "cuda" else "cpu"
        try:
            dev = jax.devices(platform)[0]
        except RuntimeError:
            raise BackendError(f"JAX has no {platform} device here (it has: {jax.default_backend()}); "
                               f"install a CUDA build of jax (pip install 'jax[cuda13]')") from None
        dtype = getattr(jnp, DTYPES[precision])
        # fp32 means strict float32 (no TF32 on the GPU); tf32 allows tensor-core float32
        prec = {"fp32": jax.lax.Precision.HIGHEST, "tf32": jax.lax.Precision.DEFAULT}.get(precision)

        def put(a: np.ndarray):
            return jax.device_put(jnp.asarray(a, dtype=dtype), dev)

        params = jax_params(graph, put)
        example = put(np.zeros((batch, *graph.input_shape), np.float32))
        # compiled now, ahead of the first call (the optimization cost), so XLA's buffer plan can be read
        fn = jax.jit(to_jax(graph, prec)).lower(params, example).compile()
        call_peak = call_peak_bytes(fn)
        last = [None]

        def load(x: np.ndarray):
            return put(x)

        def infer(x):
            last[0] = fn(params, x)
            return last[0]

        def synchronize() -> None:
            if last[0] is not None:
                last[0].block_until_ready()

        fn(params, example).block_until_ready()  # the first call's one-off costs, in the optimization cost too
        return Prepared(infer=infer, load_input=load, synchronize=synchronize,
                        to_numpy=lambda y: np.asarray(y, dtype=np.float32), device_name=str(dev.device_kind),
                        display_name="JAX", params={"jax_device": str(dev), "jax_platform": dev.platform},
                        memory_stats=lambda: allocator_stats(dev, call_peak))


def call_peak_bytes(compiled) -> float:
    """XLA's peak for one call of ``compiled`` by its buffer plan (arguments, outputs and live temporaries); 0
    where this JAX does not say."""
    try:
        return float(getattr(compiled.memory_analysis(), "peak_memory_in_bytes", 0) or 0)
    except Exception:  # noqa: BLE001 - an analysis a platform does not give: the allocator's figures stand
        return 0.0


def allocator_stats(dev, call_peak: float = 0.0) -> AllocatorStats | None:
    """JAX's allocator on ``dev``: bytes in use and the peak since the process began (XLA's autotuning in the
    compile included; JAX cannot reset it), with the compiled call's own peak; None where the platform keeps no
    counters (the CPU)."""
    stats = dev.memory_stats()
    if not stats or "peak_bytes_in_use" not in stats:
        return None
    return AllocatorStats(float(stats.get("bytes_in_use", 0)), float(stats["peak_bytes_in_use"]), call_peak)
