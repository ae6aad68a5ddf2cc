"""One command on many hosts over SSH: the machinery behind `--hostfile` (and `--hosts`).

`torchrig launch --hostfile` and `torchrig verify --hostfile` both run through it. It knows hosts,
SSH and a rendezvous endpoint; what each host runs is the caller's (launch writes it).

- `hostfile`: which hosts (`host [slots=N]` lines, or `--hosts a,b`).
- `fanout`: one `ssh` per host, output prefixed, stopped together, a lost host rejoined.
- `remote`: the wrapper on each host that takes its command down when the SSH link ends.
- `probe`: each host's facts for the preflight (its remote end), and the rendezvous port test.
- `preflight`: the hosts' facts side by side: what would make them fail together.
- `run`: the sequence both commands share: summary, preflight, then the job under a policy.

Standard library only; torch is never imported here.
"""
