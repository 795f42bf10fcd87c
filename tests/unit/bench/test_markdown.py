"""``bench.markdown.write_section``: a benchmark's section replaced in place, the text around it kept."""

from __future__ import annotations

from pathlib import Path

from molt_society.bench.markdown import write_section

BEGIN, END = "<!-- x:begin -->", "<!-- x:end -->"


def test_a_section_is_replaced_and_the_text_after_it_keeps_its_line(tmp_path: Path) -> None:
    doc = tmp_path / "B.md"
    doc.write_text(f"# B\n\n{BEGIN}\nold\n{END}\n\n**after**\n")
    for block in (f"{BEGIN}\nnew\n{END}", f"{BEGIN}\nnew\n{END}\n"):  # with or without its last newline
        write_section(doc, block, BEGIN, END)
        assert doc.read_text() == f"# B\n\n{BEGIN}\nnew\n{END}\n\n**after**\n"


def test_a_missing_section_is_added_at_the_end(tmp_path: Path) -> None:
    doc = tmp_path / "B.md"
    doc.write_text("# B\n\ntext\n")
    write_section(doc, f"{BEGIN}\nnew\n{END}", BEGIN, END)
    assert doc.read_text() == f"# B\n\ntext\n\n{BEGIN}\nnew\n{END}\n"
