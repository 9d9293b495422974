"""The tests' SeaweedFS runs on the shipped options (deploy/seaweedfs/server.options), as production's does:
it answers on 127.0.0.1 only, and nothing listens but the master, the volume server, the filer (whose HTTP
API is off) and the S3 gateway. Reuses the session's server."""

from __future__ import annotations

import http.client
import socket
import subprocess
import uuid
from pathlib import Path

import pytest

from rag_eval_pipeline_tests.support.object_store import server_options, weed_binary

pytestmark = pytest.mark.object_store


def _address(hex_address: str) -> tuple[str, int]:
    """(ip, port) of a /proc/net/tcp{,6} address: the ip in 32-bit words of host (little-endian) order."""
    ip, port = hex_address.split(":")
    raw = b"".join(bytes.fromhex(ip[i : i + 8])[::-1] for i in range(0, len(ip), 8))
    return socket.inet_ntop(socket.AF_INET if len(raw) == 4 else socket.AF_INET6, raw), int(port, 16)


def listening_addresses(pid: int) -> set[tuple[str, int]]:
    """Every TCP address the process listens on, from its socket inodes and the kernel's tables."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = fd.readlink().name
        except OSError:  # closed meanwhile
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    found = set()
    for table in ("tcp", "tcp6"):
        path = Path(f"/proc/net/{table}")
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                found.add(_address(fields[1]))
    return found


@pytest.fixture
def listening(s3) -> set[tuple[str, int]]:
    if not Path("/proc/net/tcp").exists():
        pytest.skip("reads the kernel's socket tables in /proc (Linux)")
    assert s3.pid is not None
    return listening_addresses(s3.pid)


def test_the_server_listens_on_loopback_only(listening) -> None:
    assert listening
    assert {ip for ip, _ in listening} == {"127.0.0.1"}


def test_nothing_listens_but_master_volume_filer_and_s3_gateway(s3, listening) -> None:
    """No WebDAV (7333), admin UI (23646), IAM, Iceberg (8181), Lance (9101), metrics or debug port."""
    assert {port for _, port in listening} == set(s3.ports.values())


def test_the_filer_serves_no_object_over_http(s3) -> None:
    key = f"exposure-{uuid.uuid4().hex[:8]}/secret.parquet"
    client = s3._client()
    client.put_object(Bucket=s3.bucket, Key=key, Body=b"another tenant's table")
    try:
        for method, path in (
            ("GET", f"/buckets/{s3.bucket}/{key}"),
            ("GET", f"/buckets/{s3.bucket}/"),
            ("PUT", f"/buckets/{s3.bucket}/{key}"),
            ("DELETE", f"/buckets/{s3.bucket}/{key}"),
        ):
            filer = http.client.HTTPConnection(s3.host, s3.ports["filer.port"], timeout=10)
            filer.request(method, path, body=b"overwritten" if method == "PUT" else None)
            response = filer.getresponse()
            body = response.read()
            filer.close()
            assert response.status == 404 and b"another tenant" not in body, (method, path, response.status)
        # Nor the S3 gateway without a key.
        gateway = http.client.HTTPConnection(s3.host, s3.ports["s3.port"], timeout=10)
        gateway.request("GET", f"/{s3.bucket}/{key}")
        response = gateway.getresponse()
        assert response.status == 403 and b"another tenant" not in response.read()
        gateway.close()
        assert client.get_object(Bucket=s3.bucket, Key=key)["Body"].read() == b"another tenant's table"
    finally:
        client.delete_object(Bucket=s3.bucket, Key=key)


def test_every_shipped_option_is_one_weed_server_knows() -> None:
    """weed ignores an unknown name in an options file without a word: a typo would leave a door open."""
    usage = subprocess.run([str(weed_binary()), "server", "-h"], capture_output=True, text=True, timeout=60)
    known = set()
    for line in (usage.stdout + usage.stderr).splitlines():
        words = line.split()
        if words and words[0].startswith("-"):
            known.add(words[0][1:])
    unknown = sorted(set(server_options()) - known)
    assert unknown == [], f"deploy/seaweedfs/server.options sets options `weed server` does not have: {unknown}"
