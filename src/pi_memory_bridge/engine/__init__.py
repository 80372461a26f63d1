"""The memory engine behind the protocol, one room per feature; `core.Engine` puts them together.

  core          `Engine`: built from the handshake's result, the methods the RPC handlers call
  backend_slot  the configured backend and the capture outbox: opened at start, reopened later
  notifier      footer notifications to the shim, and the background tasks behind them
  footer        which footer state is true now (the states and their text: `pi_memory_bridge.footer`)
  sessions      Pi session -> branch identity
  recall        the recall budget from config, the last recall for status
  capture       settled turns into memory, capture stats, skill capture
  skills        where a backend offers skills (skill source, skill capture)
  tools         the model's `tdai_*` tool calls; `tool_table`: every tool the model sees
  commands      the `/tdai-memory-*` command table and the flows behind it
  status        the status report
  catch_up      catch-up and import, loaded after the first recall (`catch_up_service`)
  learning      learning's wiring: scheduling, consent, notices (`learning_status`,
                `learning_flows`; `shim_model`: `model/complete` to the shim)

Nothing is imported here: `serve` imports the engine after the handshake, off the event loop.
"""
