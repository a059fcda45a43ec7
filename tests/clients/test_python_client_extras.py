"""The Python client without its optional libraries: a missing one is the client's own error,
raised before any request, naming the extra that installs it."""

from __future__ import annotations

import sys

import httpx
import pytest
from malaria_risk_client import Client, ClientError, MissingDependency


def offline_client(**kw: object) -> tuple[Client, list[httpx.Request]]:
    """A client whose transport records requests and answers none (none should be made)."""
    sent: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(500)

    http = httpx.Client(transport=httpx.MockTransport(handler))
    return Client("http://127.0.0.1:9", "svc_test_x", http=http, **kw), sent  # type: ignore[arg-type]


@pytest.mark.parametrize(("frames", "module", "extra"), [("pandas", "pandas", "pandas"), ("polars", "polars", "polars")])
def test_a_missing_frame_library_is_a_client_error_naming_the_extra(monkeypatch: pytest.MonkeyPatch, frames: str,
                                                                     module: str, extra: str):
    monkeypatch.setitem(sys.modules, module, None)  # `import module` now fails as if it were not installed
    mr, sent = offline_client(frames=frames)
    with pytest.raises(MissingDependency) as e:
        mr.history_lga("NG020001")
    assert isinstance(e.value, ClientError) and isinstance(e.value, ImportError)
    assert f"pip install 'malaria-risk-client[{extra}]'" in str(e.value) and e.value.extra == extra
    assert sent == []  # nothing downloaded for a frame that cannot be made


def test_auto_frames_fall_back_then_say_what_to_install(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setitem(sys.modules, "polars", None)
    mr, _ = offline_client()
    assert mr._frames(None) == "pandas"
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(MissingDependency, match=r"polars or pandas is not installed.*\[polars\]"):
        mr.risk_states()


def test_outlines_without_geopandas(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setitem(sys.modules, "geopandas", None)
    doc = {"type": "FeatureCollection", "features": []}
    mr, _ = offline_client()
    mr._json = lambda *a, **k: doc  # type: ignore[method-assign]
    assert mr.boundaries("KN") == doc
    with pytest.raises(MissingDependency, match=r"malaria-risk-client\[geo\]"):
        mr.boundaries("KN", as_="geopandas")
