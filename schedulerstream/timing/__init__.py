"""Time and DST: cron parsing, next-instant engines, previews (DESIGN.md §4).

Instants are UTC epoch microseconds (ints) everywhere; zones are IANA names.
"""

from schedulerstream.contracts.policies import DstGap, DstRepeat
from schedulerstream.timing.at import AtSchedule
from schedulerstream.timing.cache import NextInstantCache
from schedulerstream.timing.cron_next import CronSchedule, parse_cron
from schedulerstream.timing.cron_parse import MACROS, CronFields, parse_fields
from schedulerstream.timing.every import EverySchedule
from schedulerstream.timing.preview import PreviewEntry, preview
from schedulerstream.timing.schedule import CountableSchedule, Schedule, next_instants
from schedulerstream.timing.zones import DEFAULT_ZONE, get_zone

__all__ = [
    "DEFAULT_ZONE",
    "MACROS",
    "AtSchedule",
    "CountableSchedule",
    "CronFields",
    "CronSchedule",
    "DstGap",
    "DstRepeat",
    "EverySchedule",
    "NextInstantCache",
    "PreviewEntry",
    "Schedule",
    "get_zone",
    "next_instants",
    "parse_cron",
    "parse_fields",
    "preview",
]
