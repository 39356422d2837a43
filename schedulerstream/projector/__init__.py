"""The projector topology: cron.schedules + cron.runs + cron.attempts → the read model and the
compacted cron.run-state topic (DESIGN.md §6)."""
