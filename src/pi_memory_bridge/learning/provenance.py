"""Which parts of a user's message are the user's own words, and which were pasted into it.

A memory poisoned through learning nearly always arrives in text the user did not write: a README,
a web page, an issue comment, a log or a tool's output pasted into the message, or a line that
forges another speaker ("SYSTEM: ..."). Learning takes rules and preferences only from the
user's own words, so it needs to tell them apart. There is no marker for a paste in Pi's session
file, so this reads the shape of the text, and when in doubt calls it pasted: a memory drawn from
text wrongly called pasted is only held for review (`postcheck`), while pasted text wrongly
called the user's own could become a rule the agent follows.

Pasted, line by line:
- fenced code (``` or ~~~), XML-like blocks (<doc> ... </doc>), triple-quoted blocks, PEM-like
  BEGIN/END blocks, quoted lines (> ...);
- a line that speaks as someone else (system:, assistant:, [INST], <|im_start|>, 系统：) and the
  rest of its paragraph; from an inline SYSTEM:/ASSISTANT: marker to the end of its line;
- terminal and log output (a shell prompt, a traceback, log levels, timestamps) and the rest of
  its paragraph;
- everything after a Markdown heading, and after a line that introduces something with a colon
  ("Here is the README:");
- any paragraph of four lines or more (people type long lines; documents are hard-wrapped);
but a short last paragraph after the paste, in the first person ("I'd rather keep tabs"), is the
user's own again: that is where people say what they want of what they pasted;
- quoted spans of 20 characters or more inside a line ("...", “...”, 「...」).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_FENCE = re.compile(r"^\s*(```|~~~)")
_OPEN_TAG = re.compile(r"^\s*<([A-Za-z][\w:.-]*)(\s[^>]*)?>\s*$")
_INLINE_TAG_BLOCK = re.compile(r"<([A-Za-z][\w:.-]*)(\s[^>]*)?>.*?</\1\s*>", re.DOTALL)
_TRIPLE_QUOTE = re.compile(r"^\s*(\"\"\"|''')")
_BEGIN = re.compile(r"^\s*-{3,}\s*BEGIN\b", re.IGNORECASE)
_END = re.compile(r"^\s*-{3,}\s*END\b", re.IGNORECASE)
_QUOTED_LINE = re.compile(r"^\s*>")
_ROLE_WORDS = (
    r"system|assistant|user|human|ai|bot|tool|tool[ _]output|function|developer|instructions?|"
    r"note to (?:the )?(?:ai|assistant|agent|model)|系统|助手|用户|指令|系统提示"
)
_ROLE_LINE = re.compile(
    rf"^\s*[\[<(#*【]*\s*(?:{_ROLE_WORDS})\s*[\]>)*】]*\s*[:：]|^\s*[\[<(【]\s*(?:{_ROLE_WORDS})\s*[\]>)】]",
    re.IGNORECASE,
)
_CONTROL_TOKEN = re.compile(r"<\|[a-z_]+\|>|\[/?INST\]|<</?SYS>>|</?(?:system|assistant)>", re.IGNORECASE)
_INLINE_ROLE = re.compile(
    r"(?:\b(?:SYSTEM|ASSISTANT|DEVELOPER|INSTRUCTIONS?)\s*[:：]|【系统】|系统[:：]|\[SYSTEM\])"
)
_TERMINAL = re.compile(
    r"^\s*(?:\$ |% |>>> |PS [A-Za-z]:\\|[A-Za-z]:\\>|root@|[\w.-]+@[\w.-]+:\S*[$#] )"
    r"|^\s*(?:Traceback \(most recent call last\)|File \"|at [\w.$<>]+\(|npm (?:ERR|WARN)!|"
    r"error(?:\[\w+\])?:|warning:|fatal:|panic:|Exception\b|\[(?:INFO|WARN|WARNING|ERROR|DEBUG|TRACE)\]|"
    r"(?:INFO|WARN|WARNING|ERROR|DEBUG|TRACE)\s|\d{4}-\d\d-\d\d[ T]\d\d:\d\d)",
)
_HEADING = re.compile(r"^\s*#{1,6}\s+\S")
_INTRO = re.compile(r"[:：]\s*$")
_QUOTED_SPAN = re.compile(r"\"[^\"\n]{20,}\"|“[^”\n]{20,}”|「[^」\n]{20,}」|『[^』\n]{20,}』|'[^'\n]{20,}'")
_LONG_PARAGRAPH_LINES = 4


@dataclass(frozen=True, slots=True)
class Provenance:
    own: str  # the user's own words
    pasted: str  # what the user pasted or quoted, or what speaks as someone else


def _paragraphs(lines: list[str]) -> list[list[int]]:
    groups: list[list[int]] = []
    current: list[int] = []
    for i, line in enumerate(lines):
        if line.strip():
            current.append(i)
        elif current:
            groups.append(current)
            current = []
    if current:
        groups.append(current)
    return groups


def _block_lines(lines: list[str]) -> set[int]:
    """Lines inside fences, tag blocks, triple quotes and BEGIN/END blocks (markers included)."""
    pasted: set[int] = set()
    closing: re.Pattern[str] | None = None
    for i, line in enumerate(lines):
        if closing is not None:
            pasted.add(i)
            if closing.search(line):
                closing = None
            continue
        if (fence := _FENCE.match(line)) is not None:
            closing = re.compile(rf"^\s*{re.escape(fence.group(1))}")
        elif (tag := _OPEN_TAG.match(line)) is not None:
            closing = re.compile(rf"</{re.escape(tag.group(1))}\s*>")
        elif (quote := _TRIPLE_QUOTE.match(line)) is not None:
            if line.count(quote.group(1)) >= 2:  # opened and closed on one line
                pasted.add(i)
                continue
            closing = re.compile(re.escape(quote.group(1)))
        elif _BEGIN.match(line):
            closing = _END
        else:
            continue
        pasted.add(i)
    return pasted


_FIRST_PERSON = re.compile(r"\b(?:I|I'm|I'd|I'll|me|my|mine|we|our|us)\b|我|咱", re.IGNORECASE)
_CLOSING_MAX_LINES = 2
_CLOSING_MAX_CHARS = 300


def _closing_words(lines: list[str], pasted: set[int], soft: set[int]) -> list[int]:
    """The lines of a short first-person last paragraph that follows a blank line or a closed
    block, when only their position after a paste made them pasted."""
    tail: list[int] = []
    for i in range(len(lines) - 1, -1, -1):
        if not lines[i].strip():
            break
        if i not in soft:
            break
        tail.append(i)
    if not tail or len(tail) > _CLOSING_MAX_LINES:
        return []
    start = min(tail)
    after_break = start > 0 and (
        not lines[start - 1].strip() or (start - 1 in pasted and start - 1 not in soft)
    )
    text = " ".join(lines[i] for i in tail)
    if not after_break or len(text) > _CLOSING_MAX_CHARS or not _FIRST_PERSON.search(text):
        return []
    return tail


def split_user_text(text: str) -> Provenance:
    """The user's message split into their own words and what was pasted (both keep line order)."""
    text = _INLINE_TAG_BLOCK.sub(lambda m: "\n" + m.group(0) + "\n", text)
    lines = text.splitlines()
    pasted = _block_lines(lines)
    soft: set[int] = set()  # pasted only for following an introduction or a heading
    rest_pasted = False
    for group in _paragraphs(lines):
        paragraph_pasted = sum(1 for i in group if i not in pasted) >= _LONG_PARAGRAPH_LINES
        for i in group:
            line = lines[i]
            if i in pasted or paragraph_pasted:
                pasted.add(i)
                continue
            if rest_pasted:
                pasted.add(i)
                if not (_ROLE_LINE.match(line) or _CONTROL_TOKEN.search(line) or _QUOTED_LINE.match(line)):
                    soft.add(i)
                continue
            if _QUOTED_LINE.match(line):
                pasted.add(i)
            elif _ROLE_LINE.match(line) or _CONTROL_TOKEN.search(line) or _TERMINAL.match(line):
                pasted.add(i)
                paragraph_pasted = True  # the rest of the paragraph belongs to it
            elif _HEADING.match(line):
                pasted.add(i)
                rest_pasted = True
            elif _INTRO.search(line) and i + 1 < len(lines):
                rest_pasted = True  # the introducing line is the user's; what follows is not
    for i in _closing_words(lines, pasted, soft):
        pasted.discard(i)
    own: list[str] = []
    quoted: list[str] = []
    for i, line in enumerate(lines):
        if i in pasted:
            quoted.append(line)
            continue
        inline = _INLINE_ROLE.search(line)
        if inline is not None:
            quoted.append(line[inline.start() :])
            line = line[: inline.start()]
        for span in _QUOTED_SPAN.findall(line):
            quoted.append(span)
        own.append(_QUOTED_SPAN.sub(" ", line))
    return Provenance("\n".join(own).strip(), "\n".join(quoted).strip())
