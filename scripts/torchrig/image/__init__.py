"""The container's start-up and its helpers, run inside the image (standard library only; never
`torchrig.host`, the Makefile's side). `root_main` is how root runs them: see docs/architecture.md.
"""
