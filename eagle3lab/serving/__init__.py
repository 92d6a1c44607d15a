"""Running servers and measuring them: launch and stop (with a watchdog), load tests, sweeps, their inputs and the report's measurement store. Not: what an engine's flags mean (engines)."""
