"""The kept packages and the image's pinned stack (docs/packages.md; docs/architecture.md lists
each module)."""
