"""Checks of the Python API's arguments before they reach the extension module:
a wrong type is a TypeError and a number out of range an InvalidInputError,
each naming the argument, instead of pybind11's "incompatible function
arguments" listing C++ signatures (fuzz/python_api_fuzz.py finds those)."""

import operator

from ._kiln import InvalidInputError

INT32_MAX = 2 ** 31 - 1


def text(name, value, optional=True):
    """A str argument (None allowed when optional: returns "")."""
    if value is None and optional:
        return ""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a string{' or None' if optional else ''}, "
                        f"not {type(value).__name__}")
    return value


def flag(name, value):
    """A bool argument (numpy's bools and the ints 0 and 1 too)."""
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        return bool(value)
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise TypeError(f"{name} must be True or False, not {type(value).__name__} {value!r}")


def integer(name, value, lo=-INT32_MAX - 1, hi=INT32_MAX):
    """An int argument (numpy's ints too; not bool, not float) in [lo, hi]."""
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an integer, not bool")
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an integer, not {type(value).__name__}") from None
    if not lo <= v <= hi:
        raise InvalidInputError(f"{name} must be from {lo} to {hi}, not {v}")
    return v
