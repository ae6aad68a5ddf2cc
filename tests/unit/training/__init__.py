"""Unit tests for the training helpers: sampler, launch command, distributed set-up."""
