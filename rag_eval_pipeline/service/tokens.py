"""Tokens: who a request is, from a verified JWT only.

A token names one tenant (the `tenant` claim, or the one RAG_EVAL_AUTH_TENANT_CLAIM names) and what it
may do (`scope`, space-separated, as in OAuth 2). It is accepted only when its signature, expiry,
issuer and audience all check out: HS256 with the local key (`rag-eval token issue`, one machine), or
RS256/ES256 against an identity provider's JWKS in production. The algorithm is never taken from the
token: an `alg: none` or an HS256 token signed with a public key is refused.
"""

from __future__ import annotations

import re
import secrets
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import jwt

from rag_eval_pipeline.core.names import validate_name

READ, GATE, PROMOTE, REVIEW = "read", "gate", "promote", "review"
SCOPES = (READ, GATE, PROMOTE, REVIEW)  # reading; gating a commit; promoting a baseline; reviewing golden sets
CI_SCOPES = (READ, GATE)  # what a CI job's token holds by default: promotion is a person's decision
LOCAL_ALGORITHM = "HS256"
PROVIDER_ALGORITHMS = ("RS256", "ES256")
MIN_KEY_BYTES = 32  # RFC 7518: an HS256 key at least as long as the hash
_TTL = re.compile(r"^(\d+)([smhd])$")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


class TokenRejected(Exception):
    """A request's token does not let it through; status 401 (who are you?) or 403 (not this)."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


@dataclass(frozen=True)
class Caller:
    """What a verified token says: the tenant, what it may do, and who it was issued to."""

    tenant: str
    scopes: frozenset[str]
    subject: str
    token_id: str

    def require(self, scope: str) -> None:
        if scope not in self.scopes:
            raise TokenRejected(403, f"the token of {self.subject} lacks the {scope!r} scope")


def parse_ttl(text: str) -> int:
    """'30d', '12h', '15m' or '90s' as seconds; ValueError otherwise."""
    match = _TTL.match(text.strip())
    if not match or int(match.group(1)) == 0:
        raise ValueError(f"--ttl must be a positive number with s, m, h or d (e.g. 30d), got {text!r}")
    return int(match.group(1)) * _SECONDS[match.group(2)]


def parse_scopes(text: str) -> tuple[str, ...]:
    """'read,gate' (or space-separated) as known scopes; ValueError naming an unknown one."""
    scopes = tuple(dict.fromkeys(s for s in re.split(r"[,\s]+", text.strip()) if s))
    unknown = [s for s in scopes if s not in SCOPES]
    if unknown or not scopes:
        raise ValueError(f"--scope must be some of {', '.join(SCOPES)}, got {text!r}")
    return scopes


def new_key() -> str:
    """A fresh random HS256 key (64 bytes of randomness, URL-safe text)."""
    return secrets.token_urlsafe(64)


def read_key(path: Path) -> bytes:
    """The local signing key; ValueError (one line) when it is missing, unreadable or too short."""
    try:
        key = path.read_bytes().strip()
    except OSError as error:
        raise ValueError(f"cannot read the token key RAG_EVAL_TOKEN_KEY_FILE={path}: {error.strerror}") from None
    if len(key) < MIN_KEY_BYTES:
        raise ValueError(
            f"the token key in {path} is {len(key)} bytes; at least {MIN_KEY_BYTES} are needed "
            "(`rag-eval token new-key --out FILE` writes one)"
        )
    return key


@dataclass(frozen=True)
class TokenPolicy:
    """What every token must carry, as the service settings say."""

    issuer: str
    audience: str
    tenant_claim: str = "tenant"


def issue(key: bytes, policy: TokenPolicy, tenant: str, scopes: tuple[str, ...], ttl_s: int, subject: str = "") -> str:
    """A token signed with the local key, for tenant with these scopes, valid for ttl_s seconds."""
    tenant = validate_name("tenant", tenant)
    now = int(time.time())
    claims = {
        "iss": policy.issuer,
        "aud": policy.audience,
        "sub": subject or f"{tenant}-ci",
        policy.tenant_claim: tenant,
        "scope": " ".join(scopes),
        "iat": now,
        "exp": now + ttl_s,
        "jti": uuid.uuid4().hex,
    }
    return jwt.encode(claims, key, algorithm=LOCAL_ALGORITHM)


class TokenVerifier:
    """Checks a bearer token against the local key or an identity provider's JWKS; a Caller or TokenRejected."""

    def __init__(self, policy: TokenPolicy, key: bytes | None = None, jwks_url: str = "") -> None:
        if (key is None) == (not jwks_url):
            raise ValueError(
                "the gate service needs exactly one way to check tokens: RAG_EVAL_TOKEN_KEY_FILE (a local key) "
                "or RAG_EVAL_AUTH_JWKS_URL (an identity provider)"
            )
        self.policy = policy
        self._key = key
        self._jwks = jwt.PyJWKClient(jwks_url, cache_keys=True, lifespan=300) if jwks_url else None
        self._algorithms = [LOCAL_ALGORITHM] if key is not None else list(PROVIDER_ALGORITHMS)

    def verify(self, token: str) -> Caller:
        claims = self._claims(token)
        tenant_value = claims.get(self.policy.tenant_claim)
        if not isinstance(tenant_value, str):
            raise TokenRejected(401, f"the token carries no {self.policy.tenant_claim!r} claim")
        try:
            tenant = validate_name("tenant", tenant_value)
        except ValueError:
            raise TokenRejected(401, "the token's tenant is not a valid tenant name") from None
        return Caller(tenant, _scopes(claims.get("scope", "")), str(claims["sub"]), str(claims.get("jti", "")))

    def _claims(self, token: str) -> dict:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise TokenRejected(401, "the token is not a JWT") from None
        if header.get("alg") not in self._algorithms:  # `none`, or a key type this service does not use
            raise TokenRejected(401, f"tokens signed with {header.get('alg')!r} are not accepted")
        try:
            key = self._jwks.get_signing_key_from_jwt(token).key if self._jwks is not None else self._key
            assert key is not None  # __init__ keeps exactly one of the two
            return jwt.decode(
                token,
                key,
                algorithms=self._algorithms,
                audience=self.policy.audience,
                issuer=self.policy.issuer,
                options={"require": ["exp", "iat", "iss", "aud", "sub"]},
            )
        except jwt.ExpiredSignatureError:
            raise TokenRejected(401, "the token has expired") from None
        except jwt.InvalidAudienceError:
            raise TokenRejected(401, "the token is for another audience") from None
        except jwt.InvalidIssuerError:
            raise TokenRejected(401, "the token is from another issuer") from None
        except jwt.InvalidSignatureError:
            raise TokenRejected(401, "the token's signature does not verify") from None
        except jwt.PyJWKClientError as error:
            raise TokenRejected(401, f"the token's signing key is unknown to the identity provider: {error}") from None
        except jwt.PyJWTError as error:
            raise TokenRejected(401, f"the token is invalid: {error}") from None


def _scopes(claim: object) -> frozenset[str]:
    """The known scopes of a `scope` claim: a space-separated string, or a list of strings; else refused."""
    if isinstance(claim, str):
        return frozenset(claim.split()) & set(SCOPES)
    if isinstance(claim, list) and all(isinstance(s, str) for s in claim):
        return frozenset(claim) & set(SCOPES)
    raise TokenRejected(401, "the token's scope claim is neither a string nor a list of strings")
