"""Weighted deficit round-robin over the tenants that have runnable work (one partition)."""

from __future__ import annotations

from collections.abc import Callable, Mapping


class DeficitRing:
    """Tenants in service order with their deficits; a visit adds the tenant's weight."""

    def __init__(self, weights: Mapping[str, int] | None = None, default_weight: int = 1) -> None:
        self._weights = dict(weights or {})
        self._default = default_weight
        self._deficits: dict[str, float] = {}  # insertion order = service order

    def __bool__(self) -> bool:
        return bool(self._deficits)

    def __contains__(self, tenant: object) -> bool:
        return tenant in self._deficits

    def tenants(self) -> list[str]:
        return list(self._deficits)

    def weight(self, tenant: str) -> int:
        return self._weights.get(tenant, self._default)

    def add(self, tenant: str) -> None:
        """``tenant`` has work (a no-op if it is already in the ring)."""
        self._deficits.setdefault(tenant, 0.0)

    def clear(self) -> None:
        self._deficits.clear()

    def round(self, serve: Callable[[str], str]) -> bool:
        """One DRR round. ``serve(tenant)`` tries to start one run: "started", "skipped" (a
        run was consumed without a start: costs nothing), "blocked" (a limit) or "empty".
        Served tenants move to the back; True when anything was started or consumed."""
        progressed = False
        for tenant in list(self._deficits):
            quantum = self.weight(tenant)
            deficit = min(self._deficits[tenant] + quantum, float(quantum))
            state = "started"
            while deficit >= 1.0:
                state = serve(tenant)
                if state == "started":
                    deficit -= 1.0
                    progressed = True
                elif state == "skipped":
                    progressed = True
                else:
                    break
            del self._deficits[tenant]
            if state != "empty":
                self._deficits[tenant] = deficit
        return progressed
