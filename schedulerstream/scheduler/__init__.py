"""The scheduler topology: partition-owned timers that emit run triggers (DESIGN.md §3)."""
