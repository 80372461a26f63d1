"""The process Pi's extension spawns: `serve` (endpoint and handlers), `handshake`, `daemon` and
`logs`; the wire models are `pi_memory_bridge.wire`. Nothing is re-exported here."""
