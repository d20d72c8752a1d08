"""Requests per sliding minute, per key: a user id, or a client address for bad tokens.

Threat: a client guessing tokens, or a token holder flooding the bridge. Users
are counted by their id; requests without a valid token by the client's
address, so guessing is as slow as using.
"""

from __future__ import annotations

import threading
import time
from collections import deque

# The window the limit counts over.
WINDOW_SECONDS = 60.0
# Keys remembered before idle ones are forgotten: addresses must not grow memory forever.
MAX_KEYS = 10_000


class RateLimiter:
    """At most ``per_minute`` requests in any sliding minute per key (0: no limit)."""

    def __init__(self, per_minute: int) -> None:
        self.per_minute = per_minute
        self._seen: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def allow(self, key: str) -> bool:
        """Count a request for ``key``; whether it is within the limit."""
        if self.per_minute <= 0:
            return True
        now = time.monotonic()
        with self._lock:
            seen = self._seen.get(key)
            if seen is None:
                if len(self._seen) >= MAX_KEYS:
                    self._forget_idle(now)
                seen = self._seen[key] = deque()
            while seen and now - seen[0] > WINDOW_SECONDS:
                seen.popleft()
            if len(seen) >= self.per_minute:
                return False
            seen.append(now)
            return True

    def _forget_idle(self, now: float) -> None:
        for key in [k for k, s in self._seen.items() if not s or now - s[-1] > WINDOW_SECONDS]:
            del self._seen[key]
