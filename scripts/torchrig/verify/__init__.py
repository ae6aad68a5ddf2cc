"""`torchrig verify`: GPU, driver, fabric and container checks (see docs/verify.md)."""
