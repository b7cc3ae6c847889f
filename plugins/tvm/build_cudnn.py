"""``python -m harness_plugins.tvm.build_cudnn``: TVM's cuDNN runtime functions, built from the installed TVM.

PyPI's TVM is built without cuDNN, but its wheel ships the sources of the cuDNN runtime contrib
(``tvm/src/runtime/extra/contrib/cudnn``) and the headers they need. With cuDNN's and the CUDA
runtime's headers (the nvidia-cudnn and nvidia-cuda-runtime wheels that the CUDA build of torch
installs, or a system CUDA), four of those files compile with a C++ compiler alone (no nvcc)
into a small library that registers ``tvm.contrib.cudnn.conv2d.forward`` and friends when loaded
after ``import tvm``. The library goes to the user's cache (``$HARNESS_CACHE_DIR``, else
``$XDG_CACHE_HOME/ios-harness`` or ``~/.cache/ios-harness``), under the TVM and tvm-ffi versions it was
built for: after an upgrade of either ``--list-backends`` names this command again.

    python -m harness_plugins.tvm.build_cudnn [--force] [--cxx g++]
"""

from __future__ import annotations

import argparse
import ctypes
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from harness.backend import BackendError

SOURCES = ("conv_forward.cc", "conv_backward.cc", "softmax.cc", "cudnn_utils.cc")
LIBRARY = "libtvm_cudnn.so"
COMMAND = "python -m harness_plugins.tvm.build_cudnn"


def _package_dir(name: str) -> Path | None:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _nvidia_dirs() -> list[Path]:
    """The CUDA wheels' folders (site-packages/nvidia/*), then a system CUDA (CUDA_HOME, nvcc's, the usual)."""
    found = []
    nvidia = _package_dir("nvidia")
    if nvidia is not None:
        found += sorted(p for p in nvidia.iterdir() if p.is_dir())
    for env in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(env):
            found.append(Path(os.environ[env]))
    nvcc = shutil.which("nvcc")
    if nvcc:
        found.append(Path(nvcc).resolve().parents[1])
    found += [Path("/usr/local/cuda"), Path("/usr")]
    return found + [root / "targets" / "x86_64-linux" for root in found]


def _header_dir(header: str, first: Path) -> Path | None:
    """The include folder that has ``header``: ``first`` if it does, else any CUDA install's (the runtime
    wheel's headers include ``crt/host_defines.h``, which is in the nvidia-cuda-crt wheel or a toolkit)."""
    for inc in [first, *(root / "include" for root in _nvidia_dirs())]:
        if (inc / header).is_file():
            return inc
    return None


def _find(header: str, library: str) -> tuple[Path, Path] | None:
    """(include dir, lib dir) of the first install that has both ``header`` and ``library*``."""
    for root in _nvidia_dirs():
        inc = root / "include"
        if not (inc / header).is_file():
            continue
        for lib in (root / "lib", root / "lib64", root / "lib" / "x86_64-linux-gnu"):
            if lib.is_dir() and any(lib.glob(f"{library}*")):
                return inc, lib
    return None


def cudnn_version(include: Path) -> str:
    """cuDNN's version from its header (``9.19.0``)."""
    text = "".join((include / name).read_text() for name in ("cudnn_version.h",) if (include / name).is_file())
    nums = {}
    for key in ("CUDNN_MAJOR", "CUDNN_MINOR", "CUDNN_PATCHLEVEL"):
        for line in text.splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[0] == "#define" and parts[1] == key:
                nums[key] = parts[2]
    return ".".join(nums.get(k, "?") for k in ("CUDNN_MAJOR", "CUDNN_MINOR", "CUDNN_PATCHLEVEL"))


def versions() -> dict[str, str]:
    """What the library is built for: the installed TVM and tvm-ffi."""
    import tvm
    import tvm_ffi

    return {"tvm": str(tvm.__version__), "tvm_ffi": str(getattr(tvm_ffi, "__version__", "unknown"))}


def cache_dir() -> Path:
    """Where built libraries live: one per user and machine, whichever results folder a run uses."""
    if os.environ.get("HARNESS_CACHE_DIR"):
        return Path(os.environ["HARNESS_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ios-harness"


def library_dir() -> Path:
    v = versions()
    return cache_dir() / "tvm_cudnn" / f"tvm{v['tvm']}-ffi{v['tvm_ffi']}"


def inputs() -> dict[str, Path]:
    """Every folder the build needs; a BackendError names the first one missing and how to get it."""
    tvm_dir, ffi_dir = _package_dir("tvm"), _package_dir("tvm_ffi")
    if tvm_dir is None or ffi_dir is None:
        raise BackendError("the TVM-cuDNN build needs TVM: pip install -e '.[tvm]'")
    src = tvm_dir / "src" / "runtime" / "extra" / "contrib" / "cudnn"
    missing = [s for s in SOURCES if not (src / s).is_file()]
    if missing:
        raise BackendError(f"this TVM ({versions()['tvm']}) ships no cuDNN contrib sources ({', '.join(missing)} "
                           f"missing from {src}); install apache-tvm 0.27 from PyPI, or a TVM built with USE_CUDNN")
    cudnn = _find("cudnn.h", "libcudnn.so")
    if cudnn is None:
        raise BackendError("the TVM-cuDNN build needs cuDNN's headers and library (cudnn.h, libcudnn.so): the CUDA "
                           "build of torch installs them (nvidia-cudnn-cu13), or set CUDA_HOME to a CUDA with cuDNN")
    cuda = _find("cuda_runtime_api.h", "libcudart.so")
    if cuda is None:
        raise BackendError("the TVM-cuDNN build needs the CUDA runtime's headers and library (cuda_runtime_api.h, "
                           "libcudart.so): pip install nvidia-cuda-runtime, or set CUDA_HOME")
    crt = _header_dir("crt/host_defines.h", cuda[0])
    if crt is None:
        raise BackendError(f"the TVM-cuDNN build needs CUDA's crt headers (crt/host_defines.h, included by "
                           f"{cuda[0]}/cuda_runtime_api.h): pip install nvidia-cuda-crt, or set CUDA_HOME")
    return {"sources": src, "tvm_include": tvm_dir / "include", "tvm_lib": tvm_dir / "lib",
            "ffi_include": ffi_dir / "include", "ffi_lib": ffi_dir / "lib", "cudnn_include": cudnn[0],
            "cudnn_lib": cudnn[1], "cuda_include": cuda[0], "crt_include": crt, "cuda_lib": cuda[1]}


def _link_name(lib_dir: Path, stem: str) -> str:
    """``-l:libcudnn.so.9`` where only the versioned file exists (the wheels ship no ``libcudnn.so``)."""
    if (lib_dir / f"lib{stem}.so").exists():
        return f"-l{stem}"
    versioned = sorted(lib_dir.glob(f"lib{stem}.so.*"), key=lambda p: len(p.name))
    if not versioned:
        raise BackendError(f"no lib{stem}.so in {lib_dir}")
    return f"-l:{versioned[0].name}"


def compile_command(found: dict[str, Path], out: Path, cxx: str = "g++") -> list[str]:
    libs = [(found["tvm_lib"], "tvm_runtime"), (found["ffi_lib"], "tvm_ffi"), (found["cudnn_lib"], "cudnn"),
            (found["cuda_lib"], "cudart")]
    cmd = [cxx, "-std=c++17", "-O2", "-fPIC", "-shared", "-Wl,--no-undefined", "-o", str(out),
           *(str(found["sources"] / s) for s in SOURCES)]
    includes = [found[k] for k in ("tvm_include", "ffi_include", "cudnn_include", "cuda_include", "crt_include")]
    cmd += [f"-I{d}" for d in dict.fromkeys(includes)]  # each once, in this order
    for lib_dir, stem in libs:
        cmd += [f"-L{lib_dir}", f"-Wl,-rpath,{lib_dir}", _link_name(lib_dir, stem)]
    return cmd


def build(force: bool = False, cxx: str = "g++", quiet: bool = False) -> Path:
    """Compile the library (unless one for these versions is there); returns its path."""
    folder = library_dir()
    lib = folder / LIBRARY
    if lib.is_file() and not force:
        return lib
    if shutil.which(cxx) is None:
        raise BackendError(f"the TVM-cuDNN build needs a C++17 compiler ({cxx} not found): install g++ "
                           f"(apt install g++), or name one with --cxx")
    found = inputs()
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{LIBRARY}.{os.getpid()}"
    cmd = compile_command(found, tmp, cxx)
    if not quiet:
        print(f"building {lib} from {found['sources']} ...", flush=True)
    t = time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        tmp.unlink(missing_ok=True)
        first = next((line for line in res.stderr.splitlines() if "error" in line), res.stderr.strip()[:300])
        raise BackendError(f"the TVM-cuDNN build failed ({first}); the full command: {' '.join(cmd)}")
    info = {**versions(), "cudnn": cudnn_version(found["cudnn_include"]), "built_s": round(time.perf_counter() - t, 1),
            "inputs": {k: str(v) for k, v in found.items()}}
    tmp.replace(lib)  # whole or not at all
    (folder / "build.json").write_text(json.dumps(info, indent=1))
    if not quiet:
        print(f"built {lib} in {info['built_s']} s (TVM {info['tvm']}, tvm-ffi {info['tvm_ffi']}, "
              f"cuDNN {info['cudnn']})", flush=True)
    return lib


_loaded: dict[str, Path] = {}


def load() -> Path:
    """Load the library built for this TVM (its functions register themselves); BackendError with
    the build command when there is none."""
    import tvm

    if tvm.get_global_func("tvm.contrib.cudnn.conv2d.forward", allow_missing=True) is not None:
        return _loaded.get("path", Path("(built into TVM)"))
    lib = library_dir() / LIBRARY
    if not lib.is_file():
        raise BackendError(f"TVM's cuDNN functions are not built for this TVM ({versions()['tvm']}): run `{COMMAND}` "
                           f"once (a few seconds; it needs the CUDA build of torch or a CUDA with cuDNN)")
    try:
        ctypes.CDLL(str(lib), mode=ctypes.RTLD_GLOBAL)
    except OSError as exc:
        raise BackendError(f"{lib} does not load ({exc}); rebuild it: `{COMMAND} --force`") from None
    _loaded["path"] = lib
    return lib


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog=COMMAND, description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--force", action="store_true", help="build again even if a library for this TVM is there")
    ap.add_argument("--cxx", default=os.environ.get("CXX", "g++"), help="C++17 compiler (default g++ or $CXX)")
    args = ap.parse_args(argv)
    try:
        lib = build(args.force, args.cxx)
        load()
    except BackendError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    import tvm

    names = [n for n in ("conv2d.forward", "conv2d+bias+act.forward", "conv.forward_find_algo")
             if tvm.get_global_func(f"tvm.contrib.cudnn.{n}", allow_missing=True) is not None]
    print(f"{lib}: loads, registers tvm.contrib.cudnn.{{{', '.join(names)}}}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
