"""In the image, outside the commands: the start, run as root with `python3 -I -S` from root's own
copy (`root_main` says how), the healthcheck and what `make up` asks inside; `jupyter_hosts`,
loaded by Jupyter's server; `pth/`, run at every interpreter start. Standard library only."""
