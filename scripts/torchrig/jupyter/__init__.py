"""Run as dev inside the container, beside Jupyter: the Host check Jupyter's server loads (`hosts`)
and the URL with its token that `make jupyter-url` prints (`url`)."""
