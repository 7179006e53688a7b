"""The cluster's own history: ``dlprio history export`` turns Slurm accounting (sacct) into a
trace CSV (:mod:`prioritizer.history.trace`), ``dlprio history check`` replays it under the
policy that ran and compares with what happened (:mod:`prioritizer.history.check`). Sits beside
the simulator: it reads Slurm through ``slurm_plugin.slurm.client`` and replays through
``prioritizer.sim.engine.simulate``; it never imports the daemon."""
