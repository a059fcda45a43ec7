"""Print one LGA's history for a date range, and the highest-risk LGAs of the latest month.

    MALARIA_RISK_BASE_URL=… MALARIA_RISK_API_KEY=… python examples/history.py NG020001 2024-01 2024-12
"""

import sys

from malaria_risk_client import Client

lga, start, end = (sys.argv[1:4] + ["NG020001", "2024-01", "2024-12"][len(sys.argv[1:4]):])[:3]
with Client(frames="pandas") as mr:
    history = mr.history_lga(lga)
    window = history[(history["period"] >= start) & (history["period"] <= end)]
    print(window[["period", "kind", "score", "score_low", "score_high", "level"]].to_string(index=False))
    latest = mr.periods()["last_estimated"]
    top = mr.risk_lgas_all(latest).head(5)
    print(f"highest risk in {latest}:")
    print(top[["state_code", "lga", "score", "level"]].to_string(index=False))
