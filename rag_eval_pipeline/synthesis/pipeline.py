"""The synthesis path as three plain steps, shared by the Dagster assets and `rag-eval synthesize`.

test_nodes(chunks)             -> chunk_clusters: cluster, label, information, test-node rank
synthesize(chunks, clusters)   -> candidate items, generation failures, the per-type generation plan
verify(items, failures, plan)  -> golden set, rejected items (generation failures included), the plan
                                  with the kept counts (synthesis_plan)
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from rag_eval_pipeline.core.embeddings import Embedder, progress_logger
from rag_eval_pipeline.core.judging.judge import Judge
from rag_eval_pipeline.core.llm.client import LLMSettings
from rag_eval_pipeline.ingest.chunking import ChunkingSettings, chunk_document
from rag_eval_pipeline.ingest.parsing import Rejection, read_documents
from rag_eval_pipeline.synthesis.clustering import cluster_chunks, cluster_labels
from rag_eval_pipeline.synthesis.generation import generate_items
from rag_eval_pipeline.synthesis.items import QUESTION_TYPES, Generator, failures_frame, items_frame
from rag_eval_pipeline.synthesis.offline_generation import OfflineGenerator
from rag_eval_pipeline.synthesis.planning import DEFAULT_MIX, candidate_tasks, plan_counts
from rag_eval_pipeline.synthesis.test_nodes import rank_test_nodes
from rag_eval_pipeline.synthesis.verification import VerificationSettings, verify_items

DEFAULT_VERIFICATION = VerificationSettings()

_log = logging.getLogger(__name__)

GENERATION_PLAN_COLUMNS = ["question_type", "requested", "planned", "generated", "note"]
PLAN_COLUMNS = ["question_type", "requested", "planned", "generated", "kept", "note"]


def test_nodes(chunks: pd.DataFrame, embedder: Embedder, log: logging.Logger | None = None) -> pd.DataFrame:
    """Each phase's progress goes to `log` (a Dagster run's own log in the asset): a long step is never silent."""
    log = log or _log
    lap = _stopwatch()
    texts = chunks["text"].tolist()
    vectors = embedder.embed(texts, progress=progress_logger(log)) if texts else np.zeros((0, 0))
    log.info("embeddings of %d chunks ready (%.1f s)", len(texts), lap())
    clusters = cluster_chunks(chunks["chunk_id"].tolist(), vectors)
    log.info(
        "clustered: %d clusters, %d outliers (%.1f s)",
        clusters.loc[~clusters["is_outlier"], "cluster_id"].nunique(),
        int(clusters["is_outlier"].sum()),
        lap(),
    )
    labels = cluster_labels(texts, clusters["cluster_id"].tolist())
    clusters["cluster_label"] = clusters["cluster_id"].map(labels).fillna("")
    log.info("cluster labels ready (%.1f s)", lap())
    ranked = rank_test_nodes(chunks, clusters)
    log.info("information scored and %d test nodes ranked (%.1f s)", int((ranked["test_node_rank"] > 0).sum()), lap())
    return clusters.merge(ranked, on="chunk_id")


def _stopwatch() -> Callable[[], float]:
    """Seconds since the previous call (or since the stopwatch was made)."""
    last = time.perf_counter()

    def lap() -> float:
        nonlocal last
        now, since = time.perf_counter(), last
        last = now
        return now - since

    return lap


def synthesize(
    chunks: pd.DataFrame,
    clusters: pd.DataFrame,
    titles: dict[str, str],
    generator: Generator,
    n_items: int,
    mix: dict[str, float] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    plans = plan_counts(n_items, mix or DEFAULT_MIX, generator.supported_types)
    candidates = candidate_tasks(chunks, clusters, titles, plans)
    items, failures = generate_items(generator, plans, candidates)
    generated = pd.Series([i.question_type for i in items], dtype=object).value_counts()
    plan = pd.DataFrame(
        [
            {
                "question_type": p.question_type,
                "requested": p.requested,
                "planned": p.planned,
                "generated": int(generated.get(p.question_type, 0)),
                "note": p.note
                or _shortfall(
                    p.planned, int(generated.get(p.question_type, 0)), len(candidates.get(p.question_type, []))
                ),
            }
            for p in plans
        ],
        columns=GENERATION_PLAN_COLUMNS,
    )
    return items_frame(items), failures_frame(failures), plan


def _shortfall(planned: int, generated: int, candidates: int) -> str:
    if generated >= planned:
        return ""
    if candidates < planned:
        return f"only {candidates} candidate tasks in this corpus"
    return "the generator failed on the other tasks it tried (see rejected_qa, stage generation)"


def verify(
    items: pd.DataFrame,
    failures: pd.DataFrame,
    plan: pd.DataFrame,
    chunks: pd.DataFrame,
    judge: Judge,
    embedder: Embedder,
    settings: VerificationSettings = DEFAULT_VERIFICATION,
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    golden, rejected = verify_items(items, chunks, judge, embedder, settings)
    rejected = pd.concat([failures, rejected], ignore_index=True) if len(failures) else rejected
    kept = golden["question_type"].value_counts()
    plan = plan.assign(kept=[int(kept.get(t, 0)) for t in plan["question_type"]])[PLAN_COLUMNS]
    return golden, rejected, plan


def parse_mix(text: str) -> dict[str, float]:
    """'simple,unanswerable' (equal shares) or 'simple=3,multi_context=1' (weights)."""
    mix = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, weight = part.partition("=")
        if name not in QUESTION_TYPES:
            raise ValueError(f"unknown question type {name!r}; known: {', '.join(QUESTION_TYPES)}")
        try:
            mix[name] = float(weight) if weight else 1.0
        except ValueError:
            raise ValueError(f"the weight of {name!r} must be a number, got {weight!r}") from None
    if not mix:
        raise ValueError("no question types given")
    return mix


@dataclass
class FolderSynthesis:
    golden: pd.DataFrame
    rejected: pd.DataFrame
    plan: pd.DataFrame
    rejected_documents: list[Rejection]
    n_chunks: int


def build_generator(
    kind: str,
    chunk_texts: list[str],
    llm_settings: Callable[[], LLMSettings],
    cache_path: str | None,
    tenant: str | None = None,
) -> Generator:
    """'offline' (templates, knows the corpus) or 'llm' (the server `llm_settings()` names, imported only then,
    its call cache in tenant's namespace)."""
    if kind == "offline":
        return OfflineGenerator(chunk_texts)
    if kind == "llm":
        from rag_eval_pipeline.synthesis.llm_generation import build_llm_generator

        return build_llm_generator(llm_settings(), cache_path, tenant)
    raise ValueError(f"generator must be 'offline' or 'llm', got {kind!r}")


def from_folder(
    folder: Path,
    make_generator: Callable[[pd.DataFrame], Generator],
    judge: Judge,
    embedder: Embedder,
    n_items: int,
    mix: dict[str, float] | None = None,
    settings: VerificationSettings = DEFAULT_VERIFICATION,
) -> FolderSynthesis:
    """Documents of a folder (outside any tenant) to a verified golden set; no Dagster involved."""
    documents = read_documents(folder)
    if not documents.documents:
        reasons = "; ".join(f"{r.path}: {r.reason}" for r in documents.rejections[:5]) or "the folder holds no files"
        raise ValueError(f"no readable document in {folder} ({reasons})")
    chunks = pd.DataFrame([asdict(c) for d in documents.documents for c in chunk_document(d, ChunkingSettings())])
    if chunks.empty:  # e.g. documents with nothing but headings: no paragraph to write a question from
        names = ", ".join(d.path for d in documents.documents[:5])
        raise ValueError(f"the documents in {folder} hold no paragraphs of text to write questions from ({names})")
    titles = {d.doc_id: d.title for d in documents.documents}
    clusters = test_nodes(chunks, embedder)
    items, failures, plan = synthesize(chunks, clusters, titles, make_generator(chunks), n_items, mix)
    golden, rejected, plan = verify(items, failures, plan, chunks, judge, embedder, settings)
    return FolderSynthesis(golden, rejected, plan, documents.rejections, len(chunks))


def synthesize_folder(
    folder: Path,
    generator: str,
    judge: Judge,
    embedder: Embedder,
    n_items: int,
    mix: dict[str, float] | None = None,
    settings: VerificationSettings = DEFAULT_VERIFICATION,
    llm_settings: LLMSettings | None = None,
    cache_path: str | None = None,
) -> FolderSynthesis:
    """from_folder with the generator named: 'offline', or 'llm' on the server llm_settings name (checked
    before the folder is read and embedded); the one path of `rag-eval synthesize` and the API's synthesize()."""
    if generator == "llm" and llm_settings is None:
        raise ValueError("the LLM generator needs the judge's server: set its base URL and model")

    def server() -> LLMSettings:
        assert llm_settings is not None  # asked for by the LLM generator only, checked above
        return llm_settings

    def make_generator(chunks: pd.DataFrame) -> Generator:
        return build_generator(generator, chunks["text"].tolist(), server, cache_path)

    return from_folder(folder, make_generator, judge, embedder, n_items, mix, settings)
