"""Retransmission timeouts from measured round trips (Jacobson/Karels, with Karn's rule).

One estimator per command type, since a 4 KB upload chunk and a PROBE take very different
times. Only round trips that needed no retransmission are sampled (Karn), and each retry of the
same request doubles its wait (exponential backoff), up to ``max_s``.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class RtoEstimator:
    """Smoothed RTT and its variation; ``timeout()`` is how long to wait before a retry."""

    initial_s: float = 1.0
    min_s: float = 0.01
    max_s: float = 5.0
    srtt: float | None = None
    rttvar: float = 0.0
    _first: float | None = field(default=None, init=False, repr=False, compare=False)

    def sample(self, rtt_s: float) -> None:
        if self.srtt is None:
            self.srtt, self.rttvar = rtt_s, rtt_s / 2
        else:
            self.rttvar = 0.75 * self.rttvar + 0.25 * abs(self.srtt - rtt_s)
            self.srtt = 0.875 * self.srtt + 0.125 * rtt_s
        self._first = None

    def timeout(self, attempt: int = 0) -> float:
        if attempt == 0 and self._first is not None:  # asked once per round trip: cached
            return self._first
        base = self.initial_s if self.srtt is None else self.srtt + 4 * self.rttvar
        wait = min(self.max_s, max(self.min_s, base) * (2**attempt))
        if attempt == 0:
            self._first = wait
        return wait
