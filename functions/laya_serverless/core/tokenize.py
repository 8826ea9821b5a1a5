"""Tokenization with the `tokenizers` library directly, matching upstream's HF fast tokenizer.

Upstream encodes every text without special tokens and with no truncation or padding except
the 48-token option cap, which keeps the first tokens; slicing the full encoding is the same.
"""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path
from threading import Lock

from tokenizers import Tokenizer

from ..artifact.layout import TOKENIZER_FILE
from ..errors import ArtifactError


class TextEncoder:
    """Encodes text to ids; question-side texts go through a bounded LRU cache.

    Question heads and option texts repeat across requests (a deployment asks the same
    questions about many states), so caching them by exact text saves most tokenization work.
    States are never cached: they are unique and may be large.
    """

    def __init__(self, tokenizer: Tokenizer, cache_size: int = 4096) -> None:
        tokenizer.no_truncation()
        tokenizer.no_padding()
        self._tokenizer = tokenizer
        self._cache: OrderedDict[str, tuple[int, ...]] = OrderedDict()
        self._cache_size = cache_size
        self._lock = Lock()

    @classmethod
    def from_artifact(cls, artifact_dir: Path, cache_size: int = 4096, file: Path | None = None) -> TextEncoder:
        """The tokenizer of `artifact_dir`, read from `file` when given (a verified handle's path)."""
        path = file or Path(artifact_dir) / TOKENIZER_FILE
        if not path.is_file():
            raise ArtifactError("%s is missing from the artifact %s" % (TOKENIZER_FILE, artifact_dir))
        try:
            tokenizer = Tokenizer.from_file(str(path))
        except Exception as exc:  # the Rust side raises plain Exception subclasses
            raise ArtifactError("%s cannot be parsed: %s" % (path, exc)) from exc
        return cls(tokenizer, cache_size)

    def encode(self, text: str) -> list[int]:
        return self._tokenizer.encode(text, add_special_tokens=False).ids

    def encode_cached(self, text: str) -> tuple[int, ...]:
        with self._lock:
            hit = self._cache.get(text)
            if hit is not None:
                self._cache.move_to_end(text)
                return hit
        ids = tuple(self.encode(text))
        with self._lock:
            self._cache[text] = ids
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return ids

    @property
    def cached_texts(self) -> int:
        return len(self._cache)
