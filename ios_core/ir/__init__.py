"""The graph IR: Graph -> Blocks -> Nodes with IOS's term/value input semantics."""

from .builder import GraphBuilder
from .graph import Block, Graph, format_node
from .nodes import (
                    ACTIVATIONS,
                    NODE_KINDS,
                    POOL_TYPES,
                    Activation,
                    Conv,
                    Element,
                    Flatten,
                    GraphError,
                    Identity,
                    Linear,
                    Node,
                    Op,
                    Placeholder,
                    Pool,
                    Sequential,
                    Shape,
                    Term,
                    Value,
                    term_shape,
)

__all__ = ["ACTIVATIONS", "NODE_KINDS", "POOL_TYPES", "Activation", "Block", "Conv", "Element", "Flatten",
           "Graph", "GraphBuilder", "GraphError", "Identity", "Linear", "Node", "Op", "Placeholder", "Pool",
           "Sequential", "Shape", "Term", "Value", "format_node", "term_shape"]
