"""A version made outside Dagster (a review import) is recorded as built in its own partition."""

import pandas as pd
from dagster import AssetKey, DagsterInstance

from rag_eval_pipeline.partitions import partition_key, register_partition
from rag_eval_pipeline.synthesis.records import record_imported_version


def _materializations(instance: DagsterInstance, name: str):
    result = instance.fetch_materializations(AssetKey(name), limit=10)
    return [record.asset_materialization for record in result.records]


def test_each_imported_table_is_materialized_in_its_partition():
    instance = DagsterInstance.ephemeral()
    register_partition(instance, "acme", "v2")
    golden = pd.DataFrame({"qa_id": ["a", "b"], "question_type": ["simple", "simple"], "question": ["q1", "q2"]})
    rejected = pd.DataFrame({"qa_id": ["c"], "stage": ["review"], "reason": ["rejected by reviewer"]})

    record_imported_version(instance, "acme", "v2", {"golden_set": golden, "rejected_qa": rejected}, "review of v1")

    expected_partition = str(partition_key("acme", "v2"))
    for name, rows in (("golden_set", 2), ("rejected_qa", 1)):
        [event] = _materializations(instance, name)
        assert event.partition == expected_partition
        assert event.description == "review of v1"
        assert event.metadata["dagster/row_count"].value == rows
    # The UI's partition status reads this: the imported partition counts as materialized.
    assert instance.get_materialized_partitions(AssetKey("golden_set")) == {expected_partition}
    assert _materializations(instance, "synthetic_qa") == []
