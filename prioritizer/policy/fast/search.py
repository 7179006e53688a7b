"""The incremental scheduler's victim-search strategy (``preemption.SearchStrategy``): the
default search of ``prioritizer.policy.victim_search``, plus answers proved from what the
scheduler keeps between decisions (``prioritizer.policy.fast.incremental``).

* ``above``: the GPUs of preemptible running jobs above a level, from per-queue totals (queue
  policies) or the running jobs by oracle end (``srtf``);
* ``may_fit``: a test that refuses a waiter no victim set can serve: the per-node bound
  (``NodeBound``, ``srtf`` on real nodes) or, exact, the per-node counts of queue policies
  (``policy.fast.queue_room``);
* ``due``: an exact test that a waiter finds victims (``first_only`` decisions; ``srtf``,
  queue policies);
* ``one_node``, ``gang``: a waiter's victims read off the per-node bound
  (:class:`~prioritizer.policy.fast.one_node.OneNodeVictims`, one-node, ``srtf``) or the
  per-node counts (:class:`~prioritizer.policy.fast.queue_victims.QueueVictims`, queue
  policies; the plain search's index is then never built).

Each is None where the scheduler keeps nothing for it; the answers are those of the plain
search (tests/prioritizer/policy/test_policy_scheduler.py compares every decision with
``decide``). :attr:`FastSearch.takes` and :attr:`FastSearch.took` record the victims taken
in the decision (``policy.fast.waiters``, ``policy.fast.queue_room`` read them). Units: GPUs,
seconds. No I/O.
"""

from __future__ import annotations

import sys
from typing import Callable

from prioritizer.policy.placement import FreeMap
from prioritizer.policy.victim_search import PlainSearch
from prioritizer.policy.victims import DEFER, Candidate, Victims

#: (level) -> GPUs above it
Above = Callable[[float], int]
#: (level, need largest first, extra GPUs per node, soon) -> may fit
MayFit = Callable[[float, tuple[int, ...], int, FreeMap], bool]
#: (level, need largest first, soon) -> surely finds victims
Due = Callable[[float, tuple[int, ...], FreeMap], bool]
#: (level, GPUs, soon, taken ids, GPUs taken per node) -> victims, None or ``DEFER``
OneNode = Callable[[float, int, FreeMap, set[int], dict[int, int]], list[Candidate] | None]
#: (level, need in the job's order, soon, taken ids) -> victims, None or ``DEFER``
Gang = Callable[[float, tuple[int, ...], FreeMap, set[int]], list[Candidate] | None]


class FastSearch(PlainSearch):
    """The victim search of one scheduler decision (see the module doc); a part left None
    is the plain search's answer."""

    __slots__ = ("room", "fit", "proof", "reader", "gang", "takes", "took")

    def __init__(self, above: Above | None, may_fit: MayFit | None, due: Due | None,
                 one_node: OneNode | None, took: list[Candidate] | None = None,
                 gang: Gang | None = None) -> None:
        super().__init__()
        self.room, self.fit, self.proof, self.reader = above, may_fit, due, one_node
        self.gang = gang
        if gang is not None:   # the readers answer each search from kept counts: no index
            self.index_after = sys.maxsize
        #: victim sets taken in this decision (``policy.fast.waiters`` reads it)
        self.takes = 0
        #: the victims taken in this decision, in order (``policy.fast.queue_room`` reads it)
        self.took: list[Candidate] = took if took is not None else []

    def above(self, level: float) -> int:
        room = self.room
        return -1 if room is None else room(level)

    def may_fit(self, level: float, need: tuple[int, ...], extra: int, soon: FreeMap) -> bool:
        fit = self.fit
        return True if fit is None else fit(level, need, extra, soon)

    def due(self, level: float, need: tuple[int, ...], soon: FreeMap) -> bool:
        proof = self.proof
        return False if proof is None else proof(level, need, soon)

    def one_node(self, level: float, gpus: int, soon: FreeMap, taken: set[int],
                 taken_on: dict[int, int]) -> list[Candidate] | None:
        reader = self.reader
        return DEFER if reader is None else reader(level, gpus, soon, taken, taken_on)

    def choose(self, need: tuple[int, ...], soon: FreeMap, level: float, victims: Victims,
               taken: set[int], taken_on: dict[int, int]) -> list[Candidate] | None:
        gang = self.gang
        if gang is not None and len(need) > 1 and self.index is None:
            chosen = gang(level, need, soon, taken)
            if chosen is not DEFER:
                return chosen
        return super().choose(need, soon, level, victims, taken, taken_on)

    def taken(self, chosen: list[Candidate], soon: FreeMap) -> None:
        self.takes += 1
        self.took.extend(chosen)
        super().taken(chosen, soon)
