"""Loading duration distributions (GPU·s samples) for the Gittins policy.

The policy does no I/O (docs/design.md, code rule 1), so drivers load the samples here and pass a
:class:`prioritizer.policy.gittins.GittinsDistribution` to ``decide``. The package ships the
Tiresias reference simulator's ``yarn-gput1000.csv`` (1,001 sorted GPU-time samples from a
production YARN cluster; header ``duration``) as the default; a site should pass its own
history (ended jobs' GPU·s from the ledger or sacct) once it has one.
"""

from __future__ import annotations

import csv
import io
import math
from importlib import resources

from prioritizer.csvcells import cell_number
from prioritizer.policy.gittins import GittinsDistribution

DEFAULT_SAMPLES = "yarn-gput1000.csv"


def load_samples() -> list[float]:
    """The packaged GPU·s samples (:data:`DEFAULT_SAMPLES`). A file a user names is read by
    :func:`prioritizer.samplesfile.load_distribution` (a regular file, bounded: the policy opens
    no file of a user's, code rule 1) and parsed by :func:`parse_samples`."""
    text = resources.files("prioritizer.policy.data").joinpath(DEFAULT_SAMPLES).read_text()
    return parse_samples(text, f"prioritizer/policy/data/{DEFAULT_SAMPLES}")


def parse_samples(text: str, name: str) -> list[float]:
    """GPU·s samples from the text of a one-column CSV (header ``duration``); ``name`` (the
    file, as shown) starts every message. A sample is read as a trace's number cells are
    (:func:`prioritizer.csvcells.cell_number`: plain ASCII decimal text, so not ``1_000`` nor
    ``٣٠٠``); a line is the file's own (a quoted line break counts).

    Raises:
        ValueError: naming file and line for a non-number or non-positive sample, or an
            empty file.
    """
    samples: list[float] = []
    text = text.removeprefix("\ufeff")   # a byte-order mark, as spreadsheets write
    reader = csv.reader(io.StringIO(text, newline=""))
    line_no = 1   # the line the next row starts on
    for row in reader:
        at, line_no = line_no, reader.line_num + 1
        if not row:
            continue
        if at == 1 and not _is_float(row[0]):
            if [c.strip() for c in row] != ["duration"]:
                raise ValueError(f"{name}:1: expected the one-column header 'duration' (GPU·s), "
                                 f"found {','.join(row)!r}")
            continue
        if len(row) != 1:
            raise ValueError(f"{name}:{at}: expected one column (duration, GPU·s), "
                             f"found {len(row)}")
        if not _is_float(row[0]) or not 0 < float(row[0]) < math.inf:   # NaN fails too
            raise ValueError(f"{name}:{at}: expected a positive finite number of GPU·s, "
                             f"got {row[0]!r}")
        try:   # float() also reads 1_000 and non-ASCII digits: refused as in a trace
            samples.append(cell_number(row[0], "duration"))
        except ValueError as exc:
            raise ValueError(f"{name}:{at}: {exc}") from None
    if not samples:
        raise ValueError(f"{name}: no samples")
    return samples


def load_distribution() -> GittinsDistribution:
    """:func:`load_samples` (the packaged samples) wrapped in a :class:`GittinsDistribution`."""
    return GittinsDistribution(load_samples())


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
