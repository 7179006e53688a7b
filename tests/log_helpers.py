"""Capturing the daemon's log records in tests: a handler with the product's formatter on the
``dlprio`` logger for the length of a ``with`` block (removed after, level restored)."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator
from contextlib import contextmanager

from prioritizer.daemon.log import LOGGER, CycleAdapter, formatter


@contextmanager
def captured(fmt: str = "text", created: float | None = None
             ) -> Iterator[tuple[CycleAdapter, io.StringIO]]:
    """Yield ``(log, stream)``: events logged through ``log`` land in ``stream`` as ``fmt`` lines.
    With ``created`` (epoch seconds), every record is stamped with that time (a fixed ``ts``)."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter(fmt))
    if created is not None:
        handler.addFilter(lambda record: setattr(record, "created", created) is None)
    logger = logging.getLogger(LOGGER)
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield CycleAdapter(logger), stream
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
