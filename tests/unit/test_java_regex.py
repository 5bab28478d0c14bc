"""Java regexes from MM2 include/exclude lists keep their Java meaning in Python, or are refused by name."""

from __future__ import annotations

import re

import pytest

from mm2py.mirror import filters
from mm2py.mirror.java_regex import PatternError, java_regex_to_python


def compile_java(java: str) -> re.Pattern[str]:
    return re.compile(java_regex_to_python(java), re.ASCII)


@pytest.mark.parametrize(
    ("java", "matches", "rejects"),
    [
        (r"\Qorders.v1\E.*", ["orders.v1", "orders.v1-x"], ["ordersXv1"]),
        (r"(?<env>prod|dev)-\k<env>", ["prod-prod"], ["prod-dev"]),
        (r"\p{Alpha}+\p{Digit}", ["abc1"], ["abc", "ab-1"]),
        (r"[\p{Lower}_]+", ["a_b"], ["A"]),
        (r"\P{Digit}+", ["ab"], ["a1"]),
        (r"orders\z", ["orders"], ["orders\n"]),
        (r"orders\Z", ["orders"], ["orders!"]),
        (r"a\hb", ["a b", "a\tb"], ["ab"]),
        (r"(?i)orders", ["ORDERS"], ["other"]),
        (r"x(?i)b|c", ["xB", "C"], ["XB"]),
        (r"(a(?i)b|c)d", ["aBd", "Cd"], ["aBD"]),
        (r"(?i:a)b", ["Ab"], ["AB"]),
        (r"\x{41}\0102\cA", ["AB\x01"], ["AB"]),
        (r"\w+", ["abc_1"], ["é"]),
        (r"(?<=a)b|ab", ["ab"], ["b"]),
    ],
)
def test_java_regex_constructs_keep_their_java_meaning(java: str, matches: list[str], rejects: list[str]) -> None:
    pattern = compile_java(java)
    for name in matches:
        assert pattern.fullmatch(name), (java, name)
    for name in rejects:
        assert not pattern.fullmatch(name), (java, name)


@pytest.mark.parametrize(
    ("java", "named"),
    [
        (r"\p{L}+", r"\p{L}"),
        (r"\p{IsLatin}", r"\p{IsLatin}"),
        ("[a-z&&[^e]]", "intersection"),
        ("[a-c[x-z]]", "nested character class"),
        (r"\Gabc", r"\G"),
        (r"\X", r"\X"),
        ("(?u)abc", "UNICODE_CASE"),
        ("(?P<name>x)", "(?<name>...)"),
    ],
)
def test_constructs_python_cannot_honour_are_refused_by_name(java: str, named: str) -> None:
    with pytest.raises(PatternError) as caught:
        java_regex_to_python(java)
    assert named in str(caught.value)
    assert caught.value.pattern == java


def test_translation_leaves_plain_patterns_unchanged() -> None:
    assert java_regex_to_python(r".*[\-\.]internal|.*\.replica|__.*") == r".*[\-\.]internal|.*\.replica|__.*"


def test_filters_raise_and_translate_with_the_same_names() -> None:
    # The config layer catches mm2py.mirror.filters.PatternError for errors raised here.
    assert filters.PatternError is PatternError
    assert filters.java_regex_to_python is java_regex_to_python
