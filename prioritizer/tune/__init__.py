"""``dlprio tune``: replay a trace under every combination of a grid of policy settings and rank
them (grid: :mod:`prioritizer.grid`; replays and ranking: :mod:`prioritizer.tune.rank`;
executors: :mod:`prioritizer.tune.executors`; command: :mod:`prioritizer.tune.cli`). Replays
go through ``prioritizer.sim.engine.simulate`` only; never imports the daemon."""
