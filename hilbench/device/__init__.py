"""The device twin: what a device does with each command, served over a byte stream.

Its modules are named after the firmware units they mirror (device_fw/core/<unit>.c):
:mod:`~hilbench.device.device` (device.c and commands.c: processing order and commands),
:mod:`~hilbench.device.model` (model.c: the ZO state and its math),
:mod:`~hilbench.device.store` (store.c: the arena's books),
:mod:`~hilbench.device.blob` (blob.c: the model-blob parser),
:mod:`~hilbench.device.plan` (plan.c: the activation plan),
:mod:`~hilbench.device.device_log` (log.c: the device log ring) and
:mod:`~hilbench.device.serve` (port/cortex_m/serve.c: bytes to the device and back, over a
pty or TCP). Other packages import from here.
"""

from hilbench.device.blob import BlobError
from hilbench.device.device import BANNER_REASONS, DeviceTwin
from hilbench.device.model import DataSlot, ModelState
from hilbench.device.serve import FrameEndpoint, ThreadedServer, serve_stream, serve_tcp
from hilbench.device.store import DEFAULT_ARENA_BYTES, Arena, ArenaFull, pad16

__all__ = [
    "BANNER_REASONS",
    "DEFAULT_ARENA_BYTES",
    "Arena",
    "ArenaFull",
    "BlobError",
    "DataSlot",
    "DeviceTwin",
    "FrameEndpoint",
    "ModelState",
    "ThreadedServer",
    "pad16",
    "serve_stream",
    "serve_tcp",
]
