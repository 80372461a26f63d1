"""The capture pipeline, pure: Pi's message shapes (`pi_shapes`), a settled turn prepared for
memory (`prepare`: redaction, fail-closed skips) and a branch's identity (`identity`)."""
