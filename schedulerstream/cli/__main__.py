"""``python -m schedulerstream.cli``."""

from schedulerstream.cli import main

main()
