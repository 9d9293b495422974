"""The minimum spanning tree of HDBSCAN's mutual reachability distances, from nearest neighbours.

HDBSCAN's hierarchy is the single-linkage tree of the mutual reachability distance
    mreach(a, b) = max(core(a), core(b), |a - b|),
where core(a) is the distance from a to its min_samples-th nearest point (a itself counted first), so
its clusters depend on the data only through that distance's minimum spanning tree. Computing it over
all pairs grows with the square of the number of points. Here the tree is built by Boruvka's rounds
(every component joins its cheapest outgoing edge) from each point's k nearest neighbours, and each round
checks that the neighbour lists were enough: a point whose listed neighbours are all in its own component
may still have a cheaper edge outside the list, bounded below by max(core, distance to its k-th
neighbour); only such points are compared with every other point. The tree is exact, not approximate.
"""

from __future__ import annotations

import numpy as np
from scipy import sparse

NEIGHBOURS = 64  # enough that few points need the all-pairs check (benchmarks/clustering_curve.py)
BLOCK_ELEMENTS = 1 << 24  # rows x columns per similarity block: 64 MiB of float32
# Identical points: a sparse graph cannot hold an edge of weight 0. The smallest positive double keeps
# what HDBSCAN made of 0 before, a density of 1 / distance that overflows to infinity.
ZERO_DISTANCE = 5e-324


def mutual_reachability_tree(vectors: np.ndarray, min_samples: int, k: int = NEIGHBOURS) -> sparse.csr_matrix:
    """The tree as a symmetric sparse matrix of its n - 1 edge weights (Euclidean distances). The vectors
    must be of unit length (the neighbour search ranks by dot product), at least 2 of them, and
    min_samples at most their number."""
    if len(vectors) < 2 or not 1 <= min_samples <= len(vectors):
        raise ValueError(f"need 2 or more vectors and 1 <= min_samples <= {len(vectors)}, got {min_samples}")
    points = np.ascontiguousarray(vectors, dtype=np.float64)
    n = len(points)
    k = min(max(k, min_samples), n - 1)
    squared = np.einsum("ij,ij->i", points, points)
    neighbour_ids, neighbour_distances = nearest_neighbours(points, k)
    # The min_samples-th nearest, counting the point itself (distance 0) as the first.
    core = neighbour_distances[:, min_samples - 2] if min_samples >= 2 else np.zeros(n)
    reach = np.maximum(np.maximum(core[:, None], core[neighbour_ids]), neighbour_distances)
    # Below this, no point outside the list can be reached from the point.
    floor = np.maximum(core, neighbour_distances[:, -1])

    components = _UnionFind(n)
    rows: list[int] = []
    cols: list[int] = []
    weights: list[float] = []
    while components.count > 1:
        label = components.labels()
        joins = _cheapest_outgoing(points, squared, core, label, neighbour_ids, reach, floor)
        for weight, a, b in sorted(joins):
            if components.union(a, b):
                rows.append(a)
                cols.append(b)
                weights.append(max(weight, ZERO_DISTANCE))
    tree = sparse.coo_matrix((weights, (rows, cols)), shape=(n, n))
    return (tree + tree.T).tocsr()


def nearest_neighbours(points: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Each point's k nearest others, nearest first: ids and Euclidean distances.

    Candidates come from float32 products in blocks (the time goes there); their distances are then
    measured again in float64, so the order is the one exact distances give."""
    n = len(points)
    single = points.astype(np.float32)
    margin = min(k + 16, n - 1)  # float32 may swap near-equal neighbours at the edge of the list
    ids = np.empty((n, k), dtype=np.int64)
    distances = np.empty((n, k), dtype=np.float64)
    block = max(1, min(512, BLOCK_ELEMENTS // n))
    for start in range(0, n, block):
        stop = min(start + block, n)
        similarity = single[start:stop] @ single.T
        similarity[np.arange(stop - start), np.arange(start, stop)] = -np.inf  # not its own neighbour
        candidates = np.argpartition(-similarity, margin - 1, axis=1)[:, :margin]
        rows = np.arange(start, stop)[:, None]
        # Measured 64 rows at a time: the differences are rows x candidates x dimensions of float64.
        exact = np.vstack(
            [_distances(points, rows[i : i + 64], candidates[i : i + 64]) for i in range(0, len(rows), 64)]
        )
        order = np.argsort(exact, axis=1, kind="stable")[:, :k]
        ids[start:stop] = np.take_along_axis(candidates, order, axis=1)
        distances[start:stop] = np.take_along_axis(exact, order, axis=1)
    return ids, distances


def _distances(points: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Euclidean distances between points a[i, j] and b[i, j] (index arrays that broadcast), summed from
    the differences as scikit-learn's trees do: near points' distances keep their precision."""
    difference = points[a] - points[b]
    return np.sqrt(np.einsum("...d,...d->...", difference, difference))


def _cheapest_outgoing(points, squared, core, label, neighbour_ids, reach, floor) -> list[tuple[float, int, int]]:
    """(weight, a, b): each component's cheapest edge to another component."""
    n = len(label)
    listed = np.where(label[neighbour_ids] != label[:, None], reach, np.inf)
    pick = listed.argmin(axis=1)
    weight = listed[np.arange(n), pick]
    partner = neighbour_ids[np.arange(n), pick]
    # Each component's cheapest listed edge: sort by component, then weight, and take each run's first.
    order = np.lexsort((weight, label))
    firsts = order[np.flatnonzero(np.r_[True, label[order][1:] != label[order][:-1]])]
    best = {int(label[a]): (float(weight[a]), int(a), int(partner[a])) for a in firsts}
    # A point may have a cheaper edge than its listed ones only when they cost more than its floor, and
    # it can beat its component's best only when its floor is below that best.
    component_best = np.full(n, np.inf)
    component_best[label[firsts]] = weight[firsts]
    doubtful = np.flatnonzero((weight > floor) & (floor < component_best[label]))
    for component in np.unique(label[doubtful]):
        members = doubtful[label[doubtful] == component]
        best[int(component)] = _search_all(points, squared, core, label, members, floor, best[int(component)])
    return list(best.values())


def _search_all(points, squared, core, label, members, floor, best):
    """`best` (weight, a, b) improved by comparing `members` with every point outside their component,
    the lowest floors first, until no floor is below the best edge found."""
    outside = label != label[members[0]]
    members = members[np.argsort(floor[members], kind="stable")]
    block = max(1, min(128, BLOCK_ELEMENTS // (4 * len(label))))  # a few float64 arrays of block x n each
    for start in range(0, len(members), block):
        rows = members[start : start + block]
        rows = rows[floor[rows] < best[0]]
        if len(rows) == 0:
            break
        squared_distance = squared[rows, None] + squared[None, :] - 2.0 * (points[rows] @ points.T)
        reach = np.maximum(np.maximum(core[rows, None], core[None, :]), np.sqrt(np.maximum(squared_distance, 0.0)))
        reach[:, ~outside] = np.inf
        row, col = np.unravel_index(reach.argmin(), reach.shape)
        a, b = int(rows[row]), int(col)
        weight = max(core[a], core[b], float(_distances(points, np.array(a), np.array(b))))  # measured again, exactly
        if weight < best[0]:
            best = (weight, a, b)
    return best


class _UnionFind:
    def __init__(self, n: int):
        self.parent = np.arange(n)
        self.count = n

    def find(self, a: int) -> int:
        root = a
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[a] != root:  # path compression
            self.parent[a], a = root, self.parent[a]
        return int(root)

    def union(self, a: int, b: int) -> bool:
        root_a, root_b = self.find(a), self.find(b)
        if root_a == root_b:
            return False
        self.parent[root_b] = root_a
        self.count -= 1
        return True

    def labels(self) -> np.ndarray:
        """Each point's root, by following every parent pointer at once until none moves."""
        roots = self.parent.copy()
        while True:
            up = roots[roots]
            if np.array_equal(up, roots):
                return roots
            roots = up
