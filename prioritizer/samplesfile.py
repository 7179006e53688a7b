"""The Gittins samples CSV a user names: ``gittins_samples: FILE`` in dlprio.yaml and
``dlprio simulate --durations FILE``.

Read like every file dlprio is given (:func:`slurm_plugin.common.yamlfile.read_text`: a regular file of
at most :data:`MAX_SAMPLES_BYTES`, UTF-8; a FIFO is refused, never waited on, so
``gittins_samples: /some/fifo`` cannot hang ``dlprio once`` after it locked the ledger) and
parsed by :func:`prioritizer.policy.durations.parse_samples` (one column ``duration``, GPU·s).
"""

from __future__ import annotations

from pathlib import Path

from prioritizer.policy import durations
from prioritizer.policy.gittins import GittinsDistribution
from slurm_plugin.common.yamlfile import read_text
from slurm_plugin.common.cli import visible

MAX_SAMPLES_BYTES = 64 * 1024 * 1024
"""Largest samples file read, bytes (64 MiB: a few million samples; the packaged one is 6 KB)."""


def load_distribution(path: str | Path | None) -> GittinsDistribution:
    """The samples of the CSV file ``path`` (``None`` or ``""``: the packaged ones).

    Raises:
        ValueError: one line naming the file: ``PATH: cannot read (a FIFO; give a regular
            file)``, ``PATH: larger than ...``, ``PATH:LINE: expected a positive number of
            GPU·s, got '-1'``, ``PATH: no samples``.
    """
    if not path:
        return durations.load_distribution()
    return GittinsDistribution(durations.parse_samples(read_text(path, MAX_SAMPLES_BYTES),
                                                       visible(path)))
