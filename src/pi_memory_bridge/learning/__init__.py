"""Learning: consolidation of captured turns into typed L1 memories, on the user's model.

schemas      what the model may answer (strict pydantic), and why a job wrote nothing
prompts      the extract and reconcile prompts (tagged and versioned)
parse        model text -> validated answer, fail-closed
cheap        duplicates settled without a model call
plan         validated answers -> a job's decisions (pure rules; hand-saved memories win)
consolidate  one job end to end, against the store's ledger (backends/local/learning/memories)
model        the completion interface and the Pi-side model (`model/complete` via the shim)
endpoint     an OpenAI-compatible endpoint the user configured (httpx)
budget       the daily token budget
scheduler    when jobs run (idle, every N turns, on demand), one at a time, in the background
consent      the one-time question's answer, stored in the global config
The sidecar's wiring into all of the above is `engine.learning` (with `engine.learning_status`,
`engine.learning_flows`, `engine.shim_model`); the CLI commands are `cli.learning_cmds`.
"""
