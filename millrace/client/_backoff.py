"""Exponential backoff with jitter (Java ``ExponentialBackoff``).

``backoff(attempts)`` is ``initial * multiplier ** attempts``, capped at ``maximum``, then
spread by +/- ``jitter`` (a fraction) so that many clients do not retry in lock-step.
With ``initial == maximum`` it is a constant backoff, as Kafka configures it when the
``*.max.ms`` setting is not above the base.
"""

from __future__ import annotations

import math
import random


class ExponentialBackoff:
    __slots__ = ("_exp_max", "_initial", "_jitter", "_maximum", "_multiplier", "_random")

    def __init__(self, initial_ms: int, multiplier: float, maximum_ms: int, jitter: float,
                 rng: random.Random | None = None) -> None:
        self._initial = initial_ms
        self._multiplier = multiplier
        self._maximum = maximum_ms
        self._jitter = jitter
        self._random = rng or random.Random()
        if maximum_ms > initial_ms and initial_ms > 0:
            self._exp_max = math.log(maximum_ms / initial_ms) / math.log(multiplier)
        else:
            self._exp_max = 0.0

    def backoff(self, attempts: int) -> int:
        if self._exp_max == 0.0:
            return self._initial
        exp = min(attempts, self._exp_max)
        term = self._initial * self._multiplier ** exp
        if self._jitter:
            term *= self._random.uniform(1 - self._jitter, 1 + self._jitter)
        return int(min(term, self._maximum))
