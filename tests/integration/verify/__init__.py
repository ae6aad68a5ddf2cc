"""verify's multi-process paths for real: gloo all-reduces, hung and crashing ranks, the CPU run."""
