"""The release guard: a small process that releases a client's places if the client dies.

labgrid keeps a place acquired until someone releases it, also when the client that holds it
was killed (``kill -9``, a crashed or killed pytest-xdist worker, a closed laptop lid). Before
a hilbench client reserves anything it starts ``python -m hilbench.farm.guard ADDRESS NAME``
in a session of its own, holding the write end of the guard's stdin. A clean release writes
``done`` and closes it; if the client dies instead, the kernel closes the pipe, the guard
reads end-of-file without ``done`` (or sees its parent change) and, through the coordinator,
releases every place acquired under the client's name and cancels its reservations. It never
touches anyone else's: the coordinator releases "from" that name only.
"""

from __future__ import annotations

import contextlib
import os
import select
import subprocess
import sys
import time

DONE = b"done\n"
RPC_TIMEOUT_S = 15.0
PARENT_CHECK_S = 1.0


def pid_alive(pid: int) -> bool:
    """Whether a process with this id exists on this host."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True


class Guard:
    """The client side: start the guard, then ``done()`` after a clean release."""

    def __init__(self, address: str, name: str) -> None:
        self.address = address
        self.name = name
        self.proc: subprocess.Popen[bytes] | None = subprocess.Popen(
            [sys.executable, "-m", "hilbench.farm.guard", address, name, str(os.getpid())],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # Ctrl-C reaches the client, which releases cleanly
            close_fds=True,
        )

    def done(self) -> None:
        """Everything was released: the guard exits without calling the coordinator."""
        proc, self.proc = self.proc, None
        if proc is None or proc.stdin is None:
            return
        with contextlib.suppress(OSError):
            proc.stdin.write(DONE)
            proc.stdin.close()
        try:
            proc.wait(5.0)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def abandon(self) -> None:
        """Close the pipe without ``done``: the guard releases what the name holds now."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(RPC_TIMEOUT_S)


def release_all(address: str, name: str) -> tuple[list[str], list[str]]:
    """Release every place acquired under ``name`` and cancel its reservations; return
    (places released, reservation tokens cancelled)."""
    import grpc
    from labgrid.remote.generated import labgrid_coordinator_pb2 as pb
    from labgrid.remote.generated import labgrid_coordinator_pb2_grpc as pb_grpc
    from labgrid.util.proxy import proxymanager

    target = proxymanager.get_grpc_address(address, default_port=20408)
    with grpc.insecure_channel(target) as channel:
        stub = pb_grpc.CoordinatorStub(channel)
        released, cancelled = [], []
        for res in stub.GetReservations(
            pb.GetReservationsRequest(), timeout=RPC_TIMEOUT_S
        ).reservations:
            if res.owner == name:
                with contextlib.suppress(grpc.RpcError):
                    stub.CancelReservation(
                        pb.CancelReservationRequest(token=res.token), timeout=RPC_TIMEOUT_S
                    )
                    cancelled.append(res.token)
        for place in stub.GetPlaces(pb.GetPlacesRequest(), timeout=RPC_TIMEOUT_S).places:
            if place.acquired == name:
                with contextlib.suppress(grpc.RpcError):
                    stub.ReleasePlace(
                        pb.ReleasePlaceRequest(placename=place.name, fromuser=name),
                        timeout=RPC_TIMEOUT_S,
                    )
                    released.append(place.name)
    return released, cancelled


def _wait_for_parent(parent: int) -> bool:
    """Block until the client says done (True) or is gone (False)."""
    received = b""
    fd = sys.stdin.fileno()
    while True:
        ready, _, _ = select.select([fd], [], [], PARENT_CHECK_S)
        if ready:
            chunk = os.read(fd, 64)
            if not chunk:
                return received.endswith(DONE)
            received += chunk
        elif os.getppid() != parent and not pid_alive(parent):
            return False


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 3 or not args[2].isdigit():
        print(
            "usage: python -m hilbench.farm.guard ADDRESS CLIENT_NAME PARENT_PID", file=sys.stderr
        )
        return 2
    address, name, parent = args[0], args[1], int(args[2])
    if _wait_for_parent(parent):
        return 0
    for attempt in range(3):  # the coordinator may be restarting
        try:
            release_all(address, name)
            return 0
        except Exception:
            time.sleep(1.0 + attempt)
    return 1


if __name__ == "__main__":
    sys.exit(main())
