"""HDBSCAN clustering of unit vectors, on synthetic blobs (no embedding model needed)."""

from __future__ import annotations

import numpy as np
import pytest

from rag_eval_pipeline.synthesis.clustering import OUTLIER, cluster_chunks, min_cluster_size_for


def _unit_blob(rng: np.random.Generator, center: np.ndarray, n: int, noise: float = 0.05) -> np.ndarray:
    points = center + noise * rng.standard_normal((n, center.size))
    return points / np.linalg.norm(points, axis=1, keepdims=True)


def _two_blobs(n_each: int = 15, dim: int = 32, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a, b = np.zeros(dim), np.zeros(dim)
    a[0], b[1] = 1.0, 1.0  # orthogonal directions: cosine distance 1 between the blob centres
    return np.vstack([_unit_blob(rng, a, n_each), _unit_blob(rng, b, n_each)])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_two_well_separated_blobs_become_two_clusters(seed):
    vectors = _two_blobs(seed=seed)
    ids = [f"doc.md#{i}" for i in range(len(vectors))]

    frame = cluster_chunks(ids, vectors)

    assert frame["chunk_id"].tolist() == ids  # one row per chunk, in input order
    first, second = frame["cluster_id"][:15], frame["cluster_id"][15:]
    assert first.nunique() == 1 and second.nunique() == 1
    assert first.iloc[0] != second.iloc[0]
    assert OUTLIER not in set(frame["cluster_id"])
    assert not frame["is_outlier"].any()
    assert frame["membership"].between(0.0, 1.0).all()


def test_a_far_away_point_does_not_join_either_blob():
    vectors = _two_blobs(seed=3)
    stray = np.zeros(vectors.shape[1])
    stray[2] = 1.0
    vectors = np.vstack([vectors, stray])

    frame = cluster_chunks([f"c{i}" for i in range(len(vectors))], vectors)

    blob_labels = set(frame["cluster_id"][:30])
    assert len(blob_labels) == 2
    # A single point cannot form a cluster of min_cluster_size >= 2: it is an outlier.
    assert frame["cluster_id"].iloc[-1] == OUTLIER
    assert bool(frame["is_outlier"].iloc[-1]) is True
    assert frame["is_outlier"].tolist() == (frame["cluster_id"] == OUTLIER).tolist()


@pytest.mark.parametrize("n", [0, 1, 2, 3])
def test_fewer_than_four_chunks_form_one_group(n):
    vectors = _two_blobs()[[0, 15, 1][:n]] if n else np.zeros((0, 32))  # even points from different blobs

    frame = cluster_chunks([f"c{i}" for i in range(n)], vectors)

    assert len(frame) == n
    assert frame["cluster_id"].tolist() == [0] * n
    assert frame["membership"].tolist() == [1.0] * n
    assert not frame["is_outlier"].any()
    assert list(frame.columns) == ["chunk_id", "cluster_id", "is_outlier", "membership"]


def test_min_cluster_size_scales_with_the_corpus_within_bounds():
    sizes = [min_cluster_size_for(n) for n in (1, 4, 16, 64, 100, 400, 2500, 10_000, 1_000_000)]

    assert sizes[0] == 2 and sizes[1] == 2  # never below 2
    assert min_cluster_size_for(100) == 5  # sqrt(100) / 2
    assert min_cluster_size_for(400) == 10
    assert sizes[-1] == 25 and min_cluster_size_for(10_000) == 25  # capped at 25
    assert sizes == sorted(sizes)  # non-decreasing


def test_clusters_match_the_hdbscan_package_that_chose_the_sizes():
    # Three noisy blobs on which scikit-learn's HDBSCAN, given the same min_samples, finds 7 outliers:
    # it counts a point among its own neighbours. The hdbscan package, which min_cluster_size_for was
    # tuned with, found 2 clusters and no outlier here; so does cluster_chunks.
    rng = np.random.default_rng(5)
    points = np.vstack([np.eye(16)[i] + 0.25 * rng.standard_normal((20, 16)) for i in range(3)])
    vectors = points / np.linalg.norm(points, axis=1, keepdims=True)

    frame = cluster_chunks([f"c{i}" for i in range(len(vectors))], vectors)

    assert frame["cluster_id"].nunique() == 2
    assert not frame["is_outlier"].any()


def _overlapping_topics(n: int, dim: int = 48, seed: int = 0) -> np.ndarray:
    """Unit vectors around a few dozen topics that overlap, with duplicates: what real chunks look like to
    the neighbour search (many points whose neighbours are all in their own group)."""
    rng = np.random.default_rng(seed)
    topics = rng.standard_normal((max(3, n // 50), dim))
    points = topics[rng.integers(0, len(topics), n)] + rng.standard_normal((n, dim)) * rng.uniform(0.3, 1.2, (n, 1))
    points[-5:] = points[:5]  # the same text twice: zero distances
    return points / np.linalg.norm(points, axis=1, keepdims=True)


@pytest.mark.parametrize("k, min_samples", [(2, 2), (5, 4), (64, 4)])
def test_the_tree_from_neighbours_is_the_exact_minimum_spanning_tree(k, min_samples):
    """Few neighbours force the all-points search often; any k must give a tree as light as the exact one."""
    from scipy.sparse.csgraph import connected_components
    from scipy.spatial.distance import cdist

    from rag_eval_pipeline.core.neighbours import mutual_reachability_tree

    vectors = _overlapping_topics(400)
    distances = cdist(vectors, vectors)
    core = np.sort(distances, axis=1)[:, min_samples - 1]  # the point itself counted first
    reach = np.maximum(np.maximum(core[:, None], core[None, :]), distances)

    tree = mutual_reachability_tree(vectors, min_samples=min_samples, k=k).tocoo()

    assert tree.nnz == 2 * (len(vectors) - 1) and connected_components(tree)[0] == 1  # a spanning tree
    np.testing.assert_allclose(tree.data, reach[tree.row, tree.col], atol=1e-12)  # of this graph's edges
    np.testing.assert_allclose(tree.data.sum() / 2, _prim_weight(reach), rtol=1e-9)  # and the lightest


def _prim_weight(weights: np.ndarray) -> float:
    """The minimum spanning tree's weight of a complete graph, by Prim's algorithm over the full matrix."""
    in_tree = np.zeros(len(weights), dtype=bool)
    in_tree[0] = True
    cheapest, total = weights[0].copy(), 0.0
    for _ in range(len(weights) - 1):
        candidates = np.where(in_tree, np.inf, cheapest)
        joined = int(np.argmin(candidates))
        total += candidates[joined]
        in_tree[joined] = True
        cheapest = np.minimum(cheapest, weights[joined])
    return total


def test_clusters_match_hdbscan_over_all_pairs_on_a_few_thousand_chunks():
    """The neighbour-graph tree gives what scikit-learn's HDBSCAN over every pair gives (the code before it).

    Mutual reachability distances tie often (many equal a point's core distance), and HDBSCAN's labels
    depend on how its tree breaks those ties: scikit-learn's own two exact paths (a k-d tree, a full
    distance matrix) disagree on this data at an adjusted Rand index of 0.997. So: the same clusters but
    for ties, not the same ids."""
    from sklearn.cluster import HDBSCAN
    from sklearn.metrics import adjusted_rand_score

    vectors = _overlapping_topics(2500, seed=1)
    size = min_cluster_size_for(len(vectors))
    all_pairs = HDBSCAN(min_cluster_size=size, min_samples=max(1, size // 2) + 1, copy=True).fit(vectors)

    frame = cluster_chunks([f"c{i}" for i in range(len(vectors))], vectors)

    assert frame["cluster_id"].nunique() == len(set(all_pairs.labels_)) > 5
    assert adjusted_rand_score(all_pairs.labels_, frame["cluster_id"]) >= 0.99
    assert abs(frame["is_outlier"].mean() - (all_pairs.labels_ == OUTLIER).mean()) <= 0.01


def test_clusters_on_separated_topics_are_those_of_hdbscan_over_all_pairs_exactly():
    from sklearn.cluster import HDBSCAN
    from sklearn.metrics import adjusted_rand_score

    rng = np.random.default_rng(4)
    topics = rng.standard_normal((30, 64))
    vectors = topics[rng.integers(0, 30, 1500)] + 0.9 * rng.standard_normal((1500, 64))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    size = min_cluster_size_for(len(vectors))
    all_pairs = HDBSCAN(min_cluster_size=size, min_samples=max(1, size // 2) + 1, copy=True).fit(vectors)

    frame = cluster_chunks([f"c{i}" for i in range(len(vectors))], vectors)

    assert frame["cluster_id"].nunique() > 5
    # The same groups and outliers (ids may be numbered in another order) and the same memberships.
    assert adjusted_rand_score(all_pairs.labels_, frame["cluster_id"]) == 1.0
    assert frame["is_outlier"].tolist() == (all_pairs.labels_ == OUTLIER).tolist()
    np.testing.assert_allclose(frame["membership"], np.round(all_pairs.probabilities_, 4), atol=1e-4)


def test_identical_chunks_in_a_small_corpus_cluster_as_over_all_pairs():
    """A small corpus takes min_samples 2, so a chunk present twice has a mutual reachability of 0 to its
    copy: the tree keeps that as a density of infinity, as HDBSCAN over every pair does."""
    from sklearn.cluster import HDBSCAN
    from sklearn.metrics import adjusted_rand_score

    rng = np.random.default_rng(7)
    vectors = np.vstack([_unit_blob(rng, np.eye(16)[i % 3], 6, noise=0.3) for i in range(3)])
    vectors = np.vstack([vectors, vectors[:4], vectors[7:9]])  # copies of six chunks
    size = min_cluster_size_for(len(vectors))
    assert max(1, size // 2) + 1 == 2
    all_pairs = HDBSCAN(min_cluster_size=size, min_samples=2, copy=True).fit(vectors)

    frame = cluster_chunks([f"c{i}" for i in range(len(vectors))], vectors)

    assert adjusted_rand_score(all_pairs.labels_, frame["cluster_id"]) == 1.0
    np.testing.assert_allclose(frame["membership"], np.round(all_pairs.probabilities_, 4), atol=1e-4)


def test_the_tree_refuses_what_it_cannot_build():
    from rag_eval_pipeline.core.neighbours import mutual_reachability_tree

    with pytest.raises(ValueError, match="min_samples"):
        mutual_reachability_tree(np.eye(3), min_samples=4)
