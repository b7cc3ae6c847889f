"""`python -m ios_core`: build, print, run and export zoo models from the shell.

    python -m ios_core show inception_v3
    python -m ios_core run nasnet --batch 1 --param image_size=96
    python -m ios_core export squeezenet squeezenet.onnx
"""

from __future__ import annotations

import argparse
import sys
import time

from .inputs import seeded_input
from .interpreters import reference_forward
from .ir import GraphError
from .models import MODELS, build_model


def _params(pairs: list[str]) -> dict:
    out: dict[str, int | str] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep:
            raise GraphError(f"--param expects key=value, got {pair!r}")
        try:
            out[key] = int(raw)
        except ValueError:
            out[key] = raw
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ios_core", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["show", "run", "export", "list"])
    ap.add_argument("model", nargs="?", help=f"one of: {', '.join(MODELS)}")
    ap.add_argument("output", nargs="?", help="export: the .onnx file to write")
    ap.add_argument("--param", action="append", default=[], help="model parameter key=value (repeatable)")
    ap.add_argument("--batch", type=int, default=1)
    args = ap.parse_args(argv)
    try:
        if args.command == "list":
            print("\n".join(MODELS))
            return 0
        if not args.model:
            raise GraphError(f"name a model: {', '.join(MODELS)}")
        graph = build_model(args.model, **_params(args.param))
        if args.command == "show":
            print(graph)
        elif args.command == "run":
            x = seeded_input(graph, args.batch)
            t0 = time.perf_counter()
            y = reference_forward(graph, x)
            print(f"{graph.summary()}\nreference (float64, CPU): output {tuple(y.shape)} in "
                  f"{time.perf_counter() - t0:.2f} s, mean {y.mean():.6g}")
        else:
            from .onnx import export_onnx
            path = args.output or f"{graph.name}.onnx"
            export_onnx(graph, path)
            print(f"wrote {path}")
    except (GraphError, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
