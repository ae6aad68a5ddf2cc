"""What both sides of Docker read: standard library only, no other part of torchrig but the
image's kept-packages place."""
