"""In the image, outside the commands: the start, run as root with `python3 -I -S` from root's own
copy (`root_main` says how), the healthcheck and what `make up` asks inside. Standard library
only."""
