"""gilprof: find and fix GIL contention on the host side of distributed Python jobs."""

__version__ = "0.1.0"
