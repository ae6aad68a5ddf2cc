"""The process-group helpers (torchrig.distributed) doing real work: compiling, sharding."""
