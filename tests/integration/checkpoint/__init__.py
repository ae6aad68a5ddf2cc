"""Multi-process checkpoint tests: real process groups (gloo on CPU) spawned per test."""
