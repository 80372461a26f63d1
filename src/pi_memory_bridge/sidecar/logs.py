"""Logging for the sidecar: a rotating file under the data dir plus stderr, never stdout, never secrets."""

from __future__ import annotations

import logging
import logging.handlers
import sys
from pathlib import Path

_FORMAT = "%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s"


class _RedactingFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        from pi_memory_bridge.redact import redact_text  # imported on first record: start-up stays fast

        message = record.getMessage()
        redacted = redact_text(message)
        if redacted.count:
            record.msg, record.args = redacted.text, None
        return True


def setup_logging(log_dir: Path | None, level: str = "info", *, stderr: bool = True) -> Path | None:
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    root.setLevel(level.upper())
    redactor = _RedactingFilter()
    log_path: Path | None = None
    if log_dir is not None:
        try:
            log_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            log_path = log_dir / "sidecar.log"
            file_handler = logging.handlers.RotatingFileHandler(
                log_path, maxBytes=2_000_000, backupCount=3, encoding="utf-8"
            )
            file_handler.setFormatter(logging.Formatter(_FORMAT))
            file_handler.addFilter(redactor)
            root.addHandler(file_handler)
        except OSError as exc:
            print(f"pi-memory-bridge: cannot write logs to {log_dir}: {exc}", file=sys.stderr)
            log_path = None
    if stderr:
        err = logging.StreamHandler(sys.stderr)
        err.setLevel(logging.WARNING)
        err.setFormatter(logging.Formatter("pi-memory-bridge %(levelname)s: %(message)s"))
        err.addFilter(redactor)
        root.addHandler(err)
    return log_path
