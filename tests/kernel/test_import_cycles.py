"""No import cycle inside the kernel, nor inside the packages moved out of it.

The import graph of package ``vally`` (and of ``vally_compare`` and ``vally_experiment``)
is built with grimp (module-level and function-level imports; ``if TYPE_CHECKING:`` imports
are left out, since they never run), and its strongly connected components between
modules are found with Tarjan's algorithm. A component of more than one module is a cycle,
and the test fails on any, in the kernel as in ``vally_compare`` and ``vally_experiment``.
"""

from __future__ import annotations

import grimp
import pytest


def _components(graph: grimp.ImportGraph) -> list[set[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    modules = sorted(graph.modules)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[set[str]] = []
    counter = 0
    for root in modules:
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append(
                        (child, iter(sorted(graph.find_modules_directly_imported_by(child))))
                    )
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(component)
    return found


def test_the_kernel_has_no_import_cycle() -> None:
    graph = grimp.build_graph("vally", exclude_type_checking_imports=True)
    cycles = _components(graph)
    assert not cycles, "import cycles in the kernel:\n" + "\n".join(
        " <-> ".join(sorted(c)) for c in cycles
    )


@pytest.mark.parametrize("package", ["vally_compare", "vally_experiment"])
def test_the_moved_packages_have_no_import_cycle(package: str) -> None:
    graph = grimp.build_graph(package, exclude_type_checking_imports=True)
    cycles = _components(graph)
    assert not cycles, f"import cycles in {package}:\n" + "\n".join(
        " <-> ".join(sorted(c)) for c in cycles
    )


def test_the_tarjan_search_finds_a_cycle() -> None:
    class Graph:
        modules = {"a", "b", "c", "d"}
        edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}

        def find_modules_directly_imported_by(self, module: str) -> set[str]:
            return self.edges.get(module, set())

    assert _components(Graph()) == [{"a", "b", "c"}]  # type: ignore[arg-type]
