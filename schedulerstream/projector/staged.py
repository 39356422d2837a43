"""Store writes held back until the read model has the record's changes.

The projector writes SQL first and its state store only once that succeeded, so a record
whose SQL write fails leaves no trace in the store (it is processed again, never skipped).
"""

from __future__ import annotations

from collections.abc import Iterator

from schedulerstream.runtime.store import StateStore, prefix_end


class Staged:
    """A read-your-writes view over ``store`` whose writes wait for ``apply``."""

    def __init__(self, store: StateStore) -> None:
        self.store = store
        self.writes: dict[bytes, tuple[bytes | None, bool]] = {}

    def get(self, key: bytes) -> bytes | None:
        if key in self.writes:
            return self.writes[key][0]
        return self.store.get(key)

    def put(self, key: bytes, value: bytes, *, logged: bool = True) -> None:
        self.writes[key] = (value, logged)

    def delete(self, key: bytes, *, logged: bool = True) -> None:
        self.writes[key] = (None, logged)

    def prefix(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        """The pairs under ``prefix`` in key order, staged writes included."""
        end = prefix_end(prefix)
        merged = dict(self.store.prefix(prefix))
        for key, (value, _) in self.writes.items():
            if key.startswith(prefix) and (end is None or key < end):
                if value is None:
                    merged.pop(key, None)
                else:
                    merged[key] = value
        return iter(sorted(merged.items()))

    def apply(self) -> None:
        """Write the staged changes into the store."""
        for key, (value, logged) in self.writes.items():
            if value is None:
                self.store.delete(key, logged=logged)
            else:
                self.store.put(key, value, logged=logged)
        self.writes.clear()
