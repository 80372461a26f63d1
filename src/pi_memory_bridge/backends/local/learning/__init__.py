"""The local store's learning side, over the same SQLite file: `memories` (`LearnedMemories`,
the door to the rest), `learning_turns`, `job_writes`, `job_ledger`, `enrichments`, `proposals`,
their values (`learned_rows`) and their tables (`enrichment_schema`, `question_schema`).
Outside `backends/` it is reached through `MemoryBackend.learning()` (`backends.learning`)."""
