"""Configuration declared once: a field names its variable, its CDK `-c` key, its type, bounds, default and doc.

The runtime's `Settings`, the CDK app's `DeployConfig`, the stack's environment wiring and
docs/configuration.md are all read off these declarations (tests/unit/laya_serverless/test_configuration.py keeps
the page whole). A parser turns text into a value or raises `Invalid` with the reason; the front
end that asked (environment or CDK context) names the variable or flag in its one-line refusal.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["MAX_KEY_CHARS", "Boolean", "Choice", "Field", "Integer", "Invalid", "Number", "Pattern", "Secret", "Text",
           "declared", "did_you_mean", "env_value", "key_problem", "nearest", "parse_environ", "setting",
           "unknown_names"]

# The one set of spellings a boolean accepts, in the environment and in CDK context alike.
TRUE_WORDS, FALSE_WORDS = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


class Invalid(ValueError):
    """A value a parser cannot take; the message is the rule it broke ("must be ..."); `suggestion`, the allowed
    value nearest to the one given, when one is near."""

    def __init__(self, message: str, suggestion: str | None = None) -> None:
        super().__init__(message)
        self.suggestion = suggestion


def nearest(word: str, choices: Iterable[str]) -> str | None:
    """The choice most like `word` by string similarity (difflib), or None when none is near."""
    found = difflib.get_close_matches(word, sorted(set(choices)), n=1, cutoff=0.6)
    return found[0] if found else None


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    near = nearest(word, choices)
    return " (did you mean %s?)" % near if near else ""


def unknown_names(given: Iterable[str], known: Iterable[str]) -> list[str]:
    """Each name of `given` that `known` does not declare, with the nearest declared one: "NAME (did you mean X?)"."""
    declared_names = set(known)
    return ["%s%s" % (name, did_you_mean(name, declared_names)) for name in sorted(set(given) - declared_names)]


@dataclass(frozen=True)
class Integer:
    lo: int
    hi: int

    def __call__(self, text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise Invalid("must be an integer %d-%d" % (self.lo, self.hi)) from None
        if not self.lo <= value <= self.hi:
            raise Invalid("must be an integer %d-%d" % (self.lo, self.hi))
        return value

    def describe(self) -> str:
        return "integer %d-%d" % (self.lo, self.hi)


@dataclass(frozen=True)
class Number:
    """A finite number in (lo, hi]; seconds and rates."""
    lo: float = 0.0
    hi: float = math.inf
    unit: str = "number"

    def __call__(self, text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not (self.lo < value <= self.hi and math.isfinite(value)):
            raise Invalid("must be a %s above %g%s" % (self.unit, self.lo,
                                                       "" if self.hi == math.inf else " and at most %g" % self.hi))
        return value

    def describe(self) -> str:
        return "%s > %g" % (self.unit, self.lo) + ("" if self.hi == math.inf else ", <= %g" % self.hi)


@dataclass(frozen=True)
class Boolean:
    def __call__(self, text: str) -> bool:
        word = text.lower()
        if word in TRUE_WORDS:
            return True
        if word in FALSE_WORDS:
            return False
        raise Invalid("must be true or false")

    def describe(self) -> str:
        return "boolean (%s | %s)" % ("/".join(TRUE_WORDS), "/".join(FALSE_WORDS))


@dataclass(frozen=True)
class Choice:
    options: tuple[str, ...]
    case_sensitive: bool = False

    def __call__(self, text: str) -> str:
        word = text if self.case_sensitive else text.lower()
        if word not in self.options:
            near = nearest(word, self.options)
            raise Invalid("must be one of %s%s" % (", ".join(self.options), did_you_mean(word, self.options)), near)
        return word

    def describe(self) -> str:
        return " | ".join(self.options)


@dataclass(frozen=True)
class Text:
    """Free text (names, paths, ARNs); `convert` may refuse or normalise it."""
    what: str = "text"
    convert: Callable[[str], Any] | None = None

    def __call__(self, text: str) -> Any:
        return self.convert(text) if self.convert else text

    def describe(self) -> str:
        return self.what


@dataclass(frozen=True)
class Pattern:
    regex: str
    what: str

    def __call__(self, text: str) -> str:
        if not re.fullmatch(self.regex, text):
            raise Invalid("must be %s" % self.what)
        return text

    def describe(self) -> str:
        return self.what


MAX_KEY_CHARS = 4096  # a longer bearer key makes every request's headers too large (431) before auth runs


def key_problem(key: str) -> str | None:
    """Why no client could send `key` as `Authorization: Bearer <key>`, or None. The one rule of the runtime's
    settings and of the Secrets Manager path (`lambda_edge.api_key`); the authorizer, which does not ship this
    package, keeps a copy that a test ties to it. HTTP header values are ASCII in practice: a non-ASCII key arrives
    latin-1-decoded at the app and UTF-8 at the authorizer, and matches at neither."""
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in key):
        return "holds a control character"
    if any(ord(ch) > 0x7E for ch in key):
        return "holds a character that is not printable ASCII, which no HTTP client sends in a header"
    if len(key) > MAX_KEY_CHARS:
        return "is %d characters long; at most %d fit in a request's headers" % (len(key), MAX_KEY_CHARS)
    return None


@dataclass(frozen=True)
class Secret:
    """A credential: taken exactly as given, and refused when it is empty, padded, or a key no client can send
    (`key_problem`): a trailing newline from `echo` or a secrets file would otherwise lock every caller out."""

    def __call__(self, text: str) -> str:
        if not text:
            raise Invalid("is set but empty; unset it to turn auth off")
        if text != text.strip():
            raise Invalid("has leading or trailing whitespace (a newline?); store the key without it")
        problem = key_problem(text)
        if problem:
            raise Invalid(problem)
        return text

    def describe(self) -> str:
        return "secret (never logged)"


Parser = Integer | Number | Boolean | Choice | Text | Pattern | Secret


@dataclass(frozen=True)
class Field:
    """One setting. `tolerant`: upstream's rule for the variable (a bad value means the default) instead of a
    refusal; kept only where upstream laya-serve reads the same variable that way."""
    env: str | None
    parse: Parser
    default: Any
    doc: str
    context: str | None = None          # the CDK app's `-c` key, where the stack exposes it
    example: str | None = None          # a good value, for refusals that say what to write instead
    tolerant: bool = False
    raw: bool = False                   # taken unstripped (credentials: padding is refused, not trimmed)
    shown_default: str | None = None    # the default as docs show it, when it is computed

    def read(self, text: str | None) -> Any:
        """The value for `text` (None or blank: the default); raises Invalid unless tolerant."""
        if text is None or (not text.strip() and not self.raw):
            return self.default
        try:
            return self.parse(text if self.raw else text.strip())
        except Invalid:
            if self.tolerant:
                return self.default
            raise

    def encode(self, value: Any) -> str:
        """The environment text that reads back as `value` (the stack's wiring)."""
        if isinstance(value, bool):
            return "1" if value else "0"
        return "%g" % value if isinstance(value, float) else str(value)


def setting(field: Field) -> Any:
    """A dataclass attribute declared by its `Field`: the default comes from the declaration."""
    if isinstance(field.default, dict):   # a fresh copy per instance, as dataclasses require
        default = field.default
        return dataclasses.field(default_factory=lambda: dict(default), metadata={"setting": field})
    return dataclasses.field(default=field.default, metadata={"setting": field})


def declared(cls: type) -> dict[str, Field]:
    """attribute name -> Field, in declaration order."""
    return {f.name: f.metadata["setting"] for f in dataclasses.fields(cls) if "setting" in f.metadata}


def parse_environ(cls: type, environ: Mapping[str, str], refuse: Callable[[str], Exception]) -> dict[str, Any]:
    """Every declared field of `cls` read from `environ`; the first bad value is refused in one line naming it."""
    values: dict[str, Any] = {}
    for name, field in declared(cls).items():
        if field.env is None:
            continue
        text = environ.get(field.env)
        try:
            values[name] = field.read(text)
        except Invalid as exc:
            shown = "(value hidden)" if isinstance(field.parse, Secret) else repr(text)
            raise refuse("invalid %s %s: %s" % (field.env, shown, exc)) from None
    return values


def env_value(fields: Iterable[tuple[Field, Any]]) -> dict[str, str]:
    """The environment that a function needs so that its Settings read these values back."""
    return {field.env: field.encode(value) for field, value in fields if field.env and value is not None}
