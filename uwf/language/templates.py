"""Mustache templates: checked when a workflow is registered.

Rendering (without HTML escaping) belongs to the moderator; here we ask whether a
template parses and which names it reads. pystache reports mismatched closing
tags but drops an unclosed section or tag silently, so those two are checked on
top of it.
"""

from __future__ import annotations

import re

_TAG = re.compile(r"\{\{(\{?)\s*([#^/!>&=]?)\s*(.*?)\s*\}?\}\}", re.DOTALL)


def template_problem(template: str) -> str | None:
    """Why `template` is not a valid Mustache template, or None."""
    import pystache.parser

    try:
        pystache.parser.parse(template)
    except Exception as exc:  # pystache raises ParsingError and, on odd delimiters, others
        return f"template does not parse: {exc}"
    if "{{=" in template:
        return None  # custom delimiters: trust pystache's parse above
    open_sections: list[str] = []
    for match in _TAG.finditer(template):
        kind, name = match.group(2), match.group(3)
        if kind in ("#", "^"):
            open_sections.append(name)
        elif kind == "/" and open_sections:
            open_sections.pop()
    if open_sections:
        return f"template does not parse: section {{{{#{open_sections[-1]}}}}} is never closed"
    if template.count("{{") != len(_TAG.findall(template)):
        return "template does not parse: a tag opened with {{ is never closed with }}"
    return None


def template_names(template: str) -> set[str]:
    """The names a parsing template reads from the top of its scope.

    Variables (`{{x}}`, `{{{x}}}`, `{{&x}}`), sections (`{{#x}}`) and inverted
    sections (`{{^x}}`) count; a dotted name by its first segment (`{{plan.title}}`
    reads `plan`). Inside an inverted section the scope is unchanged, so its names
    count too; inside a section they may be fields of the section's value, so they
    do not. `{{.}}`, comments and partials read no name.
    """
    import pystache.parser

    names: set[str] = set()
    # pystache's parse tree (its `_parse_tree` and node classes) is the only parser
    # that knows custom delimiters; a tree without them reads as no names.
    pending = [pystache.parser.parse(template)]
    while pending:
        for node in getattr(pending.pop(), "_parse_tree", []):
            kind = type(node).__name__
            key = getattr(node, "key", None)
            if kind not in _READS or not isinstance(key, str):
                continue
            if name := key.split(".", 1)[0].strip():
                names.add(name)
            if kind == "_InvertedNode":
                pending.append(node.parsed_section)
    return names


_READS = {"_EscapeNode", "_LiteralNode", "_SectionNode", "_InvertedNode"}
