"""``channels_last=auto`` on CUDA: which memory layout runs a model faster depends on the GPU, the
precision, the batch and the model (cuDNN picks other kernels for NHWC), so the backend times
both briefly and keeps the faster."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from harness.machine.leases import exclusive

#: a brief timing: a few warmup calls, then ``repeats`` x ``calls`` calls timed with CUDA events
WARMUP, CALLS, REPEATS = 3, 20, 3


def time_ms(infer: Callable[[Any], Any], x: Any) -> float:
    """Median over REPEATS of the mean GPU time of CALLS back-to-back calls, in ms. Cheap: for
    inception_v3 at batch 1 about 70 calls, well under a second even eager."""
    import torch

    with exclusive():  # load-aware launcher: no other job measures on this GPU meanwhile
        for _ in range(WARMUP):
            infer(x)
        times = []
        for _ in range(REPEATS):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(CALLS):
                infer(x)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / CALLS)
    return statistics.median(times)
