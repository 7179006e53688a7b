"""Registers ``dlprio run`` (prioritizer/cli.py registry); the code is in prioritizer.daemon_cli."""

from prioritizer.daemon_cli import RUN as COMMAND

__all__ = ["COMMAND"]
