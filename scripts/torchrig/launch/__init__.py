"""`torchrig launch`: torchrun with the defaults people forget, on one machine or many (the job
across hosts is `multihost.job`; one module per part: docs/architecture.md). Standard library only
at import time."""
