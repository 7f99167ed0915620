"""User-facing errors: each names the cause and the fix, and is shown as one line."""

from __future__ import annotations


class HilbenchError(Exception):
    """An error caused by the user's input or setup; the CLI prints it as one line, exit 2."""

    def __init__(self, cause: str, fix: str | None = None) -> None:
        self.cause = cause
        self.fix = fix
        super().__init__(f"{cause}. {fix}" if fix else cause)


class ConfigError(HilbenchError):
    """A malformed or out-of-range setting."""


class LinkError(HilbenchError):
    """The serial link could not be opened, or nothing answered on it."""


class DeviceError(HilbenchError):
    """The device answered with an ERROR frame, or broke the protocol."""


class TraceError(HilbenchError):
    """A trace file is missing, foreign, truncated or of a newer format."""


class ModelError(HilbenchError):
    """A model the NPU emulator cannot take (unsupported op, broken quantization, bad file)."""


def npy_load_reason(exc: BaseException) -> str:
    """Why ``numpy.load(path, allow_pickle=False)`` refused a file, in a user's words: an array
    of Python objects is said to be one (numpy's own text advises unpickling, which is not the
    fix: the file should hold numbers)."""
    text = str(exc)
    if "allow_pickle" in text or "Object arrays" in text:
        return "it holds an array of Python objects (dtype object), not of numbers"
    return text or type(exc).__name__
