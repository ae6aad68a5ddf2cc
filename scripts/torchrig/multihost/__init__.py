"""One command on many hosts over SSH, behind `--hostfile` / `--hosts` of `torchrig launch` and
`torchrig verify`, and the job across hosts that both run (`job`; one module per part:
docs/architecture.md). Standard library only."""
