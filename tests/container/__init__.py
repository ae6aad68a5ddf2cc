"""Container tests: drive the real image with compose, the Docker SDK, paramiko and a browser."""
