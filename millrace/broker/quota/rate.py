"""``Rate``: a sum over a window of samples, divided by the window's length -- the measure
a client quota is checked against (Kafka's ``metrics.stats.Rate`` over a
``WindowedSum``, i.e. ``SampledStat``).

Theory.  Values are added to the *current* sample; a sample covers ``window_ms``
(``quota.window.size.seconds``) from its first value, after which the next value starts
a new one, re-using the oldest of ``samples + 1`` slots (the extra slot is the sample
that overlaps the monitored window's start).  A sample whose last value is
``samples * window_ms`` old or more no longer counts (it is reset).  The rate is the sum
of the samples over the elapsed time since the oldest one started -- but never less than
``samples - 1`` whole windows: a client's first burst is spread over ten seconds (with
Kafka's 11 x 1 s) rather than over the milliseconds it took, so a new client is not
throttled for a single large request.

Owned by the event-loop thread (no locking); time is passed in, never read.
"""

from __future__ import annotations


class _Sample:
    __slots__ = ("last_ms", "start_ms", "value")

    def __init__(self, now_ms: int) -> None:
        self.start_ms = now_ms
        self.last_ms = now_ms
        self.value = 0.0

    def reset(self, now_ms: int) -> None:
        self.start_ms = now_ms
        self.last_ms = now_ms
        self.value = 0.0


class Rate:
    """Units per second over the last ``samples`` windows of ``window_ms`` each."""

    __slots__ = ("_current", "_samples", "samples", "window_ms")

    def __init__(self, samples: int, window_ms: int) -> None:
        if samples < 1 or window_ms < 1:
            raise ValueError("a rate needs at least one sample of at least 1 ms")
        self.samples = samples
        self.window_ms = window_ms
        self._samples: list[_Sample] = []
        self._current = 0

    def record(self, value: float, now_ms: int) -> None:
        """Add ``value`` at ``now_ms`` (a negative value takes back one recorded before)."""
        sample = self._current_sample(now_ms)
        if now_ms - sample.start_ms >= self.window_ms:
            sample = self._advance(now_ms)
        sample.value += value
        sample.last_ms = now_ms

    def measure(self, now_ms: int) -> float:
        """The rate now, per second."""
        self._purge(now_ms)
        total = 0.0
        for s in self._samples:
            total += s.value
        return total * 1000.0 / self.window_size_ms(now_ms)

    def window_size_ms(self, now_ms: int) -> int:
        """The time the rate divides by: since the oldest sample began, at least
        ``samples - 1`` whole windows (module docstring), at least 1 ms."""
        self._purge(now_ms)
        if not self._samples:
            self._samples.append(_Sample(now_ms))
        elapsed = now_ms - min(s.start_ms for s in self._samples)
        full_windows = elapsed // self.window_ms
        if full_windows < self.samples - 1:
            elapsed += (self.samples - 1 - full_windows) * self.window_ms
        return max(elapsed, 1)

    def _current_sample(self, now_ms: int) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now_ms))
        return self._samples[self._current]

    def _advance(self, now_ms: int) -> _Sample:
        self._current = (self._current + 1) % (self.samples + 1)
        if self._current >= len(self._samples):
            sample = _Sample(now_ms)
            self._samples.append(sample)
            return sample
        sample = self._samples[self._current]
        sample.reset(now_ms)
        return sample

    def _purge(self, now_ms: int) -> None:
        """Reset the samples with no value inside the monitored window."""
        expire = self.samples * self.window_ms
        for s in self._samples:
            if now_ms - s.last_ms >= expire:
                s.reset(now_ms)
