"""The closing lines of scripts/test.sh: coverage (line and branch) of both pytest phases, the
tests counted over both phases, and the exit code of the whole run.

Usage: suite_summary.py OUT_DIR STATIC_RC, where OUT_DIR holds each phase's `rc.<phase>`,
`junit.<phase>.xml` and `coverage.<phase>` (written by scripts/test.sh).
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import coverage

PHASES = ("parallel", "serial")
NO_TESTS_COLLECTED = 5  # pytest's exit code: a failure unless the other phase ran tests


@dataclass
class Counts:
    passed: int = 0
    failed: int = 0
    skipped: int = 0

    def add_junit(self, path: Path) -> None:
        if not path.is_file():
            return
        root = ET.parse(path).getroot()
        for suite in root.iter("testsuite"):
            tests, skipped = int(suite.get("tests", 0)), int(suite.get("skipped", 0))
            failed = int(suite.get("failures", 0)) + int(suite.get("errors", 0))
            self.passed += tests - skipped - failed
            self.failed += failed
            self.skipped += skipped


def coverage_line(out: Path) -> str:
    files = [str(out / f"coverage.{phase}") for phase in PHASES if (out / f"coverage.{phase}").is_file()]
    if not files:
        return "coverage: not measured (SUITE_COVERAGE=0)"
    cov = coverage.Coverage(data_file=str(out / "coverage"))
    cov.combine(files, keep=True)
    cov.save()
    cov.load()
    report = out / "coverage.json"
    cov.json_report(outfile=str(report))
    totals = json.loads(report.read_text(encoding="utf-8"))["totals"]
    lines, lines_hit = totals["num_statements"], totals["covered_lines"]
    branches, branches_hit = totals["num_branches"], totals["covered_branches"]
    return (
        f"coverage: lines {100 * lines_hit / max(1, lines):.1f}% ({lines_hit}/{lines}), "
        f"branches {100 * branches_hit / max(1, branches):.1f}% ({branches_hit}/{branches}), "
        f"combined {totals['percent_covered']:.1f}%"
    )


def main(out: Path, static_rc: int) -> int:
    counts = Counts()
    for phase in PHASES:
        counts.add_junit(out / f"junit.{phase}.xml")
    ran = counts.passed + counts.failed > 0
    failed = static_rc != 0
    for phase in PHASES:
        rc_file = out / f"rc.{phase}"
        rc = int(rc_file.read_text().strip()) if rc_file.is_file() else 1
        if rc == NO_TESTS_COLLECTED and ran:
            continue
        if rc != 0:
            print(f"pytest {phase} phase failed (exit code {rc})")
            failed = True
    if static_rc != 0:
        print("static checks failed (see above)")
    print(coverage_line(out))
    print(f"suite: {counts.passed} passed, {counts.failed} failed, {counts.skipped} skipped")
    return 1 if failed or not ran else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), int(sys.argv[2])))
