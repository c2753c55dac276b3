"""A view's search text is stored with A-Z lowercased and nothing else (SPEC §5: search
is ASCII case-insensitive): `ascii_lower` takes `str.lower` where the text is all ASCII,
the table (`ASCII_LOWER`) elsewhere, and both give what the table gives."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from uwf.engine.viewspec import ASCII_LOWER, ascii_lower


def test_only_ascii_letters_are_lowered() -> None:
    assert ascii_lower("Run ABC-12\nÄÖ ÉTÉ İ ǅ") == "run abc-12\nÄÖ ÉtÉ İ ǅ"
    assert ascii_lower("SOLVE-Issue /Work/Repos") == "solve-issue /work/repos"


@given(st.text())
def test_the_same_as_the_table(text: str) -> None:
    assert ascii_lower(text) == text.translate(ASCII_LOWER)
