"""--cluster-from-slurm: node shapes from sinfo records (pure; the live history test reads the
real dlcluster through the same function)."""

from __future__ import annotations

import pytest

from prioritizer.sim.slurm_cluster import ClusterShapeError, shape_from_nodes
from slurm_plugin.slurm.records import Node


def _node(name: str, gpus: int, partitions: tuple[str, ...] = ("gpu",)) -> Node:
    return Node(name, "127.0.0.1", "idle", (), partitions, 8, 1, 8, 64000, gpus, 0, "")


def test_identical_gpu_nodes_and_cpu_nodes_left_out() -> None:
    nodes = [_node("n1", 8), _node("n2", 8), _node("cpu1", 0)]
    assert shape_from_nodes(nodes) == (2, 8)


def test_partition_filter() -> None:
    nodes = [_node("n1", 8, ("a",)), _node("n2", 4, ("b",))]
    assert shape_from_nodes(nodes, ["b"]) == (1, 4)


def test_mixed_sizes_are_named() -> None:
    with pytest.raises(ClusterShapeError, match=r"1 node\(s\) × 4 GPUs, 2 node\(s\) × 8 GPUs"):
        shape_from_nodes([_node("a", 8), _node("b", 8), _node("c", 4)])


def test_no_gpu_node() -> None:
    with pytest.raises(ClusterShapeError, match="no node with GPUs"):
        shape_from_nodes([_node("cpu", 0)])
