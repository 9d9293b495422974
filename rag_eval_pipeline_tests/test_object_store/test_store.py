"""ObjectStore against a real S3-compatible server: layout, tenant isolation, failures in one line,
and writes that are never seen half done."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import numpy as np
import pandas as pd
import pytest

from rag_eval_pipeline.core.names import PartitionNameError
from rag_eval_pipeline.stores.object_store import (
    MissingTableError,
    ObjectStore,
    ObjectStoreError,
    ObjectStoreSettings,
    to_parquet_bytes,
)
from rag_eval_pipeline_tests.support.object_store import _free_ports

pytestmark = pytest.mark.object_store

DOWN_WITHIN_S = 60.0  # a down store fails in seconds (3 attempts, 2 s connect timeout), never hangs


def table(rows: int = 3, tag: str = "a") -> pd.DataFrame:
    return pd.DataFrame(
        {
            "chunk_id": [f"{tag}-{i}" for i in range(rows)],
            "score": [0.5 + i for i in range(rows)],
        }
    )


def _config(store_config: ObjectStoreSettings, **changes) -> ObjectStoreSettings:
    values = {
        name: getattr(store_config, name) for name in ("base_url", "endpoint_url", "access_key_id", "secret_access_key")
    }
    return ObjectStoreSettings(**{**values, **changes})


def _one_line(error: BaseException) -> str:
    message = str(error)
    assert "\n" not in message and len(message) < 600, message
    return message


def test_round_trip_keeps_lists_dicts_and_nan(store, tmp_path):
    frame = pd.DataFrame(
        {
            "text": ["alpha", "beta", None],
            "ids": [[1, 2], [], [3]],
            "meta": [{"page": 1, "source": "a.pdf"}, {"page": 2, "source": "b.pdf"}, {"page": None, "source": None}],
            "score": [0.25, np.nan, 1.5],
        }
    )
    store.write("acme", "v1", "document_chunks", frame)
    loaded = store.read("acme", "v1", "document_chunks")
    # Exactly what the local warehouse (Parquet on disk, same writer) gives back.
    frame.to_parquet(tmp_path / "local.parquet", index=False)
    pd.testing.assert_frame_equal(loaded, pd.read_parquet(tmp_path / "local.parquet"))
    assert list(loaded["ids"][0]) == [1, 2] and len(loaded["ids"][1]) == 0
    assert loaded["meta"][0] == {"page": 1, "source": "a.pdf"}
    assert np.isnan(loaded["score"][1]) and loaded["text"].isna().tolist() == [False, False, True]


def test_key_is_prefix_tenant_version_table(store, store_config):
    store.write("acme", "v2024-01", "chunk_clusters", table())
    found = store.fs.find(f"{store_config.bucket}/{store_config.prefix}")
    assert found == [f"{store_config.bucket}/{store_config.prefix}/acme/v2024-01/chunk_clusters.parquet"]
    assert store.url("acme", "v2024-01", "chunk_clusters") == f"s3://{found[0]}"


def test_tenants_never_read_each_other(store):
    store.write("acme", "v1", "synthetic_qa", table(tag="acme"))
    with pytest.raises(MissingTableError):
        store.read("globex", "v1", "synthetic_qa")
    store.write("globex", "v1", "synthetic_qa", table(rows=5, tag="globex"))
    assert store.read("acme", "v1", "synthetic_qa")["chunk_id"].str.startswith("acme-").all()
    assert store.read("globex", "v1", "synthetic_qa")["chunk_id"].str.startswith("globex-").all()
    assert len(store.read("acme", "v1", "synthetic_qa")) == 3


@pytest.mark.parametrize(
    "tenant, version, name",
    [
        ("..", "v1", "t"),
        ("acme/../globex", "v1", "t"),
        ("acme", "../v1", "t"),
        ("acme", "v1", "../t"),
        ("Acme", "v1", "t"),
        ("acme", "v1", "t/x"),
    ],
)
def test_names_that_could_leave_the_tenant_prefix_are_refused(store, tenant, version, name):
    with pytest.raises((PartitionNameError, ValueError)):
        store.write(tenant, version, name, table())
    assert store.fs.find(f"{store.config.bucket}/{store.config.prefix}") == []


def test_missing_table_says_materialize_it_first(store):
    with pytest.raises(FileNotFoundError, match="materialize it first") as caught:
        store.read("acme", "v1", "raw_documents")
    assert "'raw_documents'" in _one_line(caught.value) and "acme" in str(caught.value)
    assert not store.exists("acme", "v1", "raw_documents")


def test_overwrite_replaces_the_whole_table(store):
    store.write("acme", "v1", "generation_plan", table(rows=4))
    store.write("acme", "v1", "generation_plan", table(rows=2, tag="b"))
    assert store.read("acme", "v1", "generation_plan")["chunk_id"].tolist() == ["b-0", "b-1"]


def test_failed_serialization_uploads_nothing(store):
    store.write("acme", "v1", "rejected_qa", table())
    unserializable = pd.DataFrame({"mixed": [1, "two", object()]})
    with pytest.raises(Exception) as caught:
        store.write("acme", "v1", "rejected_qa", unserializable)
    assert not isinstance(caught.value, ObjectStoreError)
    pd.testing.assert_frame_equal(store.read("acme", "v1", "rejected_qa"), table())


# -- a misconfigured or unreachable store: one line naming the endpoint and bucket -----------------


def test_unknown_bucket_is_one_clear_line(store_config):
    store = ObjectStore(_config(store_config, base_url="s3://no-such-bucket/tables"))
    for action in (lambda: store.write("acme", "v1", "t", table()), lambda: store.read("acme", "v1", "t"), store.check):
        with pytest.raises(ObjectStoreError) as caught:
            action()
        message = _one_line(caught.value)
        assert "'no-such-bucket'" in message and "does not exist" in message and store_config.endpoint_url in message


def test_refused_credentials_are_one_clear_line(store_config):
    for changes in ({"secret_access_key": "wrong"}, {"access_key_id": "nobody"}):
        store = ObjectStore(_config(store_config, **changes))
        with pytest.raises(ObjectStoreError, match="credentials refused") as caught:
            store.write("acme", "v1", "t", table())
        assert store_config.endpoint_url in _one_line(caught.value)


def test_closed_port_fails_fast_in_one_line(store_config):
    endpoint = f"http://127.0.0.1:{_free_ports(1)[0]}"
    store = ObjectStore(_config(store_config, endpoint_url=endpoint))
    began = time.monotonic()
    with pytest.raises(ObjectStoreError, match="cannot connect") as caught:
        store.check()
    assert time.monotonic() - began < DOWN_WITHIN_S
    assert endpoint in _one_line(caught.value) and f"'{store_config.bucket}'" in str(caught.value)


@pytest.mark.parametrize(
    "changes, fragment",
    [
        ({"base_url": "http://bucket/x"}, "s3://<bucket>/<prefix>"),
        ({"base_url": "s3://B/x"}, "invalid object store URL"),
        ({"base_url": "s3://bucket/../x"}, "invalid object store URL"),
        ({"endpoint_url": "127.0.0.1:8333"}, "invalid object store endpoint"),
        ({"secret_access_key": ""}, "no credentials"),
    ],
)
def test_bad_settings_are_refused_before_any_request(changes, fragment):
    values = {
        "base_url": "s3://bucket/x",
        "endpoint_url": "http://127.0.0.1:1",
        "access_key_id": "k",
        "secret_access_key": "s",
        **changes,
    }
    with pytest.raises(ObjectStoreError, match=fragment.replace("(", r"\(")) as caught:
        ObjectStoreSettings(**values)
    _one_line(caught.value)


def test_secret_is_not_in_the_repr(store_config):
    assert store_config.secret_access_key not in repr(store_config)


def test_server_down_then_back_keeps_the_table(s3, store):
    frame = table(rows=6)
    store.write("acme", "v1", "document_chunks", frame)
    s3.kill()
    try:
        for action in (
            lambda: store.read("acme", "v1", "document_chunks"),
            lambda: store.write("acme", "v1", "document_chunks", table(rows=1)),
        ):
            began = time.monotonic()
            with pytest.raises(ObjectStoreError, match="cannot connect") as caught:
                action()
            assert time.monotonic() - began < DOWN_WITHIN_S
            message = _one_line(caught.value)
            assert s3.endpoint_url in message and f"'{s3.bucket}'" in message
    finally:
        s3.start()
    pd.testing.assert_frame_equal(store.read("acme", "v1", "document_chunks"), frame)


# -- a writer killed mid-upload ---------------------------------------------------------------------


class PausingProxy:
    """A TCP relay to the S3 server that stops forwarding the client's bytes once `pause_after`
    have passed, and says so: the server then holds exactly a partial request until `close()`."""

    def __init__(self, port: int, pause_after: int):
        self.target = ("127.0.0.1", port)
        self.pause_after = pause_after
        self.forwarded = 0
        self.paused = threading.Event()
        self._closing = threading.Event()
        self._sockets: list[socket.socket] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closing.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            self._sockets += [client, upstream]
            threading.Thread(target=self._pump, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, False), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, counted: bool) -> None:
        try:
            while data := source.recv(65536):
                if counted:
                    data = data[: max(0, self.pause_after - self.forwarded)]
                    self.forwarded += len(data)
                sink.sendall(data)
                if counted and self.forwarded >= self.pause_after:
                    self.paused.set()
                    self._closing.wait()
                    return
        except OSError:
            return

    def close(self) -> None:
        self._closing.set()
        for sock in [self._listener, *self._sockets]:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()


WRITER = """
import json, os, sys
import pandas as pd
from rag_eval_pipeline.stores.object_store import ObjectStore, ObjectStoreSettings
config = ObjectStoreSettings(**json.loads(sys.argv[1]))
frame = pd.DataFrame({"blob": [os.urandom(1 << 20) for _ in range(16)]})  # ~16 MiB, incompressible
ObjectStore(config).write("acme", "v1", "raw_documents", frame)
"""


def test_writer_killed_mid_upload_leaves_the_old_table(s3, store, store_config):
    old = table(rows=2)
    store.write("acme", "v1", "raw_documents", old)
    proxy = PausingProxy(int(s3.endpoint_url.rsplit(":", 1)[1]), pause_after=8 << 20)
    settings = {
        "base_url": store_config.base_url,
        "endpoint_url": f"http://127.0.0.1:{proxy.port}",
        "access_key_id": store_config.access_key_id,
        "secret_access_key": store_config.secret_access_key,
    }
    writer = subprocess.Popen([sys.executable, "-c", WRITER, json.dumps(settings)], stderr=subprocess.PIPE)
    try:
        assert proxy.paused.wait(timeout=120), writer.stderr.read().decode() if writer.poll() is not None else ""
        assert writer.poll() is None  # mid-upload: half the object is on the server, the writer waits
        os.kill(writer.pid, signal.SIGKILL)
        writer.wait()
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait()
        proxy.close()  # the server sees the connection end before the body does
    assert proxy.forwarded == 8 << 20
    pd.testing.assert_frame_equal(store.read("acme", "v1", "raw_documents"), old)
    prefix = f"{store_config.bucket}/{store_config.prefix}"
    assert store.fs.find(prefix) == [f"{prefix}/acme/v1/raw_documents.parquet"]
    assert store.fs.info(f"{prefix}/acme/v1/raw_documents.parquet")["size"] == len(to_parquet_bytes(old))


def _read_in_child(store: ObjectStore, results) -> None:
    try:
        results.put(store.read("acme", "v1", "chunk_clusters")["chunk_id"].tolist())
    except Exception as error:  # reported to the parent, which would otherwise wait for nothing
        results.put(repr(error))


def test_a_store_used_before_a_fork_works_in_the_child(store):
    """Dagster's multiprocess executor and Celery's prefork workers fork: s3fs refuses a parent's filesystem."""
    import multiprocessing

    store.write("acme", "v1", "chunk_clusters", table())
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    child = context.Process(target=_read_in_child, args=(store, results))
    child.start()
    try:
        assert results.get(timeout=60) == table()["chunk_id"].tolist()
    finally:
        child.join(timeout=30)
    assert child.exitcode == 0


def test_shared_store_is_one_per_configuration(store_config):
    from rag_eval_pipeline.stores.object_store import shared_object_store

    assert shared_object_store(store_config) is shared_object_store(_config(store_config))
    assert shared_object_store(store_config) is not shared_object_store(_config(store_config, base_url="s3://other/x"))
