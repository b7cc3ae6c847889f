"""The error of a form a model cannot take (a module torch.onnx cannot export, an ONNX model the IR cannot
import): one line that names the form and why, so the job fails saying it while a sweep's other backends run."""

from ios_core.errors import UserError


class FormError(UserError, RuntimeError):
    """A model cannot be given in the form a backend takes; the message says why."""
