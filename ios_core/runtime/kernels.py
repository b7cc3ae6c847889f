"""Kernel choice per convolution: the candidates the GPU offers, timed, the fastest kept.

A 1x1 convolution (stride 1, no padding, one group) on NHWC memory is a matrix product of
the (N*H*W, C) activations with the (O, C) weights; cuBLAS runs it with the bias in the
GEMM's epilogue, where cuDNN's conv adds a bias without a fused ReLU in a separate kernel
(kernels_frontier.md: NASNet 1.23x, RandWire 1.47x with the bias fold). Which is faster
depends on the shape, the precision and the GPU, so :class:`KernelTable` times both for
every distinct convolution the runtime meets (outside CUDA-graph capture, the first time
the shape is seen: the runtimes and timers call their work once eagerly before capturing)
and keeps the faster. The search's stage timings, the in-situ selection and the final
model share one table, so the DP plans with the kernels that will run, and the choices
travel with the schedule file (``Schedule.stats["kernels"]``).

Depthwise convolutions (one group per input channel) are timed as cuDNN's against ATen's own (``native``: PyTorch's
CUDA depthwise kernel, NCHW); with ``triton_depthwise`` (the planner's default) as a Triton kernel written here
(:mod:`.triton_depthwise`) against ATen's, and cuDNN's only with ``depthwise_cudnn``. cuDNN builds its depthwise
plans at run time: each new shape costs its first call hundreds of milliseconds, with its plan search or without,
against under a millisecond for ATen's (bench/conv_first_call.py, BENCHMARKS.md), so a network of separable
convolutions (NASNet, RandWire) spends most of a warm rerun building cuDNN plans; where another kernel is as fast,
a later run never asks cuDNN for that shape. In the captured model at batch 1 cuDNN's kernel was the faster on 40 of
NASNet's and RandWire's 41 shapes against ATen's (which reads NCHW: an NHWC model pays two layout copies around
it), and on 28 of 33 against the first Triton one, which computed an element per lane; the Triton kernel now works
on tiles of pixels by channels and is the faster on most of those shapes, cuDNN's winning the rest by microseconds
in all (BENCHMARKS.md), so by default cuDNN's depthwise kernel is not even tried where the Triton one
runs: a plan it builds costs more than its gains.

Pools likewise: ATen's NHWC max pool is slow (BENCHMARKS.md; 2.1 of 8.0 ms summed kernel time
for Inception v3 at batch 128, fp16, where torch.compile's Triton pools take a fraction), so on
CUDA each distinct pool is also run by a Triton kernel (:mod:`.triton_pool`, written here, loaded
without Dynamo), timed against ATen's, and the faster kept (``triton`` in the record). So is each
``fused`` program of the ``fuse_pointwise`` pass: its operators one by one, or Inductor's one kernel
for all of them.

The Triton programs (depthwise and pools) compile on first use, about a second each. :meth:`KernelTable.ahead`
runs a model or part once beforehand with each program the choice will need compiled on a thread pool
(:mod:`.ahead`) instead of launched, so a new machine compiles a network's programs at once, not one by one.

``mode``: ``auto`` (time the candidates), ``cudnn`` (always the vendor library: cuDNN convs and
ATen pools, the ablation baseline), ``gemm`` (1x1 convs as GEMM wherever the layout allows: for
tests and ablations; pools on ATen).
"""

from __future__ import annotations

import functools
import json
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, cast

import torch
import torch.nn.functional as F

from ..interpreters.torch import torch_activation
from ..ir.nodes import Conv, Op, Pool
from ..ir.ops import OPS
from .modes import KERNEL_MODES

#: part of the context the store keeps kernel choices under: a choice timed against another implementation
#: of a candidate is not reused (2: the Triton pools are :mod:`.triton_pool`'s, no longer Inductor's; 3: depthwise
#: convolutions have ATen's kernel too; 4: the Triton depthwise kernel works on tiles; 5: its tiles from measurement;
#: 6: the search's depthwise convolutions on the Triton kernel too, cuDNN's not tried by default)
CANDIDATES_VERSION = 6
IMPLS = ("cudnn", "gemm")
DEPTHWISE_TRITON_ACTS = ("identity", "relu")  # what .triton_depthwise applies in its kernel
DEPTHWISE = ("cudnn", "native")  # a depthwise conv's candidates without the Triton kernel
DEPTHWISE_TRITON = ("triton", "native")  # with it (triton_depthwise or triton_convs), and cuDNN's with depthwise_cudnn
POOL_IMPLS = ("aten", "triton")
CONV_TEMPLATE = ("cudnn", "triton")  # a convolution's candidates with ``triton_convs``
#: Inductor's options for a generated convolution: Triton templates only (cuDNN and cuBLAS are the other
#: candidates already), max-autotune's config search, no CUDA graph of its own (the runtime captures the model)
TEMPLATE_OPTIONS: dict[str, str | bool] = {"max_autotune": True, "max_autotune_conv_backends": "TRITON",
                                            "max_autotune_gemm_backends": "TRITON", "triton.cudagraphs": False}


def gemm_ok(node: Conv, x: torch.Tensor) -> bool:
    """A 1x1 conv on an NHWC tensor whose (N*H*W, C) view needs no copy."""
    if node.kernel != (1, 1) or node.stride != (1, 1) or node.padding != (0, 0) or node.groups != 1:  # dilation moot
        return False
    if x.dim() != 4 or x.stride(1) != 1:  # channels innermost: channels_last memory (or a slice of it)
        return False
    n, _, h, w = x.shape
    rows_collapse = (h == 1 or x.stride(2) == w * x.stride(3)) and (n == 1 or x.stride(0) == h * x.stride(2))
    return rows_collapse


def conv_gemm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
    """The 1x1 conv as ``F.linear`` on the NHWC view; the result is NCHW-shaped, NHWC in memory."""
    n, c, h, wd = x.shape
    rows = x.permute(0, 2, 3, 1).reshape(n * h * wd, c)
    y = F.linear(rows, w.reshape(w.shape[0], c), b)
    return y.view(n, h, wd, -1).permute(0, 3, 1, 2)


def depthwise_ok(node: Conv, x: torch.Tensor) -> bool:
    """A depthwise convolution (a group per input channel, several channels) on a dense CUDA tensor: ATen's own
    kernel and the Triton one write their output in the layout the input is dense in (a strided slice would
    not say which)."""
    return x.is_cuda and x.dim() == 4 and node.groups > 1 and node.groups == x.shape[1] and dense(x)


def depthwise_triton_ok(node: Conv) -> bool:
    """The Triton depthwise kernel runs ``node``: undilated, its activation (none or ReLU) applied in the kernel."""
    return node.dilation == (1, 1) and node.act in DEPTHWISE_TRITON_ACTS


def conv_native(node: Conv, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
    """``node`` (a depthwise convolution, no activation) by ATen's CUDA depthwise kernel, which reads and writes
    NCHW: an NHWC input is copied to NCHW and the result back, so the model keeps its layout (the copies are
    in what the kernel choice times). ``w``: the weights in NCHW memory."""
    nhwc = not x.is_contiguous()
    y = torch.ops.aten._conv_depthwise2d(x.contiguous(), w, list(node.kernel), b, list(node.stride),
                                         list(node.padding), list(node.dilation))
    return y.contiguous(memory_format=torch.channels_last) if nhwc else y


def signature(node: Conv, x: torch.Tensor) -> tuple:
    dilated = (node.dilation,) if node.dilation != (1, 1) else ()  # the keys of undilated convs unchanged
    return (tuple(x.shape), tuple(x.stride()), node.out_channels, node.kernel, node.stride, node.padding,
            node.groups, node.act, x.dtype, *dilated)


def dense(x: torch.Tensor) -> bool:
    """Contiguous in one of the two layouts. Inductor specializes a kernel on its input's
    strides, and the search meets a pool on many strided slices of concatenation buffers:
    compiling one kernel per slice would cost a compile each and hit Dynamo's recompile
    limits (a failed GPU run), so only dense inputs get a Triton candidate."""
    return x.is_contiguous() or x.is_contiguous(memory_format=torch.channels_last)


def pool_signature(node: Pool, x: torch.Tensor) -> tuple:
    return ("pool", tuple(x.shape), tuple(x.stride()), node.pool_type, node.kernel, node.stride, node.padding,
            node.ceil_mode, node.count_include_pad, x.dtype)


#: Dynamo keeps every function torch.compile wraps under one code object (its ``inner``
#: wrapper), so the default limit of 8 compiled variants is shared by all of a network's pools:
#: past it Dynamo silently runs the rest eagerly (seen on the GPU). Raised for the measuring
#: process (one per job) when the first pool is compiled.
RECOMPILE_LIMIT = 512


def _configure_inductor() -> None:
    """Also compiles in this process: each program is one kernel, so Inductor's pool of compile workers (one
    per core, started on the first compile: a second or two) has nothing to overlap."""
    import torch._dynamo.config as dynamo_config
    import torch._inductor.config as inductor_config

    dynamo_config.recompile_limit = max(dynamo_config.recompile_limit, RECOMPILE_LIMIT)
    dynamo_config.accumulated_recompile_limit = max(dynamo_config.accumulated_recompile_limit, 4 * RECOMPILE_LIMIT)
    inductor_config.compile_threads = 1


def template_ok(node: Conv, x: torch.Tensor) -> bool:
    """Inductor's convolution template can run ``node`` on ``x`` (undilated, on a dense CUDA tensor) and it
    is not a pointwise (1x1, stride 1, unpadded) convolution: Inductor would lower that to a matrix product
    (cuBLAS among its "Triton" choices, and some twenty GEMM configs autotuned), and cuBLAS is a candidate
    of the vendor's choice already."""
    pointwise = node.kernel == (1, 1) and node.stride == (1, 1) and node.padding == (0, 0)
    return x.is_cuda and node.dilation == (1, 1) and not pointwise and dense(x)


def triton_conv(node: Conv) -> Callable[..., torch.Tensor]:
    """``node`` (with its bias and activation) compiled by Inductor from its Triton convolution
    template, the template's configs autotuned on the first call; called as ``conv(x, w, b)``."""
    _configure_inductor()

    def conv(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
        y = F.conv2d(x, w, b, node.stride, node.padding, node.dilation, node.groups)
        return torch_activation(y, node.act)
    return cast(Callable[..., torch.Tensor],
                torch.compile(conv, dynamic=False, fullgraph=True, options=dict(TEMPLATE_OPTIONS)))


#: a fused node -> its program as text, made once (the eager runtime asks for the signature on every call)
_PROGRAMS: weakref.WeakKeyDictionary[Op, str] = weakref.WeakKeyDictionary()


def fused_signature(node: Op, xs: list[torch.Tensor]) -> tuple:
    """A fused program on its operands: compiled once per program, shapes, strides and dtype."""
    program = _PROGRAMS.get(node)
    if program is None:
        program = _PROGRAMS[node] = json.dumps(node.params["steps"], sort_keys=True, default=str)
    return ("fused", program, *((tuple(x.shape), tuple(x.stride())) for x in xs), xs[0].dtype)


def triton_fused(node: Op) -> Callable[..., torch.Tensor]:
    """A ``fused`` operator's program compiled by Inductor into one kernel (on its first call)."""
    _configure_inductor()
    fn = OPS["fused"].torch
    params = node.params

    def fused(*xs: torch.Tensor) -> torch.Tensor:
        return fn(list(xs), params)
    return cast(Callable[..., torch.Tensor], torch.compile(fused, dynamic=False, fullgraph=True))


def sig_text(sig: tuple) -> str:
    """A JSON-safe key for a signature (schedule files store the choices by it)."""
    return repr(sig)


class Remembered(Protocol):
    """Choices kept across runs (:class:`ios_core.cost.CostCache` with string values)."""

    def get(self, k: str) -> str | None: ...

    def put(self, k: str, v: str) -> None: ...


@dataclass(frozen=True)
class KernelPolicy:
    """Which candidates a table times, as a value each table is made with (the search's and the final model's
    differ: :meth:`for_search`). ``mode``: ``auto`` times the candidates, ``cudnn`` and ``gemm`` fix them.
    ``triton_convs``: convolutions also timed against Inductor's generated one (:func:`triton_conv`), and depthwise
    ones against :mod:`.triton_depthwise`'s kernel, which ``triton_depthwise`` alone offers too. ``depthwise_cudnn``:
    cuDNN's depthwise kernel timed beside the Triton one, kept only where faster than the best other candidate by
    more than ``start_margin`` (cuDNN builds each depthwise plan anew in every process, where ATen's kernel starts at
    once and the Triton one loads from disk)."""

    mode: str = "auto"
    triton_convs: bool = False
    triton_depthwise: bool = False
    depthwise_cudnn: bool = True
    start_margin: float = 0.0

    def __post_init__(self) -> None:
        if self.mode not in KERNEL_MODES:
            raise ValueError(f"unknown kernel mode {self.mode!r}; choose one of: {', '.join(KERNEL_MODES)}")

    def for_search(self) -> KernelPolicy:
        """The policy of the layout's and the search's timings: no Triton templates (each merged conv of the search
        would autotune one); the final model's convolutions alone are timed against them."""
        return replace(self, triton_convs=False)


@dataclass
class KernelChoices:
    """What the tables of one plan learned together: each signature's choice (saved with the schedule), the
    candidates' times, why a candidate failed, the compiled Triton programs, and the counts of it all."""

    choices: dict[str, str] = field(default_factory=dict)
    timings: dict[str, dict[str, float]] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)  # key -> why its second candidate could not be timed
    compiled: dict[str, Callable[..., torch.Tensor]] = field(default_factory=dict)  # key -> Triton program
    timed: int = 0
    reused: int = 0  # choices taken from ``remembered`` (an earlier run's timing of the same signature)
    compiles: int = 0  # Triton programs compiled (first calls)
    compile_s: float = 0.0  # and the seconds they took
    ahead_programs: int = 0  # programs handed to ahead()'s pool
    ahead_s: float = 0.0  # and its passes' seconds


class _Field:
    """A table's attribute kept in its ``policy`` (read-only: a table under another policy is
    :meth:`KernelTable.under`'s) or in what it ``learned`` (shared, so tables over the same choices count together)."""

    def __init__(self, holder: str):
        self.holder = holder

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, table: Any, owner: type | None = None) -> Any:
        return getattr(getattr(table, self.holder), self.name)

    def __set__(self, table: Any, value: Any) -> None:
        if self.holder == "policy":
            raise AttributeError(f"a kernel table's {self.name} is part of its policy: use table.under(policy)")
        setattr(table.learned, self.name, value)


class KernelTable:
    """Signature -> implementation, filled by timing the candidates on first sight.

    ``timer(calls) -> ms per call`` times zero-argument callables (each enqueues one conv on
    the current stream); the backend passes one built on the stage timer's instrument, so a
    choice rests on the same timing as everything else in the search. ``remembered`` keeps the
    choices across runs, keyed by ``context`` (GPU, library versions) and the signature, so every
    model, batch size and schedule with the same operator reuses one timing (and compiles no
    Triton candidate that lost). ``policy`` (:class:`KernelPolicy`, or a mode's name) says which candidates are
    timed; ``learned`` (:class:`KernelChoices`) is what the table found, shared with the tables :meth:`under`
    makes (``choices`` seeds a new one). ``compile_threads``: threads :meth:`ahead` compiles on (0: none,
    each Triton program compiled when first called). Without a ``timer`` every choice is the first candidate,
    untimed (the layout's screen): cuDNN, ATen's pools, and the Triton kernel for depthwise convolutions where
    it is offered without cuDNN."""

    mode, triton_convs, triton_depthwise = _Field("policy"), _Field("policy"), _Field("policy")
    depthwise_cudnn, start_margin = _Field("policy"), _Field("policy")
    choices, timings, failed, compiled = _Field("learned"), _Field("learned"), _Field("learned"), _Field("learned")
    timed, reused, compiles, compile_s = _Field("learned"), _Field("learned"), _Field("learned"), _Field("learned")
    ahead_programs, ahead_s = _Field("learned"), _Field("learned")

    def __init__(self, policy: KernelPolicy | str = "auto",
                 timer: Callable[[list[Callable[[], object]]], list[float]] | None = None,
                 choices: dict[str, str] | None = None, remembered: Remembered | None = None, context: str = "", *,
                 compile_threads: int = 0, learned: KernelChoices | None = None):
        self.policy = KernelPolicy(policy) if isinstance(policy, str) else policy
        self.timer, self.remembered, self.context = timer, remembered, context
        self.compile_threads = compile_threads
        self.learned = learned if learned is not None else KernelChoices(dict(choices or {}))
        self._ahead = False  # inside ahead(): Triton programs compiled, not launched; nothing chosen

    def under(self, policy: KernelPolicy) -> KernelTable:
        """A table timing with ``policy``, sharing this one's timer, store and everything learned."""
        return KernelTable(policy, self.timer, remembered=self.remembered, context=self.context,
                           compile_threads=self.compile_threads, learned=self.learned)

    def impl(self, node: Conv, x: torch.Tensor, run: Callable[[str], torch.Tensor]) -> str:
        """The implementation for ``node`` on ``x``; ``run(impl)`` enqueues the conv with one: cuDNN or, for
        a 1x1 that is one matrix product, cuBLAS, for a depthwise one ATen's own kernel; with ``triton_convs``
        (or ``triton_depthwise``) a depthwise one is also timed on :mod:`.triton_depthwise`'s kernel, and with
        ``triton_convs`` any other that is not pointwise as cuDNN against Triton's template."""
        if self.mode == "auto" and depthwise_ok(node, x):
            return self._choose(self.depthwise_key(node, x), self.depthwise_impls(node, x), x, run,
                                slow_start="cudnn", early=True)
        if self.triton_convs and self.mode == "auto" and template_ok(node, x):
            return self._choose(self.template_key(node, x), CONV_TEMPLATE, x, run)
        if self.mode == "cudnn" or not gemm_ok(node, x):
            return "cudnn"
        key = sig_text(signature(node, x))
        if self.mode == "gemm":
            self.choices[key] = "gemm"  # counted, and recorded in the schedule file like a timed choice
            return "gemm"
        return self._choose(key, IMPLS, x, run)

    @property
    def depthwise_triton(self) -> bool:
        """Whether depthwise convolutions are also timed on the Triton kernel."""
        return self.triton_convs or self.triton_depthwise

    def depthwise_impls(self, node: Conv, x: torch.Tensor) -> tuple[str, ...]:
        """A depthwise ``node``'s candidates on ``x``: cuDNN's and ATen's kernels, cuDNN's first (what runs
        untimed); or the Triton one and ATen's, ATen's first on NCHW memory (its own layout: the layout screen
        compiles no program for NCHW, where the model seldom runs) and the Triton one first on NHWC; cuDNN's
        too with :attr:`depthwise_cudnn`."""
        if not (self.depthwise_triton and depthwise_triton_ok(node)):
            return DEPTHWISE
        if self.depthwise_cudnn:
            return (*DEPTHWISE, "triton")
        return DEPTHWISE_TRITON[::-1] if x.is_contiguous() else DEPTHWISE_TRITON

    def depthwise_key(self, node: Conv, x: torch.Tensor) -> str:
        """The key of the choice among a depthwise ``node``'s candidates on ``x``: each set of candidates a key of
        its own (with the Triton kernel: ``triton``, without cuDNN's: ``triton only``), so a choice made among
        others is not taken for one."""
        offered = "" if not self.depthwise_triton else "triton" if self.depthwise_cudnn else "triton only"
        return sig_text(("depthwise", *((offered,) if offered else ()), *signature(node, x)))

    @staticmethod
    def template_key(node: Conv, x: torch.Tensor) -> str:
        """The key of the choice between cuDNN and Triton's template for ``node`` on ``x``."""
        return sig_text(("triton_conv", *signature(node, x)))

    def pool_impl(self, node: Pool, x: torch.Tensor, run: Callable[[str], torch.Tensor]) -> str:
        """ATen or Triton for a max or average pool on CUDA (auto mode); ATen elsewhere."""
        if self.mode != "auto" or not x.is_cuda or node.pool_type not in ("max", "avg") or not dense(x):
            return "aten"
        return self._choose(sig_text(pool_signature(node, x)), POOL_IMPLS, x, run, early=True)

    def run_compiled(self, key: str, make: Callable[[], Callable[..., torch.Tensor]], args: tuple,
                     fallback: Callable[[], torch.Tensor], vendor: str = "aten") -> torch.Tensor:
        """The Triton kernel chosen for ``key`` (compiled by ``make`` on first use) on ``args``; where it
        fails (a Dynamo or Inductor limit), ``fallback`` now and ``vendor``'s kernel from then on, the
        reason kept: a timer that calls the candidate again (its capture) runs the fallback, compiling
        nothing (Dynamo would retry the failed compile on every call)."""
        if key in self.failed and key not in self.compiled:
            return fallback()
        try:
            if key in self.compiled:
                return self.compiled[key](*args)
            t0 = time.perf_counter()  # the first call compiles (Dynamo, Inductor, Triton; or their caches' hits)
            self.compiled[key] = make()
            out = self.compiled[key](*args)  # inside ahead(): handed to its pool, the output left unwritten
            if self._ahead:
                self.ahead_programs += 1
            else:
                self.compiles += 1
                self.compile_s += time.perf_counter() - t0
            return out
        except Exception as exc:  # noqa: BLE001 - the reason goes to the record (kernel_choice.json)
            self.compiled.pop(key, None)  # torch.compile is lazy: the maker succeeded, its first call failed
            self.choices[key] = vendor
            self._remember(key, vendor)  # later runs do not pay for the failing compile again
            self.failed[key] = f"{type(exc).__name__}: {str(exc)[:200]}"
            return fallback()

    def fused_impl(self, node: Op, xs: list[torch.Tensor], run: Callable[[str], torch.Tensor]) -> str:
        """The operators one by one (``aten``) or Inductor's one kernel (``triton``) for a fused program on
        CUDA (auto mode); one by one elsewhere."""
        if self.mode != "auto" or not xs[0].is_cuda or not all(dense(x) for x in xs if x.dim() == 4):
            return "aten"
        return self._choose(sig_text(fused_signature(node, xs)), POOL_IMPLS, xs[0], run)


    def _choose(self, key: str, impls: tuple[str, ...], x: torch.Tensor, run: Callable[[str], torch.Tensor],
                slow_start: str = "", early: bool = False) -> str:
        """A remembered choice, or the candidates timed (the first, the vendor's, on a tie or
        where nothing can be timed: inside a capture or without a timer); ``slow_start``, the candidate each new
        process pays to start, wins only by more than :attr:`start_margin`. Inside :meth:`ahead`: the Triton
        candidate where it is ``early`` (a program of :mod:`.triton_programs`, compiled on the pool) and not
        already decided against, else the decided or first one; nothing chosen or timed."""
        hit = self.choices.get(key)
        if self._ahead:
            decided = hit or self._recall(key)
            if decided in impls:
                return decided if decided != "triton" or early else impls[0]
            return "triton" if early and self.timer is not None and "triton" in impls else impls[0]
        if hit is not None:
            return hit
        if x.is_cuda and torch.cuda.is_current_stream_capturing():
            return impls[0]  # the safe default, not remembered: nothing is compiled or timed inside a capture
        known = self._recall(key)
        if known in impls:
            self.choices[key] = known
            self.reused += 1
            return known
        if self.timer is None:
            return impls[0]  # the safe default, not remembered
        try:
            times = self.timer([functools.partial(run, i) for i in impls])
        except Exception as exc:  # noqa: BLE001 - a candidate that cannot run (an Inductor error) is not chosen
            self.failed[key] = f"{type(exc).__name__}: {str(exc)[:200]}"
            times = [0.0] + [float("inf")] * (len(impls) - 1)
        self.timings[key] = dict(zip(impls, times))
        self.timed += 1
        if key in self.failed:  # the compiled candidate (the last) did not compile: what it timed was its fallback
            self.timings[key][impls[-1]] = float("inf")
        handicap = {slow_start: 1.0 + self.start_margin}
        choice = min(impls, key=lambda i: (self.timings[key][i] * handicap.get(i, 1.0), i != impls[0]))
        self.choices[key] = choice
        self._remember(key, choice)
        return choice

    def ahead(self, run: Callable[[], object]) -> None:
        """Call ``run`` (one call of a model or part whose kernels this table chooses, on CUDA) once with each
        Triton program of :mod:`.triton_programs` that its choices will call compiled on :attr:`compile_threads`
        threads (or loaded from Triton's disk cache) instead of launched, and wait for them: the calls that time
        the candidates next find them in memory. Its outputs are left unwritten; nothing is chosen. A no-op
        without threads, outside ``auto`` mode or with a Triton that cannot compile ahead."""
        from . import ahead

        if self.compile_threads < 1 or self.mode != "auto" or not ahead.supported():
            return
        t = time.perf_counter()
        self._ahead = True
        try:
            with ahead.compiling(self.compile_threads):
                run()
        finally:
            self._ahead = False
            self.ahead_s += time.perf_counter() - t

    def _remember(self, key: str, choice: str) -> None:
        """Keep a choice for later runs, under this table's context."""
        if self.remembered is not None:
            self.remembered.put(f"{self.context}|{key}", choice)

    def _recall(self, key: str) -> str | None:
        """A choice an earlier run kept under this table's context."""
        return self.remembered.get(f"{self.context}|{key}") if self.remembered is not None else None

    def counts(self) -> dict[str, float]:
        kinds: dict[str, list[str]] = {"fused": [], "triton_conv": [], "depthwise": [], "": []}
        for k, v in self.choices.items():
            kind = next((kind for kind in ("fused", "triton_conv", "depthwise") if k.startswith(f"('{kind}'")), "")
            if kind == "depthwise" and k.startswith("('depthwise', 'triton") != self.depthwise_triton:
                continue  # the search's choices (without the Triton kernel) where the final model's are counted
            kinds[kind].append(v)
        fused, templates, used = kinds["fused"], kinds["triton_conv"], kinds[""]
        return {"kernel_ops_timed": float(self.timed), "kernel_reused": float(self.reused),
                "kernel_conv_triton": float(templates.count("triton")) if self.triton_convs else 0.0,
                "kernel_gemm": float(used.count("gemm")), "kernel_cudnn": float(used.count("cudnn")),
                "kernel_depthwise_native": float(kinds["depthwise"].count("native")),
                "kernel_depthwise_cudnn": float(kinds["depthwise"].count("cudnn")),
                "kernel_depthwise_triton": float(kinds["depthwise"].count("triton")),
                "kernel_pool_triton": float(used.count("triton")), "kernel_pool_aten": float(used.count("aten")),
                "kernel_fused_triton": float(fused.count("triton")), "kernel_fused_aten": float(fused.count("aten")),
                "kernel_compiles": float(self.compiles), "kernel_compile_s": self.compile_s,
                "kernel_ahead_programs": float(self.ahead_programs), "kernel_ahead_s": self.ahead_s}
