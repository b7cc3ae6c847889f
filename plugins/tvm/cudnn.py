"""TVM-cuDNN: convolutions (with their bias and ReLU) become calls of cuDNN, the rest of the graph
stays with TVM's own CUDA code.

TVM's ``partition_for_cudnn`` finds the conv2d (+bias, +ReLU) regions. PyPI's TVM has no cuDNN
codegen (``relax.ext.cudnn``), so instead of it each region is lowered here to a TE extern that
calls TVM's cuDNN runtime functions (``tvm.contrib.cudnn.conv2d.forward`` and
``conv2d+bias+act.forward``, built by ``python -m harness_plugins.tvm.build_cudnn``): the same calls a
TVM built with USE_CUDNN makes, with cuDNN's algorithm chosen once per convolution by cuDNN's
own search (``cudnnFindConvolutionForwardAlgorithm``) at compile time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

CROSS_CORRELATION = 1  # cudnnConvolutionMode_t: what deep-learning frameworks call convolution
NCHW = 0  # cudnnTensorFormat_t
RELU, IDENTITY = 1, 5  # cudnnActivationMode_t
IMPLICIT_PRECOMP_GEMM = 1  # the one algorithm cuDNN's fused conv+bias runs without an activation

#: chooses cuDNN's algorithm: (spec, x shape, w shape, y shape, dtype) -> algorithm index
AlgoChooser = Callable[[dict[str, Any], list[int], list[int], list[int], str], int]


def calls(mod, pred) -> int:
    """How many bindings of ``main`` are calls that ``pred`` accepts."""
    from tvm import relax
    n = 0
    for block in mod["main"].body.blocks:
        for binding in block.bindings:
            if isinstance(binding.value, relax.Call) and pred(binding.value):
                n += 1
    return n


def conv_calls(mod) -> int:
    return calls(mod, lambda c: getattr(c.op, "name", "") == "relax.nn.conv2d")


def partition(mod):
    """(partitioned module, convolution regions found, convolutions in all)."""
    from tvm.relax.backend.cuda.cudnn import partition_for_cudnn

    total = conv_calls(mod)
    out = partition_for_cudnn(mod)
    regions = {gv for gv, f in out.functions.items() if f.attrs is not None and "Codegen" in f.attrs}
    return out, calls(out, lambda c: c.op in regions), total


def region_spec(func) -> dict[str, Any]:
    """What a partitioned region computes: the conv2d's attributes, and whether a bias and a ReLU follow."""
    from tvm import relax

    spec: dict[str, Any] = {"bias": False, "relu": False}

    def visit(expr) -> None:
        if isinstance(expr, relax.Call):
            name = getattr(expr.op, "name", "")
            if name == "relax.nn.conv2d":
                a = expr.attrs
                spec.update(stride=[int(v) for v in a.strides], padding=[int(v) for v in a.padding],
                            dilation=[int(v) for v in a.dilation], groups=int(a.groups),
                            layout=(str(a.data_layout), str(a.kernel_layout)),
                            out_dtype=str(a.out_dtype) if str(a.out_dtype) not in ("", "void") else "")
            elif name == "relax.add":
                spec["bias"] = True
            elif name == "relax.nn.relu":
                spec["relu"] = True
    relax.analysis.post_order_visit(func.body, visit)
    return spec


def output_shape(spec: dict[str, Any], x: list[int], w: list[int]) -> list[int]:
    (sh, sw), (dh, dw) = spec["stride"], spec["dilation"]
    top, left, bottom, right = spec["padding"]
    oh = (x[2] + top + bottom - dh * (w[2] - 1) - 1) // sh + 1
    ow = (x[3] + left + right - dw * (w[3] - 1) - 1) // sw + 1
    return [x[0], w[0], oh, ow]


def supported(spec: dict[str, Any]) -> bool:
    """cuDNN's legacy API pads symmetrically, in NCHW here; a region it cannot run stays with TVM."""
    top, left, bottom, right = spec["padding"]
    return spec["layout"] == ("NCHW", "OIHW") and top == bottom and left == right


def conv_te(x, w, *bias, spec: dict[str, Any], algo: int, fuse_bias: bool):
    """The TE extern calling cuDNN: conv2d, or conv2d+bias(+ReLU) in one call."""
    from tvm import te, tirx

    (sh, sw), (dh, dw) = spec["stride"], spec["dilation"]
    ph, pw = spec["padding"][0], spec["padding"][1]
    oshape = output_shape(spec, [int(v) for v in x.shape], [int(v) for v in w.shape])
    compute = "float32"  # fp16 data accumulates in float32 (cuDNN's PSEUDO_HALF), as PyTorch does
    if fuse_bias:
        act = RELU if spec["relu"] else IDENTITY

        def body(ins, outs):
            return tirx.call_packed("tvm.contrib.cudnn.conv2d+bias+act.forward", CROSS_CORRELATION, NCHW, algo,
                                    ph, pw, sh, sw, dh, dw, act, 0.0, ins[0], ins[1], ins[2], outs[0], compute,
                                    spec["groups"])
        return te.extern(oshape, [x, w, bias[0]], body, name="cudnn_conv2d_bias")

    def plain(ins, outs):
        return tirx.call_packed("tvm.contrib.cudnn.conv2d.forward", CROSS_CORRELATION, NCHW, algo, ph, pw, sh, sw,
                                dh, dw, ins[0], ins[1], outs[0], compute, spec["groups"])
    return te.extern(oshape, [x, w], plain, name="cudnn_conv2d")


def find_algo(spec: dict[str, Any], x: list[int], w: list[int], y: list[int], dtype: str) -> int:
    """cuDNN's fastest algorithm for this convolution on the current GPU (its own timed search)."""
    from tvm.contrib import cudnn

    return int(cudnn.conv_forward_find_algo(NCHW, [spec["padding"][0], spec["padding"][1]], spec["stride"],
                                            spec["dilation"], x, w, y, dtype, "float32", spec["groups"], False))


def fixed_algo(name: str) -> AlgoChooser:
    """One algorithm for every convolution, by cuDNN's name without its prefix (``implicit_precomp_gemm``)."""
    index = ("implicit_gemm", "implicit_precomp_gemm", "gemm", "direct", "fft", "fft_tiling", "winograd",
             "winograd_nonfused").index(name)
    return lambda *args: index


def _info(expr):
    """A Relax expression's tensor type (``ty`` in TVM 0.27, ``struct_info`` before)."""
    return getattr(expr, "ty", None) or expr.struct_info


def _shape(expr) -> list[int]:
    return [int(v) for v in _info(expr).shape]


def offload(mod, choose_algo: AlgoChooser = find_algo) -> tuple[Any, dict[str, int]]:
    """The partitioned module with every cuDNN region lowered to a cuDNN call (the regions cuDNN cannot
    run go back to TVM's ops); returns it with counts: ``convs`` offloaded, ``fused`` of them with their
    bias (and ReLU) in the same call, ``kept`` left with TVM."""
    import tvm
    from tvm import relax

    counts = {"convs": 0, "fused": 0, "kept": 0}
    regions = {gv: f for gv, f in mod.functions.items()
               if isinstance(f, relax.Function) and f.attrs is not None and f.attrs.get("Codegen") == "cudnn"}

    @relax.expr_functor.mutator
    class Lower(relax.PyExprMutator):
        def visit_call_(self, call):  # noqa: N802 (TVM's visitor name)
            call = super().visit_call_(call)
            if not isinstance(call.op, relax.GlobalVar) or call.op not in regions:
                return call
            spec = region_spec(regions[call.op])
            x, w, *rest = call.args
            if not supported(spec):
                counts["kept"] += 1
                return self._tvm_ops(spec, x, w, rest)
            xs, ws = _shape(x), _shape(w)
            dtype = str(_info(x).dtype)
            ys = output_shape(spec, xs, ws)
            fuse = bool(rest) and _shape(rest[0]) == [1, ws[0], 1, 1]  # a per-channel bias joins the call
            algo = choose_algo(spec, xs, ws, ys, dtype)
            if fuse and not spec["relu"]:
                algo = IMPLICIT_PRECOMP_GEMM  # cuDNN runs conv+bias without activation with this one only
            counts["convs"] += 1
            if fuse:
                counts["fused"] += 1
                return self.builder_.call_te(conv_te, x, w, rest[0], spec=spec, algo=algo, fuse_bias=True,
                                             primfunc_name_hint="cudnn_conv2d_bias")
            out = self.builder_.call_te(conv_te, x, w, spec=spec, algo=algo, fuse_bias=False,
                                        primfunc_name_hint="cudnn_conv2d")
            return self._epilogue(spec, self.builder_.emit(out), rest)

        def _tvm_ops(self, spec, x, w, rest):
            conv = relax.op.nn.conv2d(x, w, strides=spec["stride"], padding=spec["padding"],
                                      dilation=spec["dilation"], groups=spec["groups"],
                                      data_layout=spec["layout"][0], kernel_layout=spec["layout"][1],
                                      out_dtype=spec["out_dtype"] or None)
            return self._epilogue(spec, self.builder_.emit(conv), rest)

        def _epilogue(self, spec, y, rest):
            if rest:
                y = relax.op.add(y, rest[0])
                if spec["relu"]:
                    y = relax.op.nn.relu(self.builder_.emit(y))
            return y

    lower = Lower(mod)
    for gv, func in mod.functions.items():
        if isinstance(func, relax.Function) and gv not in regions:
            lower.builder_.update_func(gv, lower.visit_expr(func))
    out = lower.builder_.get()  # with the TE externs made above; the regions are no longer called
    gone = {gv.name_hint for gv in regions}
    out = tvm.IRModule({gv: f for gv, f in out.functions.items() if gv.name_hint not in gone}, attrs=out.attrs)
    return relax.transform.DeadCodeElimination(["main"])(relax.transform.Normalize()(out)), counts
