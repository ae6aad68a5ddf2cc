"""Integration tests: real torchrun runs of the training example, and the notebook."""
