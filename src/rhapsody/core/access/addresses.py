"""Network addresses as web_fetch decides on them: every spelling made canonical, every kind named.

A host in a URL may spell one address many ways (`2130706433`, `0x7f000001`, `127.1`,
`[::ffff:127.0.0.1]` are all 127.0.0.1), and text rules cannot see that. Here a literal
host is read the way the system's resolver reads it (inet_aton's forms for IPv4), an
IPv6 address that carries an IPv4 one (mapped, 6to4, NAT64, Teredo) is judged on that
IPv4 address too, and an address off the public internet is named for a person:
"this machine", "a private network address", ...

Imports: stdlib only.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Iterator

IP = ipaddress.IPv4Address | ipaddress.IPv6Address
"""One canonical address."""
_INET_ATON = re.compile(r"[0-9a-fx.]+")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


def literal(host: str) -> IP | None:
    """The address a host spells in any form the resolver accepts, canonical; None for a name."""
    text = host.strip().lower().removeprefix("[").removesuffix("]").split("%")[0]
    try:
        return _unmapped(ipaddress.ip_address(text))
    except ValueError:
        pass
    if not _INET_ATON.fullmatch(text) or text.endswith("."):
        return None
    try:  # the legacy forms: 2130706433, 0x7f000001, 0177.0.0.1, 127.1
        return ipaddress.IPv4Address(socket.inet_aton(text))
    except OSError:
        return None


def _unmapped(address: IP) -> IP:
    """An IPv4-mapped IPv6 address as the IPv4 address it is."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        return address.ipv4_mapped
    return address


def embedded(address: IP) -> Iterator[IP]:
    """The address and every IPv4 address it carries (mapped, 6to4, NAT64, Teredo)."""
    yield address
    if not isinstance(address, ipaddress.IPv6Address):
        return
    if address.ipv4_mapped:
        yield address.ipv4_mapped
    if address.sixtofour:
        yield address.sixtofour
    if address.teredo:
        yield address.teredo[1]
    if address in _NAT64:
        yield ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)


def kind(address: IP) -> str:
    """What a person should hear about an address off the public internet; '' for a public one."""
    for each in embedded(address):
        named = _kind(each)
        if named:
            return named
    return ""


def _kind(address: IP) -> str:
    if address.is_loopback:
        return "this machine"
    if address.is_unspecified:
        return "this machine (the unspecified address)"
    if address.is_link_local:
        return "a link-local address (where cloud metadata services answer)"
    if address.is_multicast:
        return "a multicast address"
    if address.is_private:
        return "a private network address"
    if not address.is_global:
        return "an address off the public internet"
    return ""


def spoken(host: str, address: IP) -> str:
    """`host` as a person should read it: '2130706433 is 127.0.0.1, this machine'; an IPv6 address that carries
    an IPv4 one says which ('2002:7f00:1:: (carrying 127.0.0.1), this machine')."""
    carried = next((each for each in embedded(address) if _kind(each)), address)
    shown = str(address) if carried == address else f"{address} (carrying {carried})"
    named = kind(address)
    said = f"{shown}, {named}" if named else shown
    return said if host.strip("[]").lower() == str(address) else f"{host} is {said}"


def network_of(pattern: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    """The addresses a rule's pattern names (`127.0.0.1`, `[::1]`, `10.0.0.0/8`, `127.1`); None for a name or glob."""
    text = pattern.strip().removeprefix("[").replace("]", "", 1)
    try:
        return ipaddress.ip_network(text, strict=False)
    except ValueError:
        address = literal(pattern)
        return ipaddress.ip_network(address) if address is not None else None


def names(pattern: str, address: IP) -> bool:
    """Whether a rule's pattern names `address` (or an address it carries) as an address or a network."""
    network = network_of(pattern)
    return network is not None and any(each.version == network.version and each in network
                                       for each in embedded(address))
