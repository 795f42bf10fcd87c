"""Dumps as they are published: ``.tar.gz`` / ``.tgz`` / ``.tar``, ``.zip`` and single ``.gz`` files, read
without unpacking by hand.

A container is recognised by its first bytes (gzip ``1f 8b``, zip ``PK 03 04``, a tar header), never by
its name. Its regular files are copied, streamed, into a temporary folder (removed when the import has
read them) and read there like any file, reported as ``<container>/<member path>``. Members that are links,
devices or paths leaving the folder are not extracted (``tarfile``'s ``data`` filter; zip names are checked
the same way) and are reported as skipped entries. A container that would fill the disk (less than
``MIN_FREE_BYTES`` left) or that is damaged stops with an error naming it; the members read before are
kept. Containers inside containers are opened too, up to ``MAX_NESTING`` levels.
"""

from __future__ import annotations

import gzip
import shutil
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from molt_society.importers.positions import BLANK, BOM

MIN_FREE_BYTES = 1 << 30
MAX_NESTING = 3
_CHUNK = 1 << 20


class ContainerError(Exception):
    """A container that cannot be read to its end; the message says which and why."""


def kind_of(path: Path) -> str | None:
    """``"tar"``, ``"zip"``, ``"gzip"`` (a single compressed file) or None, by content."""
    try:
        with path.open("rb") as f:
            head = f.read(512)
    except OSError:
        return None
    if head.startswith(b"PK\x03\x04"):
        return "zip"
    ustar = head[257:262] == b"ustar"  # a plain tar's header, whatever its first member's name
    if not ustar and head.lstrip(BOM + BLANK)[:1] in (b"{", b"["):
        return None  # JSON (the crawl's 8,438 members: asking tarfile of each took a sixth of the import)
    try:
        if tarfile.is_tarfile(path):  # also a compressed tar
            return "tar"
    except (OSError, EOFError, tarfile.TarError, gzip.BadGzipFile):
        pass
    if head.startswith(b"\x1f\x8b"):
        return "gzip"
    return None


def _copy(src: object, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    with dest.open("wb") as out:
        while chunk := src.read(_CHUNK):  # type: ignore[attr-defined]
            out.write(chunk)
            if shutil.disk_usage(dest.parent).free < MIN_FREE_BYTES:
                raise ContainerError(
                    f"unpacking would leave less than {MIN_FREE_BYTES >> 30} GiB of disk free "
                    f"(at {dest.name})"
                )


def _safe(name: str) -> PurePosixPath | None:
    p = PurePosixPath(name)
    if p.is_absolute() or ".." in p.parts or not p.parts:
        return None
    return p


def unpack(path: Path, kind: str, into: Path) -> Iterator[tuple[str, Path | None, str]]:
    """(member name, its extracted path or None, why it was not extracted) for each member of the
    container at ``path`` (of ``kind``, from ``kind_of``), extracted under ``into``. Raises
    ``ContainerError`` when it cannot go on."""
    try:
        if kind == "gzip":
            name = path.name[:-3] if path.name.endswith(".gz") else path.name + ".out"
            with gzip.open(path, "rb") as src:
                _copy(src, into / name)
            yield name, into / name, ""
        elif kind == "zip":
            yield from _unzip(path, into)
        elif kind == "tar":
            yield from _untar(path, into)
    except (OSError, EOFError, zipfile.BadZipFile, tarfile.TarError, gzip.BadGzipFile) as exc:
        raise ContainerError(f"the {kind} container cannot be read to its end: {exc}") from None


def _unzip(path: Path, into: Path) -> Iterator[tuple[str, Path | None, str]]:
    with zipfile.ZipFile(path) as zf:
        for info in zf.infolist():
            if info.is_dir():
                continue
            safe = _safe(info.filename)
            if safe is None:
                yield info.filename, None, "member path leaves the container's folder (not extracted)"
                continue
            with zf.open(info) as src:
                _copy(src, into.joinpath(*safe.parts))
            yield str(safe), into.joinpath(*safe.parts), ""


def _untar(path: Path, into: Path) -> Iterator[tuple[str, Path | None, str]]:
    with tarfile.open(path, "r:*") as tar:
        for member in tar:
            if member.isdir():
                continue
            safe = _safe(member.name)
            if not member.isreg() or safe is None:
                why = "member path leaves the container's folder" if safe is None else "not a regular file"
                yield member.name, None, f"{why} (not extracted)"
                continue
            src = tar.extractfile(member)
            if src is None:
                yield member.name, None, "cannot be read (not extracted)"
                continue
            with src:
                _copy(src, into.joinpath(*safe.parts))
            yield str(safe), into.joinpath(*safe.parts), ""
