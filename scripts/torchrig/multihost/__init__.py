"""One command on many hosts over SSH, behind `--hostfile` / `--hosts` of `torchrig launch` and
`torchrig verify` (one module per part: docs/architecture.md). Standard library only."""
