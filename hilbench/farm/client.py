"""A labgrid coordinator client for hilbench: reserve, wait, acquire, release, who holds what.

It rides on labgrid's own ``ClientSession`` (its gRPC stream keeps the coordinator's view of
places and resources current) in an event loop of its own, so several clients may live in
one process (threads, benchmarks). Every client registers under a name of its own,
``HOST/USER-hbPID[-N]`` (waiting.client_name), which is what ``labgrid-client who`` shows and
what lets a guard process release exactly this client's places if the process dies.

Waiting goes through labgrid's reservations (the queue ``labgrid-client reserve --wait``
uses): the coordinator allocates a matching free place to the oldest waiting reservation as
soon as one is released, so clients waiting for the same boards are served in order.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import grpc
from labgrid.remote.client import ClientSession
from labgrid.remote.client import Error as LabgridClientError
from labgrid.remote.common import Place, Reservation, ReservationState
from labgrid.remote.generated import labgrid_coordinator_pb2 as pb
from labgrid.remote.generated.labgrid_coordinator_pb2_grpc import CoordinatorStub
from labgrid.util.proxy import proxymanager

from hilbench.errors import LinkError
from hilbench.farm import guard as guard_mod
from hilbench.farm.spec import ENV_COORDINATOR, Selector, coordinator_address
from hilbench.farm.waiting import Countdown, Status, client_name, parse_client_name, since

CONNECT_TIMEOUT_S = 10.0
RPC_TIMEOUT_S = 30.0
POLL_S = 0.2  # how often a waiting client asks about its reservation
CHANNEL_OPTIONS = [  # labgrid's ClientSession's keepalive settings
    ("grpc.keepalive_time_ms", 7500),
    ("grpc.keepalive_timeout_ms", 10000),
    ("grpc.http2.ping_timeout_ms", 10000),
    ("grpc.http2.max_pings_without_data", 0),
]
_local = threading.local()


def _thread_loop() -> asyncio.AbstractEventLoop:
    """One event loop per thread for all its clients, never closed: grpc.aio dispatches
    late completions to the loop a channel used, and a closed one makes it log errors."""
    loop = getattr(_local, "loop", None)
    if loop is None:
        loop = _local.loop = asyncio.new_event_loop()
    return loop


@dataclass(frozen=True)
class PlaceResource:
    """One resource of an acquired place, as its exporter published it."""

    exporter: str
    group: str
    cls: str
    name: str
    params: dict[str, Any] = field(default_factory=dict)  # without labgrid's 'extra'
    extra: dict[str, Any] = field(default_factory=dict)


class _Session(ClientSession):
    """labgrid's ClientSession under a name we choose (it reads LG_HOSTNAME/LG_USERNAME)."""

    def gethostname(self) -> str:
        return self.hb_name.split("/", 1)[0]

    def getuser(self) -> str:
        return self.hb_name.split("/", 1)[1]


class FarmClient:
    """A connection to a labgrid coordinator (``address``: HOST[:PORT], default
    $LG_COORDINATOR); use as a context manager or call ``close()``."""

    def __init__(self, address: str | None = None, *, name: str | None = None) -> None:
        self.address = address or coordinator_address()
        self.name = name or client_name()
        self.closed = False
        self.loop = _thread_loop()
        grpc_address = proxymanager.get_grpc_address(self.address, default_port=20408)

        async def make() -> _Session:  # grpc.aio binds a channel to the loop running it
            made = _Session(grpc_address, self.loop)
            made.hb_name = self.name
            # a channel of its own: grpc shares one connection among a process's equal
            # channels, and the coordinator takes each connection for one client
            await made.channel.close()
            made.channel = grpc.aio.insecure_channel(
                grpc_address, options=[*CHANNEL_OPTIONS, ("grpc.use_local_subchannel_pool", 1)]
            )
            made.stub = CoordinatorStub(made.channel)
            return made

        self.session = session = self._run(make())
        try:
            self._run(asyncio.wait_for(session.start(), CONNECT_TIMEOUT_S))
        except (LabgridClientError, TimeoutError, grpc.RpcError, OSError) as exc:
            self._shutdown()
            raise LinkError(
                f"no labgrid coordinator answers at {self.address} ({exc or type(exc).__name__})",
                f"start labgrid-coordinator there, or set {ENV_COORDINATOR}=HOST:PORT to "
                "the coordinator's address",
            ) from None

    # ---------------------------------------------------------------- plumbing

    def _run(self, awaitable: Any) -> Any:
        return self.loop.run_until_complete(awaitable)

    def _call(self, method: str, request: Any) -> Any:
        """One unary call to the coordinator; LinkError with its reason on failure."""
        stub = getattr(self.session.stub, method)
        try:
            return self._run(stub(request, timeout=RPC_TIMEOUT_S))
        except grpc.aio.AioRpcError as exc:
            raise _CoordinatorRefused(exc.code(), exc.details() or str(exc.code())) from None

    def sync(self) -> None:
        """Wait until the coordinator's updates sent so far have arrived."""
        self._run(self.session.sync_with_coordinator())

    def _shutdown(self) -> None:
        root = logging.getLogger()
        root.addFilter(_quiet_stop)  # labgrid logs the stream it cancels as an error
        try:
            with contextlib.suppress(Exception):
                if self.session.pump_task is not None:
                    self._run(self.session.stop())
        finally:
            root.removeFilter(_quiet_stop)
        with contextlib.suppress(Exception):
            self._run(self.session.close())
        self.closed = True

    def close(self) -> None:
        if not self.closed:
            self._shutdown()

    def __enter__(self) -> FarmClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------- what the farm holds

    @property
    def places(self) -> dict[str, Place]:
        return self.session.places

    def place(self, name: str) -> Place:
        self.sync()
        try:
            return self.places[name]
        except KeyError:
            raise LinkError(
                f"the labgrid coordinator at {self.address} has no place {name!r} "
                f"(it has {_names(self.places)})",
                "pick one of those, or create it (labgrid-client -p NAME create; docs/farm.md)",
            ) from None

    def candidates(self, selector: Selector) -> list[Place]:
        """The places ``selector`` may get, by name; a LinkError if there are none."""
        self.sync()
        found = [p for n, p in sorted(self.places.items()) if selector.matches(n, p.tags)]
        if not found:
            if selector.name:
                self.place(selector.name)  # raises, listing the places
            tagged = "; ".join(
                f"{n}: " + (",".join(f"{k}={v}" for k, v in sorted(p.tags.items())) or "no tags")
                for n, p in sorted(self.places.items())
            )
            raise LinkError(
                f"no labgrid place at {self.address} has tags "
                + ", ".join(f"{k}={v}" for k, v in selector.tags.items())
                + f" (places: {tagged or 'none'})",
                "pick tags a place has, or tag one (labgrid-client -p NAME set-tags KEY=VALUE)",
            )
        return found

    def resources(self, place: Place) -> list[PlaceResource]:
        """The resources ``place`` acquired, with their exporter's current parameters."""
        self.sync()
        out = []
        for exporter, group, cls, name in self.places[place.name].acquired_resources:
            try:
                entry = self.session.resources[exporter][group][name]
            except KeyError:
                raise LinkError(
                    f"place {place.name}'s resource {exporter}/{group}/{cls}/{name} is gone "
                    "(its exporter disconnected?)",
                    f"restart labgrid-exporter on {exporter}, or pick another place",
                ) from None
            out.append(PlaceResource(exporter, group, cls, name, entry.args, entry.extra))
        return out

    def holders(self, places: list[Place]) -> str:
        """'P held by USER on HOST (since ...)' for each held place, '; '-joined."""
        self.sync()
        parts = []
        for p in places:
            current = self.places.get(p.name, p)
            if current.acquired:
                host, user, _ = parse_client_name(current.acquired)
                parts.append(f"{p.name} held by {user} on {host} ({since(current.changed)})")
            elif current.reservation:
                parts.append(f"{p.name} reserved for another client ({current.reservation})")
        return "; ".join(parts)

    # ---------------------------------------------------------------- reserve, acquire, release

    def reserve(self, selector: Selector) -> str:
        """A reservation token for ``selector`` (waiting in the coordinator's queue)."""
        request = pb.CreateReservationRequest(
            filters={"main": pb.Reservation.Filter(filter=selector.filters)}, prio=0.0
        )
        return self._call("CreateReservation", request).reservation.token

    def poll(self, token: str) -> Reservation:
        response = self._call("PollReservation", pb.PollReservationRequest(token=token))
        return Reservation.from_pb2(response.reservation)

    def cancel(self, token: str) -> None:
        with contextlib.suppress(_CoordinatorRefused):  # already gone (expired, cancelled)
            self._call("CancelReservation", pb.CancelReservationRequest(token=token))

    def acquire(self, name: str) -> None:
        self._call("AcquirePlace", pb.AcquirePlaceRequest(placename=name))
        self.sync()

    def release(self, name: str) -> None:
        """Release ``name`` if this client holds it (never anyone else's)."""
        with contextlib.suppress(_CoordinatorRefused):
            self._call("ReleasePlace", pb.ReleasePlaceRequest(placename=name, fromuser=self.name))

    def release_stale(self) -> list[str]:
        """Release the places held by hilbench clients of this host whose process is gone
        (their guard died with them, or they ran without one); return their names."""
        self.sync()
        me = self.name.split("/", 1)[0]
        freed = []
        for name, place in sorted(self.places.items()):
            if not place.acquired:
                continue
            host, _, pid = parse_client_name(place.acquired)
            if host == me and pid is not None and not guard_mod.pid_alive(pid):
                with contextlib.suppress(_CoordinatorRefused):
                    request = pb.ReleasePlaceRequest(placename=name, fromuser=place.acquired)
                    self._call("ReleasePlace", request)
                    freed.append(name)
        return freed

    def wait_and_acquire(
        self,
        selector: Selector,
        timeout: float,
        status: Status | None = None,
        *,
        on_token: Callable[[str], None] | None = None,
    ) -> tuple[Place, str]:
        """Reserve, wait up to ``timeout`` s (showing who holds the boards, with a countdown)
        and acquire; return (place, reservation token). A LinkError names the holders when
        the time is up."""
        candidates = self.candidates(selector)
        self.release_stale()
        show = status or Countdown()
        token = self.reserve(selector)
        if on_token is not None:
            on_token(token)
        deadline = time.monotonic() + timeout
        waited = False
        try:
            while True:
                res = self.poll(token)
                if res.state is ReservationState.allocated and res.allocations.get("main"):
                    name = res.allocations["main"][0]
                    try:
                        self.acquire(name)
                    except _CoordinatorRefused:  # taken in between: keep waiting
                        pass
                    else:
                        if waited:
                            show(f"got {name} after waiting")
                        return self.places[name], token
                elif res.state in (ReservationState.expired, ReservationState.invalid):
                    self.cancel(token)
                    token = self.reserve(selector)
                    if on_token is not None:
                        on_token(token)
                left = deadline - time.monotonic()
                if left <= 0:
                    who = self.holders(candidates) or "none is free"
                    raise LinkError(
                        f"waited {timeout:.0f} s for labgrid place {selector.describe()}: {who}",
                        "ask them to release it (labgrid-client -p PLACE release), wait longer "
                        "(HILBENCH_FARM_WAIT=SECONDS), or pick another place",
                    )
                show(
                    f"waiting for labgrid place {selector.describe()}: "
                    f"{self.holders(candidates) or 'allocating'}; {left:.0f} s left"
                )
                waited = True
                time.sleep(min(POLL_S, max(left, 0.01)))
        except BaseException:
            self.cancel(token)
            raise
        finally:
            if isinstance(show, Countdown):
                show.clear()


class _CoordinatorRefused(LinkError):
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        self.code = code
        super().__init__(f"the labgrid coordinator refused: {details}")


def _quiet_stop(record: logging.LogRecord) -> bool:
    """Drop labgrid's report of the stream this client ends itself."""
    return "coordinator message pump" not in str(record.msg)


def _names(places: dict[str, Place]) -> str:
    return ", ".join(sorted(places)) or "no places"
