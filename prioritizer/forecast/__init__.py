"""Start-time forecasts: replay forward from a live state with the policy (pure; no Slurm,
no clock, no I/O). ``world`` holds the input records, ``draws`` the remaining-duration draws,
``replay`` the forward replay and ``forecast`` the per-job quantiles."""
