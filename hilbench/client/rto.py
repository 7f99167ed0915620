"""Retransmission timeouts that follow each request's work (docs/protocol.md, "Retries").

A request's round trip is the link's (bytes out and back) plus the device's computation, and
the device's part grows with the request's *work*: forward passes times the model's MACs for
PROBE / EVAL / INFER, trained elements times q for the APPLY family, bytes for uploads.
:class:`WorkTimer` keeps, per kind of request, a Jacobson/Karels estimator for each size of
work it has measured (:class:`RtoEstimator`: smoothed RTT + 4 x its variation, at least 1.5 x
the recent peak round trip, sampled only from round trips that needed no retransmission:
Karn's rule). A request of ``w`` units is
then bounded by every measured size ``x`` with estimate ``r``: by ``r`` if ``w <= x``, by
``EXTRAPOLATION_MARGIN * r * w / x`` if it is larger. A round trip is ``a + b * w`` with
``a, b >= 0`` (link and fixed device cost, then per-unit cost), so ``r * w / x`` never
underestimates a larger request and ``r`` never a smaller one; the timeout is the smallest
bound. A kind never measured waits the default timeout; an answer that needed retries is
not sampled, but the time from the first try to it becomes that size's estimate until a
clean round trip replaces it (so a command longer than the default is retried once, not on
every call). Each retry of the same request doubles its wait.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

EXTRAPOLATION_MARGIN = 2.0  # for a request larger than every measured one of its kind
RETRIED_MARGIN = 2.0  # the estimate kept from an answer that needed retries: elapsed x this
BACKOFF_CAP = 4.0  # retries of one request wait at most max(default, 4 x its first wait)
MAX_SIZES = 16  # measured sizes kept per kind (least recently sampled dropped first)
PEAK_DECAY = 0.995  # per sample: a slow round trip keeps raising the timeout for ~200 samples
#: On a link whose answers arrive on their own time (a pty, TCP, a UART), the peak halves every
#: this many seconds instead: a loaded host's stalls come every few seconds, however many
#: round trips a second the run makes (per-sample decay forgot them within 0.2 s at 1,000 round
#: trips a second, and the next stall caused a retry on a clean link).
PEAK_HALF_LIFE_S = 30.0
PEAK_MARGIN = 1.5  # the timeout is at least this times the recent peak round trip


@dataclass
class RtoEstimator:
    """Smoothed RTT and its variation; ``timeout()`` is how long to wait before a retry: the
    Jacobson/Karels estimate (srtt + 4 x rttvar), but at least PEAK_MARGIN x the largest recent
    round trip (scheduling delays on a loaded host are rare and long: the mean and deviation
    alone put the timeout below them)."""

    initial_s: float = 1.0
    min_s: float = 0.01
    max_s: float = 5.0
    srtt: float | None = None
    rttvar: float = 0.0
    peak: float = 0.0  # the largest recent round trip, decaying (see half_life_s)
    #: None: the peak decays by PEAK_DECAY per sample (a synchronous link, where only a lost
    #: frame is ever waited for); else it halves every ``half_life_s`` seconds
    half_life_s: float | None = None
    _first: float | None = field(default=None, init=False, repr=False, compare=False)
    _peak_at: float | None = field(default=None, init=False, repr=False, compare=False)

    def sample(self, rtt_s: float, now: float | None = None) -> None:
        if self.half_life_s is None:
            peak = self.peak * PEAK_DECAY
            self.peak = peak if peak > rtt_s else rtt_s  # max(rtt_s, peak), without the call
        else:
            now = time.monotonic() if now is None else now
            if self._peak_at is not None:
                self.peak *= 0.5 ** (max(0.0, now - self._peak_at) / self.half_life_s)
            self._peak_at = now
            self.peak = max(rtt_s, self.peak)
        if self.srtt is None:
            self.srtt, self.rttvar = rtt_s, rtt_s / 2
        else:
            self.rttvar = 0.75 * self.rttvar + 0.25 * abs(self.srtt - rtt_s)
            self.srtt = 0.875 * self.srtt + 0.125 * rtt_s
        self._first = None

    def timeout(self, attempt: int = 0) -> float:
        if attempt == 0 and self._first is not None:  # asked once per round trip: cached
            return self._first
        if self.srtt is None:
            base = self.initial_s
        else:  # Jacobson/Karels, and above the recent peak: a loaded host's delays are
            base = max(self.srtt + 4 * self.rttvar, PEAK_MARGIN * self.peak)  # heavy-tailed
        wait = min(self.max_s, max(self.min_s, base) * (2**attempt))
        if attempt == 0:
            self._first = wait
        return wait


Part = tuple[str, int]  # (kind of work, units of work)


class WorkTimer:
    """Per-request first-try timeouts from measured round trips, scaled by work."""

    def __init__(
        self,
        *,
        default_s: float = 5.0,
        min_s: float = 0.01,
        peak_half_life_s: float | None = PEAK_HALF_LIFE_S,
    ) -> None:
        if not default_s > 0 or not min_s > 0:
            raise ValueError(f"timeouts must be > 0, got default {default_s}, min {min_s}")
        self.default_s = default_s
        self.min_s = min_s
        self.peak_half_life_s = peak_half_life_s  # None: per-sample decay (RtoEstimator)
        self._sizes: dict[str, dict[int, RtoEstimator]] = {}
        self._cache: dict[str, dict[int, float]] = {}  # kind -> units -> bound, until a sample
        #: the part sampled last and its estimator (the last of its kind's sizes): a run
        #: samples the same part again and again, which needs no reordering
        self._last: tuple[Part, RtoEstimator] | None = None

    def measured(self, kind: str) -> dict[int, float]:
        """The measured sizes of ``kind`` and their current estimates (for reports, tests)."""
        return {x: e.timeout() for x, e in self._sizes.get(kind, {}).items()}

    def bound(self, kind: str, units: int) -> float | None:
        """The smallest bound on a round trip of ``units`` of ``kind``; None if unmeasured."""
        cache = self._cache.get(kind)
        if cache is None:
            cache = self._cache[kind] = {}
        else:
            cached = cache.get(units)
            if cached is not None:
                return cached
        sizes = self._sizes.get(kind)
        if not sizes:
            return None
        best = math.inf
        for x, est in sizes.items():
            r = est.timeout()
            if units > x:
                r *= EXTRAPOLATION_MARGIN * units / x
            if r < best:
                best = r
        cache[units] = best
        return best

    def first_wait(self, part: Part, alternative: tuple[Part, ...] = ()) -> float:
        """How long the first try of a request waits: its kind's bound, else the sum of the
        ``alternative`` parts' bounds if all are measured (APPLY_PROBE = APPLY_PROBED +
        PROBE), else the default."""
        b = self.bound(*part)
        if b is None and alternative:
            parts = [self.bound(*p) for p in alternative]
            if all(p is not None for p in parts):
                b = EXTRAPOLATION_MARGIN * sum(parts)  # type: ignore[arg-type]
        return self.default_s if b is None else max(self.min_s, b)

    def wait(self, first: float, attempt: int, cap_s: float | None = None) -> float:
        """The wait of try ``attempt`` (0 = first) when the first waits ``first``: doubled per
        retry, at most ``cap_s`` (default: max(default timeout, BACKOFF_CAP x first))."""
        cap = max(self.default_s, BACKOFF_CAP * first) if cap_s is None else cap_s
        return min(cap, first * 2**attempt)

    def sample(self, part: Part, rtt_s: float, *, retried: bool = False) -> None:
        """Record an answered round trip of ``part``. A clean one (``retried`` False) is an
        RTT sample; one that needed retries is not (Karn's rule), but when its size has no
        clean sample yet, ``RETRIED_MARGIN x`` the time since the first try becomes its
        estimate (an upper bound: the answer came no later than that)."""
        last = self._last
        if not retried and last is not None and last[0] == part:  # already last of its kind
            last[1].sample(rtt_s)
            self._cache.pop(part[0], None)
            return
        kind, units = part
        sizes = self._sizes.get(kind)
        if sizes is None:
            sizes = self._sizes[kind] = {}
        est = sizes.pop(units, None)
        if retried:
            if est is None or est.srtt is None:
                est = RtoEstimator(
                    initial_s=RETRIED_MARGIN * rtt_s,
                    min_s=self.min_s,
                    max_s=math.inf,
                    half_life_s=self.peak_half_life_s,
                )
            sizes[units] = est
        else:
            if est is None:
                est = RtoEstimator(
                    initial_s=self.default_s,
                    min_s=self.min_s,
                    max_s=math.inf,
                    half_life_s=self.peak_half_life_s,
                )
            est.sample(rtt_s)
            sizes[units] = est  # most recently sampled last
        while len(sizes) > MAX_SIZES:
            del sizes[next(iter(sizes))]
        self._cache.pop(kind, None)
        self._last = (part, est)
