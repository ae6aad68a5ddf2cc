"""Machines the tests emulate on this one, used by tests alone: containers of the image as SSH
nodes (`docker_nodes`), a real Slurm cluster of local daemons (`slurm_cluster`, `slurm_jobs`),
Apptainer's rules applied to a `docker run` of the image (`apptainer_rules`), the memlock the
Docker engine grants a container (`engine`), and the names of what a test run makes on the
engines with the sweep that removes what runs left (`leftovers`)."""
