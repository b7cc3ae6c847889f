"""IOS from a torch program: the FX graph torch.compile hands a backend, as ios_core's IR, without ONNX.

:mod:`.aten` traces Dynamo's graph down to ATen operators (functional, inference decompositions) and says which
inputs are the module's weights; :mod:`.convert` maps each ATen node to the IR (``@converter(aten.relu)``: one
function per operator family, the way the ONNX importer's converters are keyed by op type); :mod:`.split`
cuts a graph into what IOS takes and what falls back; :mod:`ios_core.dynamo` is the ``ios`` backend of
``torch.compile`` built on them.
"""

from . import ops  # noqa: F401 - registers the converters
from .aten import AtenGraph, to_aten
from .convert import FxImportError, Refused, supported, to_ir

__all__ = ["AtenGraph", "FxImportError", "Refused", "supported", "to_aten", "to_ir"]
