"""The memory inspector: a local web page to see, search, correct and forget what Pi remembers,
and why it recalled it (`pi-memory-bridge ui`, `/tdai-memory-ui`).

Loopback only, a random token per start, Host and Origin checked, CSRF-protected POSTs, a strict
Content-Security-Policy and everything stored rendered escaped (`security`). Reads come from the
store and the outbox (`store_view`, `service`); every change goes through the same `operations`
as the commands (forget, edit, outbox requeue/purge). Which packages the web stack needs is
`pi_memory_bridge.inspector_packages` (`/tdai-memory-ui` asks it too).
"""
