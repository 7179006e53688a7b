"""Loading duration distributions (GPU·s samples) for the Gittins policy.

The policy does no I/O (docs/design.md, code rule 1), so drivers load the samples here and pass a
:class:`prioritizer.policy.gittins.GittinsDistribution` to ``decide``. The package ships the
Tiresias reference simulator's ``yarn-gput1000.csv`` (1,001 sorted GPU-time samples from a
production YARN cluster; header ``duration``) as the default; a site should pass its own
history (ended jobs' GPU·s from the ledger or sacct) once it has one.
"""

from __future__ import annotations

import csv
from importlib import resources
from pathlib import Path

from prioritizer.policy.gittins import GittinsDistribution

DEFAULT_SAMPLES = "yarn-gput1000.csv"


def load_samples(path: str | Path | None = None) -> list[float]:
    """GPU·s samples from a one-column CSV (header ``duration``) or the packaged default.

    Raises:
        ValueError: naming file and line for a non-number or non-positive sample, or an
            empty file.
    """
    if path is None:
        text = resources.files("prioritizer.policy.data").joinpath(DEFAULT_SAMPLES).read_text()
        name = f"prioritizer/policy/data/{DEFAULT_SAMPLES}"
    else:
        try:
            text = Path(path).read_text()
        except OSError as exc:
            raise ValueError(f"{path}: cannot read ({exc.strerror})") from None
        name = str(path)
    samples: list[float] = []
    for line_no, row in enumerate(csv.reader(text.splitlines()), start=1):
        if not row:
            continue
        if line_no == 1 and not _is_float(row[0]):
            if [c.strip() for c in row] != ["duration"]:
                raise ValueError(f"{name}:1: expected the one-column header 'duration' (GPU·s), "
                                 f"found {','.join(row)!r}")
            continue
        if len(row) != 1:
            raise ValueError(f"{name}:{line_no}: expected one column (duration, GPU·s), "
                             f"found {len(row)}")
        if not _is_float(row[0]) or float(row[0]) <= 0:
            raise ValueError(f"{name}:{line_no}: expected a positive number of GPU·s, "
                             f"got {row[0]!r}")
        samples.append(float(row[0]))
    if not samples:
        raise ValueError(f"{name}: no samples")
    return samples


def load_distribution(path: str | Path | None = None) -> GittinsDistribution:
    """:func:`load_samples` wrapped in a :class:`GittinsDistribution`."""
    return GittinsDistribution(load_samples(path))


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
