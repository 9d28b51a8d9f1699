"""The ``trajstore`` command: thin wrappers over library functions."""
