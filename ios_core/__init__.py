"""IOS as a library: graph IR, model zoo, interpreters (reference, torch, ONNX).

Usable without the harness; depends on numpy, torch and onnx only.
"""

from .errors import UserError
from .ir import Graph, GraphBuilder, GraphError

__version__ = "0.1.0"
__all__ = ["Graph", "GraphBuilder", "GraphError", "UserError", "__version__"]
