"""Distinct CUDA streams for the runtime, the stage timer and graph capture.

``torch.cuda.Stream()`` hands out streams round-robin from a per-device pool of 32, and
``torch.cuda.graph`` captures on a stream from the same pool. After enough draws a
group's "side" stream can be the capture stream itself; that group then silently
serialises with the main stream. So the runtime never draws from the pool: it creates
its own non-blocking streams through the CUDA runtime (wrapped as
``torch.cuda.ExternalStream``), and passes one of them explicitly as the capture stream.
Where the CUDA runtime library cannot be opened, streams are drawn from the pool and
kept only when their handles differ from every stream already in use. Either way
:func:`check_distinct` asserts that no two streams of a program share a handle.
"""

from __future__ import annotations

import ctypes
import threading

_LOCK = threading.Lock()
_OWN: list = []  # streams this process created (kept alive: they are never destroyed)
_CAPTURE: list = []


class StreamError(RuntimeError):
    """Two streams that must differ share one handle."""


def _cudart():
    import torch

    major = (torch.version.cuda or "").split(".")[0]
    for name in (f"libcudart.so.{major}", "libcudart.so"):
        try:
            return ctypes.CDLL(name)  # already loaded by torch, found by its soname
        except OSError:
            continue
    return None


def _create_raw(n: int) -> list:
    """``n`` new non-blocking streams from cudaStreamCreateWithFlags, or [] if unavailable."""
    import torch

    lib = _cudart()
    if lib is None:
        return []
    out = []
    for _ in range(n):
        handle = ctypes.c_void_p()
        if lib.cudaStreamCreateWithFlags(ctypes.byref(handle), ctypes.c_uint(1)) != 0:  # cudaStreamNonBlocking
            return []
        out.append(torch.cuda.ExternalStream(handle.value))
    return out


def _from_pool(n: int, taken: set[int]) -> list:
    import torch

    out: list[torch.cuda.Stream] = []
    for _ in range(128):
        if len(out) == n:
            break
        st = torch.cuda.Stream()
        if st.cuda_stream not in taken:
            taken.add(st.cuda_stream)
            out.append(st)
    if len(out) < n:
        raise StreamError(f"could not find {n} distinct CUDA streams in PyTorch's pool")
    return out


def _grow(n: int) -> None:
    import torch

    need = n - len(_OWN)
    if need <= 0:
        return
    new = _create_raw(need)
    if not new:
        taken = {s.cuda_stream for s in _OWN + _CAPTURE} | {torch.cuda.current_stream().cuda_stream,
                                                            torch.cuda.default_stream().cuda_stream}
        new = _from_pool(need, taken)
    _OWN.extend(new)


def side_streams(n: int) -> list:
    """``n`` streams, distinct from each other, from the capture stream and from the
    default stream; the same objects on every call (programs share them)."""
    with _LOCK:
        capture_stream()
        _grow(n)
        out = _OWN[:n]
    check_distinct(out)
    return out


def capture_stream():
    """The one stream every CUDA-graph capture of the runtime runs on."""
    import torch

    if not _CAPTURE:
        made = _create_raw(1)
        if not made:
            taken = {s.cuda_stream for s in _OWN} | {torch.cuda.current_stream().cuda_stream,
                                                     torch.cuda.default_stream().cuda_stream}
            made = _from_pool(1, taken)
        _CAPTURE.append(made[0])
    return _CAPTURE[0]


def check_distinct(streams: list, main=None) -> None:
    """Raise :class:`StreamError` if two of ``streams`` (and ``main``) share a handle."""
    import torch

    handles = [s.cuda_stream for s in streams]
    main = main if main is not None else torch.cuda.current_stream()
    if len(set(handles)) != len(handles) or main.cuda_stream in handles:
        raise StreamError(f"CUDA streams are not distinct: side streams {handles}, main {main.cuda_stream}")
