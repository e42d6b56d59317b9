"""Each redaction pattern on its own: the secret goes, the marker names it, the rest stays."""

import pytest

from memory.redaction import PATTERNS, redact

CASES = [
    ("private key", "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7\n"
                    "-----END RSA PRIVATE KEY-----", "MIIEowIBAAKCAQEA7"),
    ("private key", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXkt\n(cut)",
     "b3BlbnNzaC1rZXkt"),
    ("Anthropic key", "key sk-ant-api03-" + "Zx9" * 10, "sk-ant-api03-Zx9"),
    ("OpenAI key", "use sk-proj-" + "Ab1Cd2Ef3" * 4, "Ab1Cd2Ef3"),
    ("OpenAI key", "old sk-" + "q" * 48, "q" * 48),
    ("Stripe key", "stripe sk_live_" + "51Hx" * 6, "51Hx51Hx"),
    ("AWS access key", "id AKIAIOSFODNN7EXAMPLE here", "AKIAIOSFODNN7EXAMPLE"),
    ("GitHub token", "ghp_" + "a1B2" * 9, "a1B2a1B2"),
    ("GitHub token", "github_pat_11ABCDEFG0" + "x" * 50, "11ABCDEFG0"),
    ("GitLab token", "glpat-" + "Xy7_" * 5, "Xy7_Xy7_"),
    ("Google API key", "AIza" + "SyA-1234567890abcdefghijklmnopqrstu", "SyA-1234567890"),
    ("Slack token", "xoxb-123456789012-abcdefABCDEF", "123456789012"),
    ("Hugging Face token", "hf_" + "AbCdEfGhIj" * 4, "AbCdEfGhIj"),
    ("JSON web token", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N",
     "dozjgNryP4J3jVmNHl0w5N"),
    ("bearer token", "Authorization: Bearer abc.DEF-123_456", "abc.DEF-123_456"),
    ("credentials in a URL", "postgres://app:s3cretPass@db:5432/ledger", "s3cretPass"),
    ("password", "password=hunter22", "hunter22"),
    ("password", 'DB_PASSWORD: "correct horse battery"', "correct horse"),
    ("password", "client_secret => 'xyz-987'", "xyz-987"),
    ("secret", "api_key: 0123456789abcdefXYZ", "0123456789abcdefXYZ"),
    ("secret", "ACCESS_TOKEN=Zm9vYmFyYmF6cXV4MTIz", "Zm9vYmFyYmF6cXV4MTIz"),
]


@pytest.mark.parametrize(("kind", "text", "secret"), CASES,
                         ids=[f"{kind}-{i}" for i, (kind, _, _) in enumerate(CASES)])
def test_each_pattern_removes_its_secret_and_names_it(kind, text, secret):
    cleaned = redact(text)
    assert secret not in cleaned
    assert f"[redacted {kind}]" in cleaned


def test_every_pattern_has_a_case():
    assert {p.kind for p in PATTERNS} == {kind for kind, _, _ in CASES}


@pytest.mark.parametrize("text", [
    "max_tokens: 300",
    "The billing port is 8101 and the image is billing:2.1",
    "Use a strong password for the admin account.",
    "See https://example.com/docs/tokens for details.",
    "sk-short",
])
def test_ordinary_text_is_left_alone(text):
    assert redact(text) == text


def test_the_name_of_an_assignment_stays_so_the_summary_can_mention_it():
    assert redact("api_key = sk-proj-" + "Q" * 30) == "api_key = [redacted OpenAI key]"
    assert redact("password=hunter22, user=bob") == "password=[redacted password], user=bob"
