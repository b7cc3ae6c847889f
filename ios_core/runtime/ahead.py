"""Triton programs compiled ahead of the calls that time them, on a thread pool.

The kernel choice compiled each Triton program (a depthwise convolution's or a pool's) when it first called it,
one after another: a cold NASNet run on a new GPU machine spent most of a minute compiling them, about a
second each, most of it in LLVM and ptxas, which release the GIL (two threads compile about twice as fast as
one: BENCHMARKS.md). :meth:`~.kernels.KernelTable.ahead` calls the model once inside
:func:`compiling`: there :func:`launch` hands each program to Triton's asynchronous compile mode
(``triton.runtime._async_compile``, which compiles on the given executor and installs the result in the
program's in-memory cache when the block ends) instead of launching it. Triton imports only here and in
:mod:`.triton_programs`, on first use on CUDA."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any


@functools.cache
def supported() -> bool:
    """This Triton can compile ahead (its asynchronous compile mode, Triton 3.4 and later)."""
    try:
        from triton.runtime._async_compile import AsyncCompileMode  # noqa: F401
    except ImportError:
        return False
    return True


@contextlib.contextmanager
def compiling(threads: int) -> Iterator[None]:
    """Inside the block :func:`launch` compiles on ``threads`` threads; the block ends when every program is
    compiled or has failed (a failure is left to the program's next launch, which compiles it again and raises
    where the kernel choice catches it)."""
    from triton.runtime._async_compile import AsyncCompileMode

    with ThreadPoolExecutor(threads, thread_name_prefix="triton-ahead") as pool, \
            AsyncCompileMode(pool, ignore_errors=True):
        yield


def active() -> bool:
    """Inside :func:`compiling` (in this thread)."""
    if not supported():
        return False
    from triton.runtime._async_compile import active_mode

    return active_mode.get() is not None


def launch(program: Any, grid: tuple[int, ...], *args: Any, **constants: Any) -> None:
    """``program[grid](*args, **constants)``, or inside :func:`compiling` its compile for these arguments
    handed to the pool (``warmup``: the key Triton computes from the arguments is the launch's)."""
    if active():
        program.warmup(*args, grid=grid, **constants)
    else:
        program[grid](*args, **constants)
