"""Integration tests: real process groups, torchrun runs of the training example, the notebook."""
