"""Reading YAML and JSON that users hand us: no duplicate keys, no alias bombs.

* **Duplicate keys.** YAML 1.2 (section 3.2.1.3, "The content of a mapping node is an unordered
  set of key/value node pairs, with the restriction that each of the keys is unique") and RFC 8259
  section 4 ("The names within an object SHOULD be unique") both leave a repeated key an error or
  undefined; PyYAML and ``json`` silently keep the last one. Here a repeated key is a
  :class:`DuplicateKey` naming the key and both lines; every one in the document is reported
  together (:class:`DuplicateKeys`).
* **Alias bombs** ("billion laughs"): YAML anchors and aliases let a 1 KB file describe a tree of
  10^9 nodes. PyYAML builds the shared graph cheaply, but everything that walks the document
  afterwards (validation, rendering) walks the expanded tree. :func:`load_yaml` counts the nodes
  of the *expanded* document on the composed graph (memoised, so counting is linear in the file)
  and refuses more than :data:`MAX_NODES` before anything is constructed.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

import yaml

from prioritizer.yamlfile import (MAX_YAML_NODES, DuplicateKey, DuplicateKeyCheck, DuplicateKeys,
                                  size_problem)

__all__ = ["DuplicateKey", "DuplicateKeys", "MAX_NODES", "TooLarge", "load_json", "load_yaml"]

MAX_NODES = MAX_YAML_NODES
"""Largest expanded YAML document accepted (nodes: scalars, sequences, mappings). A real job
spec has a few hundred; 100,000 leaves room for generated specs and refuses bombs at once.
Counted by :func:`prioritizer.yamlfile.expanded_size`, the one counter (dlprio's files too)."""


class TooLarge(ValueError):
    """The expanded YAML document has more than :data:`MAX_NODES` nodes (an alias bomb), or a
    YAML/JSON integer has more digits than Python converts (:func:`sys.get_int_max_str_digits`,
    4300 by default: CPython's guard against quadratic-time conversion, CVE-2020-10735)."""


def _too_many_digits(text: str, where: str = "") -> TooLarge:
    return TooLarge(f"{where}a number of {len(text.lstrip('+-')):,} digits: more than the "
                    f"{sys.get_int_max_str_digits():,} this reader converts (no field takes one)")


def _json_int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise _too_many_digits(text) from None


class _Checks(DuplicateKeyCheck):
    """Refuses duplicate keys (:class:`~prioritizer.yamlfile.DuplicateKeyCheck`, dlprio's own
    reader's check), too-long integers and documents that expand past MAX_NODES (mixed into a
    loader)."""

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        try:
            return super().construct_yaml_int(node)  # type: ignore[misc, no-any-return]
        except ValueError:
            value = str(node.value).replace("_", "")
            raise _too_many_digits(value, f"line {node.start_mark.line + 1}: ") from None

    def get_single_node(self) -> yaml.Node | None:
        node = super().get_single_node()  # type: ignore[misc]  # a mixin: the loader it joins has it
        problem = None if node is None else size_problem(node)
        if problem:
            raise TooLarge(problem)
        return node


class _Loader(_Checks, yaml.SafeLoader):
    """Pure-Python safe loader with the checks (PyYAML's own messages and escapes)."""


_Loader.add_constructor("tag:yaml.org,2002:map", _Loader.construct_yaml_map)  # type: ignore[type-var]  # PyYAML's stubs type the constructor as BaseConstructor's; _Loader is a SafeLoader
_Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_yaml_int)  # type: ignore[type-var]  # PyYAML's stubs type the constructor as BaseConstructor's; _Loader is a SafeLoader

_CLoader: Any = None   # libyaml's loader class with the checks, when PyYAML has libyaml
if getattr(yaml, "CSafeLoader", None) is not None:
    class _CLoader(_Checks, yaml.CSafeLoader):  # type: ignore[no-redef]
        """libyaml's parser with the checks: about 10x faster on a valid document."""

    _CLoader.add_constructor("tag:yaml.org,2002:map", _CLoader.construct_yaml_map)
    _CLoader.add_constructor("tag:yaml.org,2002:int", _CLoader.construct_yaml_int)


def load_yaml(text: str) -> Any:
    """``yaml.safe_load`` that raises :class:`DuplicateKeys` (every repeated key) or
    :class:`TooLarge` (and PyYAML's
    own errors for syntax).

    libyaml parses first when available; on any YAML error the pure-Python parser reads the
    text again, so messages and escapes (JSON-style surrogate pairs, which libyaml refuses) are
    PyYAML's in every case."""
    loaders = [_CLoader, _Loader] if _CLoader is not None else [_Loader]
    for i, cls in enumerate(loaders):
        loader = cls(text)
        try:
            return loader.get_single_data()
        except yaml.YAMLError:
            if i + 1 == len(loaders):
                raise
        finally:
            loader.dispose()
    raise AssertionError("unreachable")


def _json_pairs(text: str, dups: list[DuplicateKey]) -> Any:
    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in pairs:
            if k in out:
                dups.append(DuplicateKey(k, _json_key_lines(text, k)))
            out[k] = v
        return out
    return hook


def _json_key_lines(text: str, key: str) -> tuple[int, ...]:
    """Lines (1-based) where ``"key":`` is written; ``json`` does not report positions of keys,
    so every place the key is written is listed."""
    pat = re.compile(re.escape(json.dumps(key)) + r"\s*:")
    return tuple(text.count("\n", 0, m.start()) + 1 for m in pat.finditer(text))


def load_json(text: str) -> Any:
    """``json.loads`` that raises :class:`DuplicateKeys` listing every repeated object key, or
    :class:`TooLarge` for an integer of more digits than Python converts."""
    dups: list[DuplicateKey] = []
    data = json.loads(text, object_pairs_hook=_json_pairs(text, dups), parse_int=_json_int)
    if dups:
        raise DuplicateKeys(dups)
    return data
