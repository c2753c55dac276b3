"""Mustache templates: checked when a workflow is registered.

Rendering (without HTML escaping) belongs to the moderator; here we only ask
whether a template parses. pystache reports mismatched closing tags but drops an
unclosed section or tag silently, so those two are checked on top of it.
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
