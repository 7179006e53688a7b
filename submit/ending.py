"""How ``dlsubmit`` and ``dlqueue`` end: without the interpreter's last full garbage collection.

At exit CPython collects every object it tracks once more before it frees the modules; after
dlsubmit has loaded its modules and spec, or dlqueue built its 10,000 rows, that walk costs about
15-20 ms of a command that otherwise takes 100-400 ms (benchmarks/bench_dlsubmit.py,
bench_dlqueue.py). :func:`gc.freeze` (Python's documented switch, ``gc`` module) moves the
objects alive at that point to a permanent generation that collections skip; nothing else
changes (files are flushed and closed, ``atexit`` handlers run as before).
"""

from __future__ import annotations

import functools
import gc

from slurm_plugin.common.cli import Main


def without_final_gc(main: Main) -> Main:
    """Wrap a ``main(argv) -> int``: when it runs as the command (``argv`` is ``None``, i.e.
    ``sys.argv``), freeze the garbage collector as it returns, since the process then ends.
    Called with an argument list (tests, other Python code) it changes nothing."""

    @functools.wraps(main)
    def wrapper(argv: list[str] | None = None) -> int:
        try:
            return main(argv)
        finally:
            if argv is None:
                gc.freeze()

    return wrapper
