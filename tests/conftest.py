"""Shared test settings."""

from hypothesis import HealthCheck, settings

# Property tests check behaviour, not speed: a busy 2-core CI machine must not turn a slow
# example into a failure (speed is measured in bench/).
settings.register_profile("pi-memory-bridge", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("pi-memory-bridge")
