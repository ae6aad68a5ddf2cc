"""The training example and its notebook, run for real: torchrun with gloo on CPU."""
