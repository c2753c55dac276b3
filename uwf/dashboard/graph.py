"""A workflow's graph laid out for an inline SVG: roles as boxes, transitions as arrows,
the path a run took marked. Pure: a `workflow show` definition and the roles a run
visited in, positions and classes out (the template draws them, escaped)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

START, END = "$START", "$END"
NODE_WIDTH, NODE_HEIGHT = 132, 36
COLUMN, ROW, MARGIN = 190, 64, 24
TOP = 64  # room above the boxes for the arcs of edges that skip a column


@dataclass(frozen=True)
class Node:
    name: str
    x: int
    y: int
    visited: bool

    @property
    def cx(self) -> int:
        return self.x + NODE_WIDTH // 2

    @property
    def cy(self) -> int:
        return self.y + NODE_HEIGHT // 2


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    label: str
    path: str  # the SVG path's `d`
    label_x: int
    label_y: int
    taken: bool


@dataclass(frozen=True)
class Graph:
    nodes: list[Node]
    edges: list[Edge]
    width: int
    height: int


def edges_of(definition: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(source, label, target) for every transition: a status (`_`: any) or, for a
    list-form source, its condition."""
    found = []
    for source, edges in definition.get("graph", {}).items():
        if isinstance(edges, list):
            labelled = [(entry.get("condition") or "_", entry) for entry in edges]
        else:
            labelled = list(edges.items())
        for label, target in labelled:
            role = target.get("role", END) if isinstance(target, dict) else str(target)
            found.append((str(source), str(label), str(role)))
    return found


def taken_edges(edges: Sequence[tuple[str, str, str]], visited: Sequence[tuple[str, str]]
                ) -> set[tuple[str, str, str]]:
    """The transitions a run took: from each step (role, status) to the next step's role,
    from $START to the first; the one labelled with the status where several lead on."""
    taken: set[tuple[str, str, str]] = set()
    hops = list(zip([(START, "_"), *visited], [role for role, _ in visited], strict=False))
    for (source, status), target in hops:
        candidates = [edge for edge in edges if edge[0] == source and edge[2] == target]
        exact = [edge for edge in candidates if edge[1] == status]
        taken.update(exact[:1] or candidates[:1])
    return taken


def layout(definition: dict[str, Any], visited: Sequence[tuple[str, str]]) -> Graph:
    """Columns by distance from $START (breadth first), $END last; `visited` is the run's
    steps as (role, status), ending with ($END, "") when the run reached its end."""
    edges = edges_of(definition)
    roles = [START, *definition.get("roles", {}), END]
    for source, _, target in edges:
        for name in (source, target):
            if name not in roles:
                roles.insert(-1, name)
    depth = {START: 0}
    frontier = [START]
    while frontier:
        following = []
        for source in frontier:
            for edge_source, _, target in edges:
                if edge_source == source and target not in depth and target != END:
                    depth[target] = depth[source] + 1
                    following.append(target)
        frontier = following
    last = max(depth.values(), default=0) + 1
    for name in roles:
        depth.setdefault(name, last)
    depth[END] = max(depth.values()) if depth[END] > last else last
    columns: dict[int, list[str]] = {}
    for name in roles:
        columns.setdefault(depth[name], []).append(name)
    seen = {role for role, _ in visited}
    nodes = {name: Node(name, MARGIN + column * COLUMN, TOP + row * ROW,
                        name in seen or (name == START and bool(visited)))
             for column, names in columns.items() for row, name in enumerate(names)}
    taken = taken_edges(edges, visited)
    drawn = [_edge(nodes[source], nodes[target], label, (source, label, target) in taken,
                   index) for index, (source, label, target) in enumerate(edges)]
    width = MARGIN * 2 + max(columns) * COLUMN + NODE_WIDTH
    height = TOP + MARGIN + max(len(names) for names in columns.values()) * ROW + ROW
    return Graph(list(nodes.values()), drawn, width, height)


def _edge(source: Node, target: Node, label: str, taken: bool, index: int) -> Edge:
    if target.x > source.x + COLUMN:  # forward past a column: an arc over the boxes
        x1, y1 = source.cx, source.y
        x2, y2 = target.cx, target.y
        rise = min(y1, y2) - 26 - 8 * (index % 3)
        path = f"M{x1},{y1} C{x1},{rise} {x2},{rise} {x2},{y2}"
        return Edge(source.name, target.name, label, path, (x1 + x2) // 2, rise + 14, taken)
    if target.x > source.x:  # forward: right side to left side
        x1, y1 = source.x + NODE_WIDTH, source.cy
        x2, y2 = target.x, target.cy
        path = f"M{x1},{y1} C{x1 + 40},{y1} {x2 - 40},{y2} {x2},{y2}"
        return Edge(source.name, target.name, label, path, (x1 + x2) // 2,
                    (y1 + y2) // 2 - 6, taken)
    # Backwards (a loop): under both boxes, bottom to bottom, deeper for each edge.
    x1, y1 = source.cx, source.y + NODE_HEIGHT
    x2, y2 = target.cx, target.y + NODE_HEIGHT
    dip = max(y1, y2) + 28 + 10 * (index % 3)
    path = f"M{x1},{y1} C{x1},{dip} {x2},{dip} {x2},{y2}"
    return Edge(source.name, target.name, label, path, (x1 + x2) // 2, dip - 4, taken)
