"""Print one LGA's history for a date range, and the highest-risk LGAs of the latest month.

Runs on the client's base install (`pip install ./clients/python`): answers are read as JSON
(`as_="json"`), so no data frame library is needed. With an extra installed, drop `as_="json"` to get
a polars or pandas frame instead.

    MALARIA_RISK_BASE_URL=… MALARIA_RISK_API_KEY=… python examples/history.py NG020001 2024-01 2024-12
"""

import sys

from malaria_risk_client import Client, ClientError

# basis: survey_fit (within the survey rounds) or baseline_x_season (after the last survey); rank_low..rank_high:
# the 80 % range of the LGA's rank within its state (LGAs whose ranges overlap cannot be told apart)
COLUMNS = ("period", "kind", "score", "score_low", "score_high", "level", "provisional", "basis", "rank", "rank_low",
           "rank_high")


def table(rows: list[dict], columns: tuple[str, ...]) -> str:
    """Rows as aligned text columns."""
    cells = [[str(c) for c in columns]] + [["" if r.get(c) is None else str(r[c]) for c in columns] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
    return "\n".join("  ".join(v.rjust(w) for v, w in zip(row, widths, strict=True)) for row in cells)


def main(argv: list[str]) -> int:
    lga, start, end = (argv + ["NG020001", "2024-01", "2024-12"][len(argv):])[:3]
    try:
        with Client() as mr:
            months = mr.history_lga(lga, as_="json")["months"]
            print(table([m for m in months if start <= m["period"] <= end], COLUMNS))
            latest = mr.periods()["last_estimated"]
            top = mr.risk_lgas_all(latest, as_="json")["lgas"][:5]  # highest risk first
            print(f"highest risk in {latest}:")
            print(table(top, ("state_code", "lga", "score", "level", "rank", "rank_low", "rank_high", "evidence",
                              "survey_children_2018_band")))
    except ClientError as e:  # every error of the client: a bad key, an unknown LGA, the service away
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:4]))
