"""What a long prompt asks: its question and the identifiers it names, apart from pasted bulk.

People paste a log or a file and ask about it at the end ("... is that the staging cluster?").
Searched whole, such a prompt finds nothing: its vector is the paste's, its keyword terms are
the paste's first words, and the question's own words come last or are cut off. So a prompt
longer than `SHORT_PROMPT_CHARS` is read line by line:

* **Bulk** is what reads as machine text: fenced code, log lines (a leading timestamp or level),
  stack frames, indented or symbol-dense lines, `key=value` runs, code statements.
* **Prose** is the rest: sentences a person wrote. The question is taken from the prose, the
  last paragraph first (where people ask), then paragraphs holding a question mark, then the
  first one, up to `QUESTION_CHARS`.
* **Anchors** are identifier-like words of the bulk (`kestrel-west-kemub`, `order_sync`,
  `src/app.py`), which can name what the question is about wherever they stand; log levels,
  numbers, timestamps and hashes are left out (every log has them; they name nothing). The
  local store keeps only the anchors it has seen in a few rows (backends/local/prompt_terms.py):
  the rest could only dilute the search or promote unrelated rows.

A short prompt is searched exactly as written (`FocusedPrompt.short`), so nothing changes for
the prompts recall was tuned on. Measured by bench/bench_long_prompts.py.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from pi_memory_bridge.textsearch import is_identifier_like

__all__ = [
    "MAX_ANCHORS",
    "MAX_PROMPT_CHARS",
    "QUESTION_CHARS",
    "SHORT_PROMPT_CHARS",
    "TEXT_ANCHORS",
    "FocusedPrompt",
    "clip_prompt",
    "focus_prompt",
    "is_prose_line",
]

# Up to this many characters a prompt is its own question: a question with a line of context
# (the labelled sets' longest query is ~150 characters; issue 23 saw recall fail from ~1,200).
SHORT_PROMPT_CHARS = 600
# The question taken from a long prompt's prose: a few sentences.
QUESTION_CHARS = 700
# Anchors a long prompt contributes at most, in the order they appear (the local store looks
# them all up at once and keeps a few); a query for another store takes the first `TEXT_ANCHORS`.
MAX_ANCHORS = 200
TEXT_ANCHORS = 8
# A first paragraph this short, ending in a colon or a question mark, joins the question (it
# often says what the paste is: "The deploy log:", "Why does this fail?").
OPENING_CHARS = 200
# A pasted megabyte is read at its head and tail only: the cost stays bounded, and what a
# prompt asks is near one of its ends.
MAX_PROMPT_CHARS = 40_000
_HEAD_CHARS = 10_000

_FENCE = re.compile(r"^\s*(```|~~~)")
_COMMENT = re.compile(r"^\s*(#|//|/\*|\*|--|;;|\"\"\"|\'\'\')|(\"\"\"|\'\'\')\s*$")
_LOG_START = re.compile(
    r"^\s*[\[(<]?\s*("
    r"\d{2,4}[-/.]\d{1,2}[-/.]\d{1,4}"  # a date
    r"|\d{1,2}:\d{2}(:\d{2})?"  # a time
    r"|\d{9,}"  # an epoch
    r"|(trace|debug|info|notice|warn|warning|error|err|fatal|critical|crit|panic)\b"
    r"|[a-z]{3} [ \d]\d \d\d:"  # syslog's "Mar  3 14:02"
    r")",
    re.IGNORECASE,
)
_STACK_FRAME = re.compile(
    r"^\s*(at\s+\S+[.(]|File \"|Traceback \(|Caused by:|\.\.\. \d+ more|#\d+\s+0x|goroutine \d+)"
)
_CODE_START = re.compile(
    r"^\s*(def|class|import|from\s+\S+\s+import|return|if|elif|else|for|while|try|except|catch|"
    r"const|let|var|function|func|package|public|private|protected|static|fn|pub|use|impl|"
    r"struct|enum|interface|type|export|async|await|#include|#define|SELECT|INSERT|UPDATE|"
    r"CREATE|\$|>>>|[-+]{3}|@@)(\s|\(|:|$)"
)
_CODE_END = re.compile(r"[{};]\s*$|^\s*[})\]]")
_OPERATOR = re.compile(r"\s=\s|==|!=|->|=>|::|\w\(\)|\.\w+\(")
_KEY_VALUE = re.compile(r"\w=[^\s=]")
_WORD = re.compile(r"[^\W\d_]{2,}", re.UNICODE)
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")
_PROSE_SYMBOLS = frozenset(" .,;:!?'\"()-–—…/&%")
_QUESTION_MARK = re.compile(r"[?？]")
_CHUNK = re.compile(r"[\w./:@+#-]+", re.UNICODE)
# Words every log holds: a log's levels and a machine's boilerplate name nothing.
_LOG_WORDS = frozenset(
    "trace debug info notice warn warning error fatal critical panic null none true false "
    "nan utc gmt get post put delete patch head options http https".split()
)
_TIMESTAMPISH = re.compile(r"^[\d\-/:.tzTZ+,]+$")
_MEASURE = re.compile(r"^\d+(\.\d+)?[a-zA-Z%µ]{1,3}$")  # 804ms, 12kb, 3.5s
_HEXISH = re.compile(r"^(0x)?[0-9a-fA-F]{7,}$|^[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}$")


@dataclass(frozen=True, slots=True)
class FocusedPrompt:
    question: str  # what the prompt asks, in its words: what is embedded
    anchors: tuple[str, ...]  # identifier-like words of the pasted bulk, first appearance first
    short: bool  # the prompt was short: `question` is all of it

    @property
    def text(self) -> str:
        """The question and every anchor, as one query (for a search that weighs terms itself)."""
        return with_anchors(self.question, self.anchors[:TEXT_ANCHORS])


def with_anchors(question: str, anchors: tuple[str, ...] | list[str]) -> str:
    return f"{question}\n{' '.join(anchors)}" if anchors else question


def clip_prompt(prompt: str) -> str:
    """The prompt, stripped, without the middle of a paste longer than `MAX_PROMPT_CHARS`."""
    text = prompt.strip()
    if len(text) <= MAX_PROMPT_CHARS:
        return text
    return text[:_HEAD_CHARS] + "\n" + text[-(MAX_PROMPT_CHARS - _HEAD_CHARS) :]


def is_prose_line(line: str) -> bool:
    """Whether a line reads as a sentence a person wrote, not as pasted machine text."""
    return _is_prose(line)


def _is_prose(line: str) -> bool:
    stripped = line.strip()
    if not stripped:
        return False
    if line.startswith(("    ", "\t")) or _LOG_START.match(line) or _STACK_FRAME.match(line):
        return False
    if _COMMENT.match(line) or _CODE_START.match(line) or _CODE_END.search(line):
        return False
    if _OPERATOR.search(line) or len(_KEY_VALUE.findall(line)) >= 2:
        return False
    cjk = len(_CJK.findall(stripped))
    words = _WORD.findall(stripped)
    if cjk < 4 and len(words) < 3:
        return False
    # ASCII symbols only: CJK punctuation (，。？) is how those sentences are written
    symbols = sum(1 for c in stripped if c.isascii() and not (c.isalnum() or c in _PROSE_SYMBOLS))
    if symbols / len(stripped) > 0.08:
        return False
    # prose is mostly words: a line of numbers and ids with three words among them is not
    worded = sum(len(w) for w in words) + cjk
    return worded / len(stripped) >= 0.55


def _paragraphs(lines: list[str]) -> tuple[list[list[str]], list[str], bool]:
    """The prose paragraphs (consecutive prose lines) and the bulk lines, in order, and whether
    the prompt opens with prose."""
    paragraphs: list[list[str]] = []
    bulk: list[str] = []
    current: list[str] = []
    fenced = False
    for line in lines:
        if _FENCE.match(line):
            fenced = not fenced
            line = ""
        if not fenced and _is_prose(line):
            current.append(line.strip())
            continue
        if current:
            paragraphs.append(current)
            current = []
        if line.strip():
            bulk.append(line)
    if current:
        paragraphs.append(current)
    elif _asks_alone(lines):
        # "db/migrations" or "KUBECONFIG_STAGING?" on a line of its own after the paste: too few
        # words for prose, and still what the prompt asks about
        paragraphs.append([lines[-1].strip()])
        bulk.pop()
    first = next((line for line in lines if line.strip() and not _FENCE.match(line)), "")
    return paragraphs, bulk, _is_prose(first)


def _asks_alone(lines: list[str]) -> bool:
    """Whether the prompt ends with a short line of its own that is not machine text."""
    end = [line for line in lines if line.strip()]
    if len(end) < 2 or lines[-1].strip() != end[-1].strip() or lines[-2].strip():
        return False
    last = end[-1]
    if len(last) > OPENING_CHARS or _FENCE.match(last) or _LOG_START.match(last):
        return False
    return not (_STACK_FRAME.match(last) or _COMMENT.match(last) or last.startswith(("    ", "\t")))


def _question(paragraphs: list[list[str]], opens_with_prose: bool, tail: str) -> str:
    if not paragraphs:
        return tail  # a paste and nothing else: its end is what went wrong last
    texts = [" ".join(p) for p in paragraphs]
    # the last paragraph, then earlier ones that ask, then a short opening ("The deploy log, why
    # does it fail:"); other prose around a paste (comments, log messages that read as words)
    # would pull the question's vector away from what it asks
    order = [len(texts) - 1]
    order += [i for i in range(len(texts) - 2, -1, -1) if _QUESTION_MARK.search(texts[i])]
    if opens_with_prose and len(texts[0]) <= OPENING_CHARS and texts[0].endswith((":", "?", "：", "？")):
        order.append(0)
    chosen: list[int] = []
    room = QUESTION_CHARS
    for i in dict.fromkeys(order):
        if room <= 0:
            break
        if len(texts[i]) > room and chosen:
            continue
        chosen.append(i)
        room -= len(texts[i])
    picked = " ".join(texts[i] for i in sorted(chosen))
    return picked[-QUESTION_CHARS:] if len(picked) > QUESTION_CHARS else picked


def _anchor(chunk: str) -> str | None:
    word = chunk.strip(".:-#@+/,")
    if not is_identifier_like(word) or not any(c.isalpha() for c in word):
        return None
    if word.casefold() in _LOG_WORDS or _TIMESTAMPISH.match(word) or _HEXISH.match(word):
        return None
    if _MEASURE.match(word):
        return None
    return word


def _anchors(bulk: list[str], question: str) -> tuple[str, ...]:
    asked = question.casefold()
    found: dict[str, str] = {}
    for line in bulk:
        for chunk in _CHUNK.findall(line):
            word = _anchor(chunk)
            if word is None:
                continue
            key = word.casefold()
            if key not in found and key not in asked:
                found[key] = word
                if len(found) >= MAX_ANCHORS:
                    return tuple(found.values())
    return tuple(found.values())


def focus_prompt(prompt: str) -> FocusedPrompt:
    """The question and anchors of `prompt` (a short prompt: itself, no anchors)."""
    text = unicodedata.normalize("NFC", clip_prompt(prompt))
    if len(text) <= SHORT_PROMPT_CHARS:
        return FocusedPrompt(text, (), short=True)
    paragraphs, bulk, opens_with_prose = _paragraphs(text.splitlines())
    question = _question(paragraphs, opens_with_prose, text[-300:].strip())
    return FocusedPrompt(question, _anchors(bulk, question), short=False)
