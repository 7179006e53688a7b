"""Registers ``dlprio status`` (prioritizer/cli.py registry); the code is in prioritizer.daemon_cli."""

from prioritizer.daemon_cli import STATUS as COMMAND

__all__ = ["COMMAND"]
