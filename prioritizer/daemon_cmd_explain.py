"""Registers ``dlprio explain`` (prioritizer/cli.py registry); the code is in prioritizer.daemon_cli."""

from prioritizer.daemon_cli import EXPLAIN as COMMAND

__all__ = ["COMMAND"]
