"""The model-facing memory tools (`memory`): argument models, untrusted-data wrapping, search and save."""
