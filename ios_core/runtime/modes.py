"""The runtime's and the kernel choice's names, apart from the torch code that implements them, so that options
can be checked (and ``--help`` listed) without importing torch."""

#: runtime name -> (program mode on CUDA, capture as a CUDA graph); ``graph`` honours the
#: schedule's per-stage barrier flags, ``graph-stages`` puts the original's barriers everywhere
RUNTIMES = {"graph": ("edges", True), "graph-stages": ("stages", True), "eager": ("edges", False),
            "ios-faithful": ("faithful", False)}
KERNEL_MODES = ("auto", "cudnn", "gemm")
