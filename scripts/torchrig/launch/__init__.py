"""`torchrig launch`: torchrun with the defaults people forget, on one machine or many (one module
per part: docs/architecture.md). Standard library only at import time."""
