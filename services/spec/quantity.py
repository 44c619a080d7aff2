"""Kubernetes resource quantities (``96``, ``95500m``, ``1056763Ki``, ``1e3``) as plain numbers: one parser for
the node-state watcher reading node capacity and for kubesim validating and admitting pods."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$")
_SUFFIXES: dict[str, Decimal] = {
    "": Decimal(1), "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"),
    "k": Decimal(10) ** 3, "M": Decimal(10) ** 6, "G": Decimal(10) ** 9, "T": Decimal(10) ** 12,
    "P": Decimal(10) ** 15, "E": Decimal(10) ** 18,
    "Ki": Decimal(2) ** 10, "Mi": Decimal(2) ** 20, "Gi": Decimal(2) ** 30, "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50, "Ei": Decimal(2) ** 60,
}
_MIB = Decimal(2) ** 20


def parse_quantity(value: object) -> Decimal:
    """The quantity's value in base units; raises ``ValueError`` when it is not a quantity."""
    if isinstance(value, int | float):
        return Decimal(str(value))
    match = _QUANTITY.match(str(value).strip())
    if match is None:
        raise ValueError(f"quantities must match the regular expression: {value!r}")  # the API server's words
    try:
        return Decimal(match.group(1)) * _SUFFIXES[match.group(2) or ""]
    except InvalidOperation as exc:
        raise ValueError(f"invalid quantity {value!r}") from exc


def millicores(value: object) -> int:
    """A CPU quantity in millicores (rounded down)."""
    return int(parse_quantity(value) * 1000)


def mebibytes(value: object) -> int:
    """A memory quantity in MiB (rounded down)."""
    return int(parse_quantity(value) / _MIB)


def whole(value: object) -> int:
    """A countable quantity (GPUs, pods) as an integer (rounded down)."""
    return int(parse_quantity(value))
