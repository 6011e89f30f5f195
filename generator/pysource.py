"""Python source text: a file's bytes decoded as Python decodes them. Apart from the extractor,
so that reading the server arguments or a curated entry's code does not import libcst (0.6 s)."""

from __future__ import annotations

import io
import tokenize


class UnparsableFile(Exception):
    """The file is not Python the extractor can read; the message says why."""


def decode_source(data: bytes) -> str:
    """A Python file's text, honouring a BOM and a coding cookie as Python does."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        return data.decode(encoding)
    except (SyntaxError, LookupError, UnicodeDecodeError) as error:
        raise UnparsableFile(f"cannot decode: {error}") from None
