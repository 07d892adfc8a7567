"""Helpers shared by the tests."""

import re

# -- printed output, as shown in the docs and saved in the notebooks -------------------------------
NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")
ROUND_OFF = 1e-12  # printed values below this are round-off: they only have to stay below it
SMALL = 1e-6  # errors at the integrator's tolerance: the same order of magnitude (within 10x)
RTOL = 1e-2  # printed values of the problem's own scale agree to 1 % across machines


def output_mismatches(got: str, shown: str) -> list[str]:
    """What differs between the output a snippet printed (`got`) and the output shown for it
    (`shown`): the same words and punctuation (whitespace aside, as NumPy pads arrays) and the
    same numbers, where numbers agree to `RTOL` relative, or are both round-off
    (`|x| < ROUND_OFF`), or are both small errors (`|x| < SMALL`) of the same sign within a factor
    of 10 (an integration error moves with the machine's rounding). Empty when they agree."""
    words_got, words_shown = (re.sub(r"\s+", "", NUMBER.sub("#", s)) for s in (got, shown))
    if words_got != words_shown:
        return [f"text differs:\n  printed: {got.strip()!r}\n  shown:   {shown.strip()!r}"]
    out = []
    for a, b in zip(NUMBER.findall(got), NUMBER.findall(shown), strict=True):
        x, y = float(a), float(b)
        if a == b or (abs(x) < ROUND_OFF and abs(y) < ROUND_OFF):
            continue
        if abs(x) < SMALL and abs(y) < SMALL and x * y > 0 and max(x / y, y / x) <= 10:
            continue
        if abs(x - y) > RTOL * max(abs(x), abs(y)):
            out.append(f"printed {a}, shown {b}")
    return out
