"""XML parsed without entities, DTDs or network: the reader of untrusted article XML.

Articles downloaded in bulk (PubMed Central packages, publishers' feeds) are untrusted input.
An XML parser that honours entity declarations can be made to read local files into the text
(XXE: ``<!ENTITY x SYSTEM "file:///home/me/.ssh/id_rsa">``), fetch URLs, or expand a few
hundred bytes into gigabytes (billion laughs, quadratic blowup). JATS articles need none of
this: PubMed Central writes characters as numeric references (``&#x000e9;``), and the
``<!DOCTYPE article PUBLIC ... "JATS-archivearticle1.dtd">`` line names a DTD that is never
read.

:func:`parse_xml` builds an :class:`xml.etree.ElementTree.Element` tree with the standard
library's expat parser, set up so that

* any entity declaration (internal or external, general or parameter: ``<!ENTITY``) stops the
  parse with an error naming the file, before anything is expanded;
* no external entity or DTD is ever loaded (parameter-entity parsing off, the external-entity
  handler refuses);
* the input is bounded (:data:`MAX_XML_BYTES`) and elements nest at most :data:`MAX_DEPTH`
  deep;
* element and attribute names keep their namespace as ``{uri}local`` (``xlink:href`` is
  ``{http://www.w3.org/1999/xlink}href``), as in ElementTree.

A reference to an entity declared nowhere (``&nbsp;`` in a file whose DTD is not read) is
dropped from the text and reported (``skipped``), never fetched.

This is what ``defusedxml`` does with the same parser (its ``forbid_entities`` and
``forbid_external``); doing it here keeps wsikit without another dependency.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from xml.parsers import expat

from ..errors import EvidenceError

#: The element type of a parsed tree (callers take it from here, never from an XML parser).
Element = ET.Element

__all__: list[str] = []

#: Largest XML file read (bytes); a JATS article is rarely over a few megabytes.
MAX_XML_BYTES = 64 * 2**20
#: Deepest element nesting accepted.
MAX_DEPTH = 512


class _Refused(Exception):
    """Raised inside an expat handler to stop the parse."""


@dataclass(frozen=True)
class ParsedXml:
    """A parsed document: its ``root`` element and the names of entities that were
    referenced but declared nowhere (``skipped``, dropped from the text)."""

    root: ET.Element
    skipped: tuple[str, ...] = ()


def _qname(name: str) -> str:
    uri, sep, local = name.rpartition(" ")
    return f"{{{uri}}}{local}" if sep else name


def parse_xml(data: bytes, *, name: str | os.PathLike[str]) -> ParsedXml:
    """Parse ``data`` (the bytes of the file ``name``, used in messages) safely.

    Raises
    ------
    EvidenceError
        The document declares an entity (XXE, billion laughs, quadratic blowup), is too
        large or too deeply nested, or is not well-formed XML (with the line and column).
    """
    if len(data) > MAX_XML_BYTES:
        raise EvidenceError(f"{name}: {len(data)} bytes of XML is more than the "
                            f"{MAX_XML_BYTES // 2**20} MiB an article may have; is it one "
                            "article?")
    builder = ET.TreeBuilder()
    parser = expat.ParserCreate(namespace_separator=" ")
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    parser.buffer_text = True
    depth = 0
    skipped: list[str] = []

    def entity_decl(entity: str, is_parameter: bool, *_: object) -> None:
        kind = "parameter entity" if is_parameter else "entity"
        raise _Refused(f"it declares the {kind} {entity!r} (<!ENTITY ...>); entities are "
                       "refused, since they can read local files or expand without bound "
                       "(XXE, billion laughs)")

    def unparsed_decl(entity: str, *_: object) -> None:
        raise _Refused(f"it declares the unparsed entity {entity!r}; entities are refused")

    def external_ref(*_: object) -> int:
        raise _Refused("it refers to an external entity or DTD; nothing is loaded from "
                       "outside the file")

    def start(tag: str, attrs: dict[str, str]) -> None:
        nonlocal depth
        depth += 1
        if depth > MAX_DEPTH:
            raise _Refused(f"elements nest deeper than {MAX_DEPTH} levels")
        builder.start(_qname(tag), {_qname(k): v for k, v in attrs.items()})

    def end(tag: str) -> None:
        nonlocal depth
        depth -= 1
        builder.end(_qname(tag))

    parser.EntityDeclHandler = entity_decl
    parser.UnparsedEntityDeclHandler = unparsed_decl
    parser.ExternalEntityRefHandler = external_ref
    parser.SkippedEntityHandler = lambda entity, is_param: skipped.append(entity)
    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = builder.data
    try:
        parser.Parse(data, True)
    except _Refused as exc:
        raise EvidenceError(f"{name}: unsafe XML refused at line {parser.CurrentLineNumber}: "
                            f"{exc}. Use the article as PubMed Central or the publisher "
                            "distributes it") from exc
    except expat.ExpatError as exc:
        raise EvidenceError(f"{name}: not well-formed XML ({expat.errors.messages[exc.code]} "
                            f"at line {exc.lineno}, column {exc.offset}); the file is damaged "
                            "or not XML: download it again") from exc
    return ParsedXml(builder.close(), tuple(dict.fromkeys(skipped)))


def read_xml(path: str | os.PathLike[str]) -> ParsedXml:
    """Read and :func:`parse_xml` the file ``path`` (its size checked before reading).

    Raises
    ------
    EvidenceError
        Missing or unreadable file, or as :func:`parse_xml`.
    """
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > MAX_XML_BYTES:
            raise EvidenceError(f"{path}: {size} bytes of XML is more than the "
                                f"{MAX_XML_BYTES // 2**20} MiB an article may have; is it one "
                                "article?")
        data = path.read_bytes()
    except FileNotFoundError as exc:
        raise EvidenceError(f"XML file {path} does not exist; check the path") from exc
    except OSError as exc:
        raise EvidenceError(f"XML file {path} cannot be read ({exc.strerror or exc})") from exc
    return parse_xml(data, name=path)
