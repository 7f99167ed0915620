"""``hilbench emulate --listen HOST:PORT``: serve the device twin over TCP."""

from __future__ import annotations

import argparse
import contextlib
import time

from hilbench.errors import HilbenchError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "emulate",
        help="serve the device twin over TCP, like a board on a port",
        description="Serve the bit-exact device twin on a TCP port, one host connection at a "
        "time; the device keeps its state (model, data, weights) across connections, as a "
        "board does. `hilbench run --board socket://HOST:PORT` and `pytest "
        "--board=socket://HOST:PORT` drive it. Each connection is logged when it opens and "
        "when it closes.",
    )
    p.add_argument(
        "--listen",
        required=True,
        metavar="HOST:PORT",
        help="the address to listen on, e.g. 127.0.0.1:5555 (port 0 picks a free one)",
    )
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from hilbench.backend.emulate import single_threaded_blas
    from hilbench.device import BANNER_REASONS, DeviceTwin, serve_tcp

    host, sep, port = args.listen.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise HilbenchError(
            f"--listen '{args.listen}' is not HOST:PORT", "write e.g. --listen 127.0.0.1:5555"
        )

    def say(line: str) -> None:
        with contextlib.suppress(OSError, ValueError):  # a closed terminal: keep serving
            print(f"hilbench emulate: {time.strftime('%H:%M:%S')} {line}", flush=True)

    def announce(h: str, p: int) -> None:
        with contextlib.suppress(OSError, ValueError):
            print(f"hilbench emulate: listening on socket://{h}:{p}", flush=True)

    single_threaded_blas()
    try:
        serve_tcp(
            host or "127.0.0.1",
            int(port),
            DeviceTwin(**BANNER_REASONS),
            on_listening=announce,
            log=say,
        )
    except OSError as exc:
        raise HilbenchError(
            f"cannot listen on {args.listen}: {exc.strerror or exc}",
            "choose a free port, or 0 to let the system pick one",
        ) from None
    except KeyboardInterrupt:
        pass
    return 0
