"""``python -m schedulerstream``."""

from schedulerstream.cli import main

main()
