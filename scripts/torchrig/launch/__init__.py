"""`torchrig launch`: torchrun with the defaults people forget, on one machine or many (`split`
gives each host its share; the job across hosts that runs them is `job`). Standard
library only at import time."""
