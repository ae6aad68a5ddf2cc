"""One command on many hosts over SSH, behind `--hostfile` / `--hosts` of `torchrig launch` and
`torchrig verify`, and the job across hosts that both run (`job`). Standard library only."""
