"""The process Pi's extension spawns: `serve` (endpoint and handlers), `handshake`, the wire models
(`protocol`) and `logs`. Nothing is re-exported here, so importing `sidecar.protocol` stays cheap."""
