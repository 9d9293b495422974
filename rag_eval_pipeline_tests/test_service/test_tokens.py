"""Tokens: a tenant and its scopes come only from a token whose signature, expiry, issuer and audience check
out, with the local HS256 key or against an identity provider's JWKS (served here over real HTTP)."""

import base64
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from rag_eval_pipeline.service.tokens import (
    TokenPolicy,
    TokenRejected,
    TokenVerifier,
    issue,
    new_key,
    parse_scopes,
    parse_ttl,
    read_key,
)

POLICY = TokenPolicy(issuer="rag-eval", audience="rag-eval-gate")


@pytest.fixture
def key() -> bytes:
    return new_key().encode()


def _claims(**overrides) -> dict:
    now = int(time.time())
    claims = {
        "iss": "rag-eval",
        "aud": "rag-eval-gate",
        "sub": "acme-ci",
        "tenant": "acme",
        "scope": "read gate",
        "iat": now,
        "exp": now + 600,
    }
    return {k: v for k, v in {**claims, **overrides}.items() if v is not None}


def _rejected(verifier: TokenVerifier, token: str) -> TokenRejected:
    with pytest.raises(TokenRejected) as caught:
        verifier.verify(token)
    return caught.value


def test_an_issued_token_names_its_tenant_and_scopes(key):
    caller = TokenVerifier(POLICY, key=key).verify(issue(key, POLICY, "acme", ("read", "gate"), 60))
    assert (caller.tenant, caller.scopes, caller.subject) == ("acme", frozenset({"read", "gate"}), "acme-ci")
    caller.require("gate")
    assert _raised(lambda: caller.require("promote")).status == 403


def _raised(call) -> TokenRejected:
    with pytest.raises(TokenRejected) as caught:
        call()
    return caught.value


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"exp": int(time.time()) - 5}, "expired"),
        ({"aud": "another-service"}, "another audience"),
        ({"iss": "someone-else"}, "another issuer"),
        ({"tenant": None}, "no 'tenant' claim"),
        ({"tenant": "ACME'; --"}, "not a valid tenant name"),
        ({"exp": None}, "invalid"),
    ],
)
def test_a_token_with_a_bad_claim_is_refused(key, change, reason):
    token = jwt.encode(_claims(**change), key, algorithm="HS256")
    rejected = _rejected(TokenVerifier(POLICY, key=key), token)
    assert rejected.status == 401 and reason in rejected.reason


def test_a_token_signed_with_another_key_or_unsigned_is_refused(key):
    verifier = TokenVerifier(POLICY, key=key)
    forged = jwt.encode(_claims(tenant="globex"), new_key().encode(), algorithm="HS256")
    assert "signature" in _rejected(verifier, forged).reason
    header = base64.urlsafe_b64encode(json.dumps({"alg": "none", "typ": "JWT"}).encode()).rstrip(b"=")
    body = base64.urlsafe_b64encode(json.dumps(_claims()).encode()).rstrip(b"=")
    unsigned = f"{header.decode()}.{body.decode()}."
    assert "'none'" in _rejected(verifier, unsigned).reason
    assert _rejected(verifier, "not-a-token").reason == "the token is not a JWT"


def test_unknown_scopes_are_dropped_and_bad_scope_or_ttl_options_are_refused(key):
    token = jwt.encode(_claims(scope="read admin superuser"), key, algorithm="HS256")
    assert TokenVerifier(POLICY, key=key).verify(token).scopes == frozenset({"read"})
    assert parse_scopes("read, gate,read") == ("read", "gate")
    assert parse_ttl("30d") == 30 * 86400 and parse_ttl("15m") == 900
    for bad in ("admin", ""):
        with pytest.raises(ValueError, match="--scope"):
            parse_scopes(bad)
    for bad in ("0d", "10", "1w", "-1h"):
        with pytest.raises(ValueError, match="--ttl"):
            parse_ttl(bad)


def test_a_short_or_missing_key_file_is_one_line(tmp_path):
    short = tmp_path / "short.key"
    short.write_text("tooshort\n")
    with pytest.raises(ValueError, match="at least 32 are needed"):
        read_key(short)
    with pytest.raises(ValueError, match="cannot read the token key"):
        read_key(tmp_path / "missing.key")


class _Keys(BaseHTTPRequestHandler):
    jwks: dict = {}

    def do_GET(self):
        body = json.dumps(self.jwks).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def identity_provider():
    """An RSA and an EC signing key, their public halves served as a JWKS over HTTP."""
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ec_key = ec.generate_private_key(ec.SECP256R1())
    public = []
    for kid, private, algorithm in (("rsa-1", rsa_key, "RS256"), ("ec-1", ec_key, "ES256")):
        jwk = json.loads(jwt.get_algorithm_by_name(algorithm).to_jwk(private.public_key()))
        public.append({**jwk, "kid": kid, "use": "sig", "alg": algorithm})
    _Keys.jwks = {"keys": public}
    server = HTTPServer(("127.0.0.1", 0), _Keys)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/jwks.json", rsa_key, ec_key
    server.shutdown()


def test_provider_tokens_are_checked_against_its_jwks(identity_provider):
    url, rsa_key, ec_key = identity_provider
    verifier = TokenVerifier(POLICY, jwks_url=url)
    for kid, private, algorithm in (("rsa-1", rsa_key, "RS256"), ("ec-1", ec_key, "ES256")):
        token = jwt.encode(_claims(tenant="globex"), private, algorithm=algorithm, headers={"kid": kid})
        assert verifier.verify(token).tenant == "globex"
    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    forged = jwt.encode(_claims(), stranger, algorithm="RS256", headers={"kid": "rsa-1"})
    assert "signature" in _rejected(verifier, forged).reason
    # The HS256 "key confusion" attack: an HMAC token keyed with a published key is never accepted here.
    confused = jwt.encode(_claims(), b"x" * 64, algorithm="HS256", headers={"kid": "rsa-1"})
    assert "'HS256'" in _rejected(verifier, confused).reason


def test_the_verifier_wants_exactly_one_source_of_keys(key):
    for arguments in ({}, {"key": key, "jwks_url": "http://127.0.0.1:9/jwks.json"}):
        with pytest.raises(ValueError, match="exactly one way"):
            TokenVerifier(POLICY, **arguments)


@pytest.mark.parametrize("scope", [5, None, True, 1.5, {"read": 1}, ["read", 2]])
def test_a_scope_claim_of_another_type_is_refused(key, scope):
    token = jwt.encode({**_claims(), "scope": scope}, key, algorithm="HS256")
    assert _rejected(TokenVerifier(POLICY, key=key), token).reason.startswith("the token's scope claim is neither")


def test_a_scope_list_is_read_like_a_scope_string(key):
    token = jwt.encode(_claims(scope=["read", "promote", "root"]), key, algorithm="HS256")
    assert TokenVerifier(POLICY, key=key).verify(token).scopes == frozenset({"read", "promote"})
