"""web_fetch's decision on addresses as a pure function: every kind off the public internet, every spelling."""

from __future__ import annotations

import pytest

from rhapsody.core.access.addresses import literal
from rhapsody.core.access.permissions import Call, Rules, decide_call

OFF_THE_INTERNET = [
    ("169.254.169.254", "169.254.169.254, a link-local address (where cloud metadata services answer)"),
    ("[fe80::1]", "fe80::1, a link-local address"),
    ("10.1.2.3", "10.1.2.3, a private network address"),
    ("0xa010203", "0xa010203 is 10.1.2.3, a private network address"),
    ("192.168.1.1", "192.168.1.1, a private network address"),
    ("172.16.0.1", "172.16.0.1, a private network address"),
    ("100.64.0.1", "100.64.0.1, an address off the public internet"),
    ("[::]", "::, this machine (the unspecified address)"),
    ("[::ffff:169.254.169.254]", "::ffff:169.254.169.254 is 169.254.169.254, a link-local address"),
    ("[2002:7f00:1::]", "2002:7f00:1:: (carrying 127.0.0.1), this machine"),
    ("[64:ff9b::7f00:1]", "64:ff9b::7f00:1 (carrying 127.0.0.1), this machine"),
    ("224.0.0.1", "224.0.0.1, a multicast address"),
]


@pytest.mark.parametrize(("host", "said"), OFF_THE_INTERNET)
def test_every_address_off_the_public_internet_is_refused_in_yolo_and_named(host: str, said: str) -> None:
    decision = decide_call("yolo", Rules(), Call("web_fetch", f"http://{host}/x", writes=False, reads_files=False))
    assert decision.verdict == "deny" and said in decision.reason, decision.reason
    assert "unless a rule names the address" in decision.reason


def test_a_network_rule_names_its_addresses_and_a_glob_does_not() -> None:
    def verdict(allow: list[str], url: str) -> str:
        return decide_call("ask", Rules(allow=allow), Call("web_fetch", url, False, False)).verdict

    assert verdict(["web_fetch:10.0.0.0/8"], "http://0xa010203/") == "allow"
    assert verdict(["web_fetch:[fe80::/10]"], "http://[fe80::1]/") == "allow"
    assert verdict(["web_fetch:*"], "http://127.0.0.1/") == "deny"  # a glob is no rule naming this machine
    assert verdict(["web_fetch"], "http://2130706433/") == "deny"
    assert verdict(["web_fetch:*"], "http://8.8.8.8/") == "allow"  # public addresses go by the usual rules


def test_literals_are_read_as_the_resolver_reads_them_and_names_are_not_addresses() -> None:
    assert [str(literal(h)) for h in ("2130706433", "0x7f000001", "127.1", "0177.0.0.1", "::ffff:127.0.0.1")] == \
        ["127.0.0.1"] * 5
    assert [literal(h) for h in ("localhost", "docs.example", "1.2.3.4.example", "0x", "127.0.0.1.")] == [None] * 5
