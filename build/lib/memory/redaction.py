"""Secrets are taken out of everything the summarizer reads and of what it writes.

Each pattern replaces what it matches with a marker naming the kind of secret, so a
summary can still say that a key was pasted without repeating it. The patterns are
listed one by one, and each is tested on its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class SecretPattern:
    kind: str
    """What the marker calls it, e.g. "OpenAI key"."""
    regex: re.Pattern[str]
    keep_group: int = 0
    """For assignments: the group that holds the name, kept before the marker."""


def _p(kind: str, pattern: str, keep_group: int = 0, flags: int = 0) -> SecretPattern:
    return SecretPattern(kind, re.compile(pattern, flags), keep_group)


# Order matters: whole blocks and provider keys first, generic assignments last, so a
# key inside `api_key = sk-…` is named by its provider.
PATTERNS: tuple[SecretPattern, ...] = (
    _p("private key", r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
       r"[\s\S]*?(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|\Z)"),
    _p("Anthropic key", r"\bsk-ant-[A-Za-z0-9_-]{20,}"),
    _p("OpenAI key", r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"),
    _p("Stripe key", r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}"),
    _p("AWS access key", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    _p("GitHub token", r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,})"),
    _p("GitLab token", r"\bglpat-[A-Za-z0-9_-]{20,}"),
    _p("Google API key", r"\bAIza[0-9A-Za-z_-]{35}"),
    _p("Slack token", r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
    _p("Hugging Face token", r"\bhf_[A-Za-z0-9]{30,}"),
    _p("JSON web token", r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
    _p("bearer token", r"(\bBearer\s+)[A-Za-z0-9._~+/=-]{8,}", keep_group=1,
       flags=re.IGNORECASE),
    _p("credentials in a URL", r"(\b[a-z][a-z0-9+.-]*://[^\s:/@]+:)[^\s@/]+(?=@)",
       keep_group=1, flags=re.IGNORECASE),
    _p("password", r"(\b[\w.-]*(?:password|passwd|passphrase|pwd|secret)[\w.-]*[\"']?"
       r"\s*(?:=>|=|:)\s*)(?!\[redacted)(?:\"[^\"\n]*\"|'[^'\n]*'|[^\s,;'\"]+)",
       keep_group=1, flags=re.IGNORECASE),
    # Names like max_tokens are common and harmless: only long, key-like values count.
    _p("secret", r"(\b[\w.-]*(?:api[_-]?key|access[_-]?key|token|auth)[\w.-]*[\"']?"
       r"\s*(?:=>|=|:)\s*[\"']?)(?!\[redacted)[A-Za-z0-9_./+=-]{12,}",
       keep_group=1, flags=re.IGNORECASE),
)


def redact(text: str) -> str:
    """`text` with every secret replaced by a marker such as "[redacted OpenAI key]"."""
    for pattern in PATTERNS:
        marker = f"[redacted {pattern.kind}]"
        if pattern.keep_group:
            group = pattern.keep_group
            text = pattern.regex.sub(lambda m, g=group, k=marker: m.group(g) + k, text)
        else:
            text = pattern.regex.sub(marker, text)
    return text
