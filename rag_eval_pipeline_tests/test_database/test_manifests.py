"""Publishing a golden set in the results database: the manifest is a compare-and-set there too."""

import pytest

from rag_eval_pipeline.stores.database.results import DatabaseStore
from rag_eval_pipeline.synthesis.versions import GoldenSetImmutable, publish, read_manifest
from rag_eval_pipeline_tests.review_fixtures import ITEMS, golden_frame

pytestmark = [pytest.mark.postgres]


class _RacedStore(DatabaseStore):
    """The real store, in which another publisher's manifest lands after publish checked, before it writes."""

    def __init__(self, db, rival: DatabaseStore, rival_golden):
        super().__init__(db)
        self.rival, self.rival_golden = rival, rival_golden

    def write_text(self, tenant, version, filename, text):
        self.rival.write(tenant, version, "golden_set", self.rival_golden)
        publish(self.rival, tenant, version, self.rival_golden)
        self.write(tenant, version, "golden_set", golden_frame(ITEMS))  # this publisher's table again
        return super().write_text(tenant, version, filename, text)


def test_of_two_publishers_at_once_the_first_manifest_stays_and_the_other_is_told(app_database):
    tenant, golden, rival_golden = "manifest-race", golden_frame(ITEMS), golden_frame(ITEMS[:2])
    raced = _RacedStore(app_database, DatabaseStore(app_database), rival_golden)
    raced.write(tenant, "v1", "golden_set", golden)

    with pytest.raises(GoldenSetImmutable, match=f"{tenant}/v1 was published by another run at the same time"):
        publish(raced, tenant, "v1", golden)

    first = read_manifest(DatabaseStore(app_database), tenant, "v1")
    assert first is not None and first.n_items == 2  # the first publication stays


def test_a_published_manifest_reads_back_as_written(app_database):
    store, golden = DatabaseStore(app_database), golden_frame(ITEMS)
    store.write("manifest-once", "v1", "golden_set", golden)

    manifest = publish(store, "manifest-once", "v1", golden, source="review of v0", parent_version="v0")

    assert manifest == read_manifest(store, "manifest-once", "v1")
    assert (manifest.n_items, manifest.parent_version) == (4, "v0")
