__version__ = "0.1.0"
# Bumped whenever a method, a parameter or a result shape of the shim<->sidecar protocol changes
# incompatibly; the shim refuses to talk to a sidecar with another major version.
PROTOCOL_VERSION = "1.0"
