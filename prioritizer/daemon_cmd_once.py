"""Registers ``dlprio once`` (prioritizer/cli.py registry); the code is in prioritizer.daemon_cli."""

from prioritizer.daemon_cli import ONCE as COMMAND

__all__ = ["COMMAND"]
