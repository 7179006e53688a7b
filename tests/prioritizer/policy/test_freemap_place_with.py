"""``FreeMap.place_with`` and ``count_at_least`` (used by the gang victim search) agree with
raising a copy's free GPUs and calling ``place`` / counting by hand, ``place_once`` (the
reclaim's placement) with ``place`` on a new map, and ``place`` finds a placement exactly
when one exists (brute force over node assignments)."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from prioritizer.policy.placement import FreeMap, place_once

frees = st.lists(st.integers(0, 8), min_size=1, max_size=7)
needs = st.lists(st.integers(0, 8), min_size=1, max_size=4)   # 0: a GPU-less component


@settings(max_examples=400, deadline=None)
@given(frees, needs, st.data())
def test_place_with_equals_place_on_a_raised_copy(free, need, data) -> None:
    extra = data.draw(st.dictionaries(st.integers(0, len(free) - 1), st.integers(0, 8)))
    fmap = FreeMap(free)
    raised = fmap.copy()
    for node, amount in extra.items():
        raised.add([node], [amount])
    assert fmap.place_with(extra, need) == raised.place(need)
    assert fmap.free == free   # unchanged
    for gpus in range(1, 10):
        assert raised.count_at_least(gpus) == sum(1 for f in raised.free if f >= gpus)


@settings(max_examples=400, deadline=None)
@given(frees, needs)
def test_place_finds_a_placement_iff_one_exists(free, need) -> None:
    # FreeMap only places on nodes with a free GPU (an entry of 0 needs one too)
    exists = any(all(free[n] >= max(g, 1) for n, g in zip(nodes, need))
                 for nodes in itertools.permutations(range(len(free)), len(need)))
    assert (FreeMap(free).place(need) is not None) == exists


@settings(max_examples=400, deadline=None)
@given(frees, needs)
def test_place_once_equals_place_on_a_new_map(free, need) -> None:
    assert place_once(free, need) == FreeMap(free).place(need)
