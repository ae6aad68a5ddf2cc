"""The kept packages: what dev installs (pip, uv, %pip) lives on a volume of its own.

It survives `make down`/`make up` and image rebuilds, while the image's own environment stays
read-only to dev, so nothing dev installs can replace the stack, and nothing dev writes is on
root's PATH.

- /opt/venv: the image's environment (torch, JupyterLab, torchrig), root-owned.
- /opt/packages: the `packages` volume (or the folder PACKAGES_DIR names), dev's. It holds the
  kept venv (`venv/`), which the entrypoint makes and keeps up to date as dev at every start
  (`kept`). That venv's site-packages reads the image's through a `.pth` file, so pip run there
  sees the whole stack as installed and writes only what is new (or what the user upgrades)
  into the kept venv. dev's PATH and VIRTUAL_ENV point at it.
- The image's site-packages has a root-owned `.pth` file that puts the kept site-packages in
  front of its own in every Python that is not root (`sitedir`): torchrun's workers, Jupyter and
  its kernels, scripts run with /opt/venv/bin/python all see the kept packages; root never does.
- The stack (torch, torchvision, triton, nvidia-*) is pinned in a root-owned constraints file
  made at build time from what the image installed (`stack`); PIP_CONSTRAINT and UV_CONSTRAINT
  name it, so an install that would replace it is refused. `wrappers` add the way to override
  to pip's and uv's refusal, and let uv see the stack (uv reads only the target's own
  site-packages).

docs/packages.md is the user's side of this.
"""
