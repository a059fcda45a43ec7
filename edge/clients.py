"""Which network a client address counts as, and how many connections each may hold open.

One grouping for everything that bounds clients by address: the dashboard's sending budgets
(`dashboard.service`) and the connection caps of both local fronts (the API's direct front,
`edge/local/direct.py`, and the dashboard's, `dashboard/serve.py`). An IPv4 address is itself;
an IPv6 address counts by its /64 (one subscriber's allocation, so an attacker cannot make
new clients by changing the low bits); an IPv4-mapped IPv6 address as its IPv4 address.

Standard library only (`ipaddress`), like the rest of the edge.
"""

import ipaddress


def client_group(address: str) -> str:
    """The network `address` counts as. Parsed with `ipaddress`, so every text form of one address
    (compressed, expanded, zone, brackets) is one client; text that is no address counts as itself."""
    text = address.strip().strip("[]").split("%", 1)[0]
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


class ConnectionCap:
    """Open connections per client group in one process: `admit` counts one in (False when the
    group already holds `per_client`), `release` counts it out. A front's connections live in one
    event loop, so no lock is needed."""

    def __init__(self, per_client: int):
        self.per_client = per_client
        self.open: dict[str, int] = {}

    def admit(self, group: str) -> bool:
        n = self.open.get(group, 0)
        if n >= self.per_client:
            return False
        self.open[group] = n + 1
        return True

    def release(self, group: str) -> None:
        n = self.open.get(group, 0) - 1
        if n > 0:
            self.open[group] = n
        else:
            self.open.pop(group, None)
