"""Pattern fragments shared by the rules.

Secrets reach us inside JSON strings as often as in plain text (tool results, transcripts), so
separators are matched in both spellings: a tab or its escape ``\\t``, a quote or ``\\"``.
"""

from typing import Final

# Start of a token: start of text, a non-word character, or an escape such as "\n" (tool output
# is full of "...\nghp_..." where \b would see "nghp_" as one word).
TOKEN_START: Final = r"(?:^|[^A-Za-z0-9_]|\\[nrt])"
# A blank inside a line: space, tab, or an escaped tab.
BLANK: Final = r"(?:[ \t]|\\t)"
# An opening or closing quote, possibly escaped.
QUOTE: Final = r"(?:\\?[\"'`])"
