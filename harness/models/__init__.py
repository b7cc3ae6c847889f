"""Models as users bring them: a source (ios_core's zoo, timm, torchvision, an ONNX file, a user's nn.Module
factory) resolved once in the parent, and in the measuring child a :class:`Model` whose native forms (the
nn.Module, the ONNX model, ios_core's IR) are made on first use and kept for the run. Each backend takes the
form it is made for (``Backend.forms``); the float64 reference comes from the source."""

from .errors import FormError
from .model import FORMS, Model
from .source import MODEL_KEYS, SOURCES, ModelSource, model_label, resolve
from .zoos import MissingZoo

__all__ = ["FORMS", "MODEL_KEYS", "SOURCES", "FormError", "MissingZoo", "Model", "ModelSource", "model_label",
           "resolve"]
