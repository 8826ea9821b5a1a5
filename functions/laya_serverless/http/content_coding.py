"""Request-body content codings. The official Jev client zstd-compresses bodies of 1 KiB and more
whenever zstd is importable, so `Content-Encoding: zstd` is accepted; the 2 MiB limit applies to
the decoded body too, so a small compressed bomb cannot get around it.

Exactly one frame is accepted: the official client sends one, and bytes after it (a second frame
or garbage) would otherwise be silently ignored while the first frame's JSON is answered."""

from __future__ import annotations

try:  # Python 3.14+
    from compression.zstd import ZstdDecompressor, ZstdError
except ImportError:
    from backports.zstd import ZstdDecompressor, ZstdError

from ..errors import MalformedRequest, TooLarge, UnsupportedEncoding
from ..protocol.limits import MAX_BODY_BYTES


def decode_body(raw: bytes, content_encoding: str | None) -> bytes:
    coding = (content_encoding or "").strip().lower()
    if coding in ("", "identity"):
        return raw
    if coding != "zstd":
        raise UnsupportedEncoding("unsupported Content-Encoding %r; send zstd or an uncompressed body"
                                  % content_encoding)
    decompressor = ZstdDecompressor()
    try:
        body = decompressor.decompress(raw, max_length=MAX_BODY_BYTES + 1)
    except ZstdError:
        raise MalformedRequest("request body is not valid zstd data") from None
    if len(body) > MAX_BODY_BYTES or not decompressor.eof and not decompressor.needs_input:
        raise TooLarge("request body too large")
    if not decompressor.eof:
        raise MalformedRequest("request body is not valid zstd data")
    if decompressor.unused_data:
        raise MalformedRequest("request body has data after its zstd frame; send exactly one frame")
    return bytes(body)
