"""Events from the client and the backends, delivered to whoever subscribed.

The model is labgrid's steps: the client and a backend announce what happens (a command's
round trip, a retry or a reset, a chunk of an upload, a board's timed step), and any number
of subscribers (the trace, the live view, the board's log, a failing test's report) hear it.
Nothing is set on the client: a subscriber subscribes, and is gone when it unsubscribes.

A :class:`Channel` is one kind of event; emitting on a channel nobody listens to costs one
test of an empty tuple (a command's timing is emitted on every round trip).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Generic, NamedTuple, TypeVar

T = TypeVar("T")


class Incident(NamedTuple):
    """Something that happened on the link: ``kind`` (retry, resync, reset, injected,
    recovered, ...) and what, in one line."""

    kind: str
    detail: str


class Transfer(NamedTuple):
    """Progress of an upload or a firmware load: ``done`` of ``total`` bytes acknowledged
    (0 before the first chunk, then after each chunk's answer)."""

    done: int
    total: int


class DeviceLine(NamedTuple):
    """A line the device said on its own (a LOG frame, docs/protocol.md "Device log"):
    ``kind`` (boot, fault, uart, note, or ``kind N``), its text, the lines the device's ring
    dropped before it, and when the host received it (s since the Unix epoch)."""

    kind: str
    text: str
    dropped: int
    time: float

    def __str__(self) -> str:
        lost = f" ({self.dropped} earlier lines lost)" if self.dropped else ""
        return f"[{self.kind}] {self.text}{lost}"


class Step(NamedTuple):
    """One timed step of a backend's way to a device (find the board, a hook, halt, write,
    reset, HELLO, ...): its name, its duration and how it ended ("" when it went well)."""

    name: str
    seconds: float
    outcome: str = ""


class Channel(Generic[T]):
    """The subscribers of one kind of event, called in the order they subscribed."""

    __slots__ = ("subscribers",)

    def __init__(self) -> None:
        #: read it, never assign it (``subscribe`` does): a hot path tests it for emptiness
        #: as a plain attribute, cheaper than ``bool(channel)``
        self.subscribers: tuple[Callable[[T], None], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.subscribers)

    def subscribe(self, subscriber: Callable[[T], None]) -> Callable[[T], None]:
        """Add ``subscriber`` (it hears every event from now on); returns it."""
        self.subscribers = (*self.subscribers, subscriber)
        return subscriber

    def unsubscribe(self, subscriber: Callable[[T], None]) -> None:
        """Remove ``subscriber`` (its first subscription if it subscribed twice); no error if
        it is not subscribed (a cleanup path may run twice)."""
        subscribers = list(self.subscribers)
        if subscriber in subscribers:
            subscribers.remove(subscriber)
            self.subscribers = tuple(subscribers)

    @contextmanager
    def subscribed(self, subscriber: Callable[[T], None]) -> Iterator[Callable[[T], None]]:
        """``subscriber`` hears the events of the ``with`` block, however it ends."""
        self.subscribe(subscriber)
        try:
            yield subscriber
        finally:
            self.unsubscribe(subscriber)

    def emit(self, event: T) -> None:
        for subscriber in self.subscribers:
            subscriber(event)


class ClientEvents:
    """What a client announces: ``command`` (a CommandTiming after each round trip),
    ``incident`` (an :class:`Incident`: retry, resync, reset, injected fault, recovery) and
    ``upload`` (a :class:`Transfer` per chunk of a model or data blob) and ``device`` (a
    :class:`DeviceLine`: what the firmware said on its own, in LOG frames)."""

    __slots__ = ("command", "device", "incident", "upload")

    def __init__(self) -> None:
        self.command: Channel = Channel()  # of hilbench.client.device_client.CommandTiming
        self.incident: Channel[Incident] = Channel()
        self.upload: Channel[Transfer] = Channel()
        self.device: Channel[DeviceLine] = Channel()


class BackendEvents:
    """What a backend announces while it opens: ``step`` (a :class:`Step`: a board's find,
    hook, halt, write, reset, HELLO, ...) and ``load`` (a :class:`Transfer` per chunk of a
    firmware load)."""

    __slots__ = ("load", "step")

    def __init__(self) -> None:
        self.step: Channel[Step] = Channel()
        self.load: Channel[Transfer] = Channel()
