"""Catch-up capture and import from Pi's own session files (the source of truth for what was said).

    runner = CatchUpRunner(agent_dir=..., data_dir=..., outbox=outbox, wake=worker.wake)
    runner.start()            # a first pass now, in the background; then on a slow timer
    runner.nudge()            # live capture failed: look again soon
    runner.progress.describe()
    await runner.stop()

Modules: `reader` (session files, fail-closed), `segments` (turns as live capture sees them),
`files` (finding and reading files against their watermark), `state` (watermarks, import jobs,
when capture started), `runner` (the background passes), `importer` (preview and import). What a
sidecar wires up is `engine.catch_up_service`; the CLI command is `cli.import_sessions`.

Nothing is imported here: the engine loads its service in the background, after it is ready.
"""
