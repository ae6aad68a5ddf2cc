"""The Python behind the image's .pth files, run at every interpreter start."""
