"""Weighted deficit round-robin over the tenants that have runnable work (one partition)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping


def _valid(weight: float) -> bool:
    return math.isfinite(weight) and weight > 0


class DeficitRing:
    """Tenants in service order with their deficits; a visit adds the tenant's quantum.

    Weights (floats) are looked up live in ``weights``, held by reference: one mapping updated
    from cron.tenants serves every ring, and a change applies from the next round. A tenant's
    quantum is its weight over the smallest weight in the ring, so ratios hold and the lightest
    tenant starts a run every round (no idle rounds with weights below 1). A visit that a limit
    cuts short after a start resumes at the next round with what is left of the quantum (no
    new one until that is spent, and never more than the quantum of the weight now), so when
    a shared limit frees one place a round the places still follow the weights; a limit that
    stops a fresh quantum before its first start forfeits it (the fraction carried into it
    stays), so nothing saves up into a burst of more than one quantum. The
    fraction carries over, so weight 1.5 against 1 starts 3 runs to 2. A missing, zero,
    negative or non-finite weight counts as ``default_weight``.
    """

    def __init__(self, weights: Mapping[str, float] | None = None,
                 default_weight: float = 1.0) -> None:  # fmt: skip
        if not _valid(default_weight):
            raise ValueError(f"default_weight must be a positive number, not {default_weight!r}")
        self._weights: Mapping[str, float] = weights if weights is not None else {}
        self._default = float(default_weight)
        self._deficits: dict[str, float] = {}  # insertion order = service order

    def __bool__(self) -> bool:
        return bool(self._deficits)

    def __contains__(self, tenant: object) -> bool:
        return tenant in self._deficits

    def tenants(self) -> list[str]:
        return list(self._deficits)

    def weight(self, tenant: str) -> float:
        weight = self._weights.get(tenant)
        return float(weight) if weight is not None and _valid(weight) else self._default

    def add(self, tenant: str) -> None:
        """``tenant`` has work (a no-op if it is already in the ring)."""
        self._deficits.setdefault(tenant, 0.0)

    def clear(self) -> None:
        self._deficits.clear()

    def round(self, serve: Callable[[str], str]) -> bool:
        """One DRR round. ``serve(tenant)`` tries to start one run: "started", "skipped" (a
        run was consumed without a start: costs nothing), "blocked" (a limit) or "empty".
        A tenant that spent its quantum moves to the back, behind those a limit stopped
        before they spent it: a place that a shared limit (the process-wide one) frees next
        goes to a tenant it stopped, not to whoever the ring visits first every time. True
        when anything was started or consumed."""
        tenants = list(self._deficits)
        if not tenants:
            return False
        weights = [self.weight(tenant) for tenant in tenants]
        lightest = min(weights)
        progressed = False
        turned_away: list[tuple[str, float]] = []
        for tenant, weight in zip(tenants, weights, strict=True):
            carried = self._deficits[tenant]
            quantum = weight / lightest
            fresh = carried < 1.0  # else: what a limit left of its last quantum
            # a remainder is capped by the quantum of today's weight, lowered since perhaps
            deficit = carried + quantum if fresh else min(carried, quantum + carried % 1.0)
            state = "started"
            served = started = False
            while deficit >= 1.0:
                state = serve(tenant)
                if state == "started":
                    deficit -= 1.0
                    started = True
                elif state != "skipped":
                    break
                served = True
            del self._deficits[tenant]
            progressed = progressed or served
            if state == "empty":
                continue
            if deficit < 1.0:
                self._deficits[tenant] = deficit
            elif started or not fresh:  # cut short: the rest of its quantum, next at the front
                turned_away.append((tenant, deficit))
            else:  # stopped before a start: a fresh quantum next round, at the front
                turned_away.append((tenant, carried))
        if turned_away:
            self._deficits = {**dict(turned_away), **self._deficits}
        return progressed
