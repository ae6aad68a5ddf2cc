"""One command on many hosts over SSH, behind `torchrig launch --hostfile`, and the job across
hosts it runs (`job`). Standard library only."""
