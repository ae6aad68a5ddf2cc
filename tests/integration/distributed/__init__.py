"""The process-group helpers (torchrig.train.distributed) doing real work: compiling, sharding."""
