"""Java regexes, as MM2 users write them in include/exclude lists, translated to Python ``re`` patterns.

Users copy these values from working MM2 files, so the same text must select the same names here. The
Java-only syntax people write is translated (``\\Q...\\E``, ``(?<name>...)``, POSIX classes, inline flags
after the start, ...); what Python's ``re`` cannot express is refused with a :class:`PatternError` naming the
construct, never silently changed.
"""

from __future__ import annotations

import re


class PatternError(ValueError):
    """A regex in an include/exclude list is invalid, or uses Java syntax Python's ``re`` cannot honour.

    Carries ``msg``, ``pattern`` and ``pos`` like ``re.error``, plus the config ``key`` when known, so the
    config layer can point at the key and value.
    """

    def __init__(self, msg: str, pattern: str | None = None, pos: int | None = None, key: str | None = None) -> None:
        self.msg = msg
        self.pattern = pattern
        self.pos = pos
        self.key = key
        where = f" at position {pos}" if pos is not None else ""
        subject = f" in {pattern!r}" if pattern is not None else ""
        super().__init__(f"{msg}{where}{subject}")


# POSIX classes as Java defines them (US-ASCII only); values are character-class bodies.
_POSIX_CLASSES = {
    "Lower": "a-z",
    "Upper": "A-Z",
    "ASCII": r"\x00-\x7f",
    "Alpha": "a-zA-Z",
    "Digit": "0-9",
    "Alnum": "a-zA-Z0-9",
    "Punct": r"!-/:-@\[-`{-~",
    "Graph": "!-~",
    "Print": " -~",
    "Blank": r" \t",
    "Cntrl": r"\x00-\x1f\x7f",
    "XDigit": "0-9a-fA-F",
    "Space": r" \t\n\x0b\f\r",
}
_HORIZONTAL_SPACE = r" \t\xa0\u1680\u180e\u2000-\u200a\u202f\u205f\u3000"
_VERTICAL_SPACE = r"\n\x0b\f\r\x85\u2028\u2029"
_LINE_TERMINATOR = r"(?:\r\n|[\n\r\x85\u2028\u2029])"
_SCOPED_FLAGS = "imsx"
_UNSUPPORTED_FLAGS = {"d": "UNIX_LINES", "u": "UNICODE_CASE", "U": "UNICODE_CHARACTER_CLASS", "c": "CANON_EQ"}
_UNSUPPORTED_ESCAPES = {"G": "end of previous match", "X": "grapheme cluster", "b{": "grapheme boundary"}
_INLINE_FLAGS = re.compile(r"\(\?([a-zA-Z]*)(?:-([a-zA-Z]*))?([:)])")


def java_regex_to_python(pattern: str) -> str:
    """Translate a Java regex into an equivalent Python ``re`` pattern, to be compiled with ``re.ASCII``.

    Handles ``\\Q...\\E``, ``(?<name>...)`` and ``\\k<name>``, POSIX classes (``\\p{Alpha}``), ``\\z``,
    ``\\Z``, ``\\h``, ``\\v``, ``\\R``, ``\\e``, ``\\cX``, ``\\x{...}``, ``\\0`` octals, and inline flags
    such as ``(?i)`` after the start (Java applies them up to the end of the enclosing group, which joining a
    list with ``|`` makes common). Raises ``PatternError`` naming what Python cannot express: Unicode
    properties (``\\p{L}``), nested classes and ``&&``, ``\\G``, ``\\X``, flags d/u/U/c, and Python's own
    ``(?P...)`` syntax, which MM2 would reject. ``re.ASCII`` because Java's ``\\w``, ``\\d``, ``\\s``,
    ``\\b`` and ``(?i)`` are ASCII-only by default.
    """
    return _JavaRegexTranslator(pattern).translate()


class _JavaRegexTranslator:
    """One left-to-right pass over a Java pattern; the only state is the class/group nesting."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.out: list[str] = []
        # For each open group, the inline-flag scopes opened inside it, to close at its ")" and around "|".
        self.scopes: list[list[str]] = [[]]
        self.class_start: int | None = None  # index of the first class member while inside [...]

    def fail(self, msg: str, pos: int) -> PatternError:
        return PatternError(msg, self.pattern, pos)

    def translate(self) -> str:
        p, i = self.pattern, 0
        while i < len(p):
            c = p[i]
            if c == "\\":
                text, i = self.escape(i)
                self.out.append(text)
                continue
            if self.class_start is not None:
                if c == "]" and i != self.class_start:
                    self.class_start = None
                elif c == "[":
                    raise self.fail("nested character class (Java class union) is not supported", i)
                elif p.startswith("&&", i):
                    raise self.fail("character class intersection && is not supported", i)
                self.out.append(c)
                i += 1
            elif c == "[":
                self.class_start = i + 2 if p.startswith("^", i + 1) else i + 1
                self.out.append(p[i : self.class_start])
                i = self.class_start
            elif c == "(":
                i = self.open_group(i)
            elif c == ")":
                self.out.append(")" * len(self.scopes[-1]) + ")")
                if len(self.scopes) > 1:
                    self.scopes.pop()
                i += 1
            elif c == "|":
                reopen = "".join(f"(?{spec}:" for spec in self.scopes[-1])
                self.out.append(")" * len(self.scopes[-1]) + "|" + reopen)
                i += 1
            else:
                self.out.append(c)
                i += 1
        self.out.append(")" * len(self.scopes[-1]))
        return "".join(self.out)

    def open_group(self, i: int) -> int:
        p = self.pattern
        if p.startswith("(?P", i):
            raise self.fail("(?P...) is Python syntax that MM2 rejects; write (?<name>...) instead", i)
        if p.startswith("(?<", i) and not p.startswith(("(?<=", "(?<!"), i):
            self.out.append("(?P<")
            self.scopes.append([])
            return i + 3
        flags = _INLINE_FLAGS.match(p, i)
        if flags is None or (not flags.group(1) and flags.group(2) is None):
            self.out.append("(")
            self.scopes.append([])
            return i + 1
        spec = self.python_flags(flags.group(1), i)
        if flags.group(2):
            spec += "-" + self.python_flags(flags.group(2), i)
        if flags.group(3) == ":":
            self.out.append(f"(?{spec}:")
            self.scopes.append([])
        else:
            # "(?i)" inside a pattern: Python only has scoped flags there, so open a scope that
            # translate() closes at the end of the enclosing group and around each "|".
            self.out.append(f"(?{spec}:")
            self.scopes[-1].append(spec)
        return flags.end()

    def python_flags(self, flags: str, pos: int) -> str:
        for flag in flags:
            if flag in _UNSUPPORTED_FLAGS:
                raise self.fail(f"inline flag {flag} ({_UNSUPPORTED_FLAGS[flag]}) is not supported", pos)
            if flag not in _SCOPED_FLAGS:
                raise self.fail(f"unknown inline flag {flag!r}", pos)
        return "".join(dict.fromkeys(flags))

    def escape(self, i: int) -> tuple[str, int]:
        """Translate the escape at backslash ``i``; returns the Python text and the index after it."""
        p, in_class = self.pattern, self.class_start is not None
        if i + 1 >= len(p):
            raise self.fail("pattern ends with a lone backslash", i)
        e = p[i + 1]
        for construct, meaning in _UNSUPPORTED_ESCAPES.items():
            if p.startswith(construct, i + 1):
                raise self.fail(f"\\{construct} ({meaning}) is not supported", i)
        if e == "Q":
            end = p.find("\\E", i + 2)
            end = len(p) if end < 0 else end
            return re.escape(p[i + 2 : end]), min(end + 2, len(p))
        if e in "pP":
            return self.posix_class(i, e == "P", in_class)
        if e in "hv":
            body = _HORIZONTAL_SPACE if e == "h" else _VERTICAL_SPACE
            return (body if in_class else f"[{body}]"), i + 2
        if e in "HV" and not in_class:
            return f"[^{_HORIZONTAL_SPACE if e == 'H' else _VERTICAL_SPACE}]", i + 2
        if e in "HV":
            raise self.fail(f"negated \\{e} inside a character class is not supported", i)
        if e == "e":
            return r"\x1b", i + 2
        if e == "c" and i + 2 < len(p):
            return f"\\x{ord(p[i + 2]) ^ 64:02x}", i + 3
        if e == "x" and p.startswith("{", i + 2):
            code = re.match(r"\{([0-9a-fA-F]{1,6})\}", p[i + 2 :])
            if code is None or int(code.group(1), 16) > 0x10FFFF:
                raise self.fail("\\x{...} needs a hexadecimal code point", i)
            return f"\\U{int(code.group(1), 16):08x}", i + 2 + code.end()
        if e == "0":
            octal = re.match(r"[0-3][0-7]{2}|[0-7]{1,2}", p[i + 2 :])
            if octal is None:
                raise self.fail("\\0 must be followed by octal digits", i)
            return f"\\x{int(octal.group(0), 8):02x}", i + 2 + octal.end()
        if not in_class:
            if e == "z":
                return r"\Z", i + 2
            if e == "Z":
                return rf"(?={_LINE_TERMINATOR}?\Z)", i + 2
            if e == "R":
                return _LINE_TERMINATOR, i + 2
            if e == "k":
                ref = re.match(r"<([a-zA-Z][a-zA-Z0-9]*)>", p[i + 2 :])
                if ref is None:
                    raise self.fail("\\k must be followed by <name>", i)
                return f"(?P={ref.group(1)})", i + 2 + ref.end()
        return p[i : i + 2], i + 2

    def posix_class(self, i: int, negated: bool, in_class: bool) -> tuple[str, int]:
        p = self.pattern
        braced = re.match(r"\{([^}]*)\}", p[i + 2 :])
        name, end = (braced.group(1), i + 2 + braced.end()) if braced else (p[i + 2 : i + 3], i + 3)
        construct = f"\\{'P' if negated else 'p'}{{{name}}}"
        body = _POSIX_CLASSES.get(name)
        if body is None:
            raise self.fail(f"{construct} is not supported (only POSIX classes such as \\p{{Alpha}})", i)
        if in_class and negated:
            raise self.fail(f"{construct} inside a character class is not supported", i)
        return (body if in_class else f"[{'^' if negated else ''}{body}]"), end
