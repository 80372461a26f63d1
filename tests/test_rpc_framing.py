from hypothesis import given
from hypothesis import strategies as st

from pi_memory_bridge.rpc.framing import Line, LineFramer, OversizedLine


def frames(chunks: list[bytes], cap: int = 100) -> list[object]:
    framer = LineFramer(cap)
    out: list[object] = []
    for c in chunks:
        out.extend(framer.feed(c))
    out.extend(framer.finish())
    return out


def test_splits_on_newline_only_not_unicode_separators() -> None:
    data = '{"a":"x\u2028y\u2029z"}\n{"b":1}\n'.encode()
    assert frames([data], cap=1000) == [Line('{"a":"x\u2028y\u2029z"}'.encode()), Line(b'{"b":1}')]


def test_lines_split_across_chunks_and_crlf_tolerated() -> None:
    assert frames([b'{"a"', b":1}\r", b"\n\n  \n{", b'"b":2}\n']) == [Line(b'{"a":1}'), Line(b'{"b":2}')]


def test_oversized_line_is_reported_once_and_the_next_line_survives() -> None:
    big = b"x" * 250
    out = frames([big[:120], big[120:], b"\n", b'{"ok":1}\n'], cap=100)
    assert len(out) == 2
    assert isinstance(out[0], OversizedLine) and out[0].size == 250
    assert out[1] == Line(b'{"ok":1}')


def test_oversized_in_one_chunk() -> None:
    out = frames([b"y" * 101 + b'\n{"z":0}\n'], cap=100)
    assert isinstance(out[0], OversizedLine)
    assert out[1] == Line(b'{"z":0}')


def test_final_line_without_newline_at_eof() -> None:
    assert frames([b'{"a":1}\n{"b":2}']) == [Line(b'{"a":1}'), Line(b'{"b":2}')]


@given(st.lists(st.binary(max_size=40).filter(lambda b: b"\n" not in b and b.strip()), max_size=8), st.data())
def test_any_chunking_yields_the_same_lines(lines: list[bytes], data: st.DataObject) -> None:
    payload = b"".join(line + b"\n" for line in lines)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(payload)), max_size=6)))
    chunks = [payload[i:j] for i, j in zip([0, *cuts], [*cuts, len(payload)], strict=True)]
    expected = [Line(line[:-1] if line.endswith(b"\r") else line) for line in lines]
    assert frames(chunks, cap=1000) == expected
