"""The console summary of a large import (importers.file_report.ImportReport.render, max_files): the totals
in full, then only the files that were not imported cleanly, and where the whole per-file report is
(issue 29: the crawl's replay printed 50,892 lines)."""

from __future__ import annotations

from collections import Counter

from molt_society.importers.file_report import FileReport, ImportReport


def _report() -> ImportReport:
    r = ImportReport(source="crawl", society="s")
    for i in range(500):
        f = FileReport(
            file=f"post-{i:04d}.json", shape="post", read=Counter(posts=1), events=Counter(post_created=1)
        )
        if i % 100 == 7:
            f.skip("comment without an author", f"comments[{i}]")
        if i == 250:
            f.error("line 3", "truncated JSON")
        r.files.append(f)
    return r


def test_a_large_import_shows_its_totals_and_only_the_files_with_something_to_say() -> None:
    r = _report()
    text = r.render(max_files=20, full_report="/state/s/import-report.txt")
    assert "files: 500 (imported 499, partial 1)" in text
    shown = [line for line in text.splitlines() if line.startswith("post-")]
    assert shown == [
        f"post-{i:04d}.json  [post, {'partial' if i == 250 else 'imported'}]"
        for i in (7, 107, 207, 250, 307, 407)
    ]
    assert "... 494 more files not shown (494 of all 500 imported cleanly)" in text
    assert text.rstrip().endswith("the per-file report of every file: /state/s/import-report.txt")


def test_the_full_report_keeps_every_file_and_a_small_import_is_shown_whole() -> None:
    r = _report()
    assert sum(1 for line in r.render().splitlines() if line.startswith("post-")) == 500
    small = ImportReport(source="dump", society="s", files=r.files[:5])
    assert small.render(max_files=20) == small.render()
